"""Real processes of the bed: started with their output in a log file, signalled on demand.

Every child gets PR_SET_PDEATHSIG=SIGKILL, so it dies with the test process even when that
is SIGKILLed; its pid also goes into ``<run dir>/pids`` so a later run can finish off
anything a crash left (`reap_leftover_processes`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Process:
    """One supervised process (`eipctl scheduler`, a node's controller, the emulator...)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        *,
        netns: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.netns = netns
        self.env = env
        self.log_path = log_dir / f"{name}.log"
        self.pid_file = log_dir / "pids"
        self.popen: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.last_start_offset = 0
        """`log_size()` when the current run began (its log lines come after it)."""

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def start(self) -> None:
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        argv = self.argv
        if self.netns is not None:  # `ip netns exec` execs in place: the pid stays the same
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.starts += 1
        self.last_start_offset = self.log_size()
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(self.env or {})},
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl, no locks taken
                start_new_session=True,  # Ctrl-C in the terminal reaches the test, not these
            )
        with self.pid_file.open("a") as f:
            f.write(f"{self.popen.pid} {self.name}\n")

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive:
            assert self.popen is not None
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL (a crash): nothing is released, nothing is cleaned up."""
        if self.popen is None:
            return
        self.signal(signal.SIGCONT)  # a stopped process dies at once, too
        self.signal(signal.SIGKILL)
        self.popen.wait(10)

    def terminate(self, grace: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns the exit status."""
        if self.popen is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.popen.returncode

    def freeze(self) -> None:
        self.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.signal(signal.SIGCONT)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_since(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll `predicate()` until it returns something truthy; return that, or raise."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def reap_leftover_processes(parent: Path, prefix: str) -> list[str]:
    """SIGKILL processes listed in run dirs ``parent/prefix<pid>-*`` whose test run is dead.

    A pid is killed only if it still runs something of ours (its command line mentions
    eipctl), so a recycled pid is never hit. The run dir itself is kept (its logs).
    """
    killed = []
    for run_dir in parent.glob(f"{prefix}*"):
        owner = run_dir.name.removeprefix(prefix).split("-", 1)[0]
        if not owner.isdigit() or Path(f"/proc/{owner}").exists():
            continue
        pid_file = run_dir / "pids"
        if not pid_file.exists():
            continue
        for line in pid_file.read_text().splitlines():
            pid_text, _, name = line.partition(" ")
            if pid_text.isdigit() and "eipctl" in _cmdline(int(pid_text)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_text), signal.SIGKILL)
                killed.append(f"{name}({pid_text})")
        pid_file.unlink(missing_ok=True)
    return killed


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP behave like Ctrl-C in scripts, so `with LocalBed()` cleans
    up. SIGINT too: a script started from a non-interactive shell's background job inherits
    SIGINT ignored, and Python then installs no KeyboardInterrupt for it."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
