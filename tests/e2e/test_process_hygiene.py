"""Real eipctl processes whose log pipe is closed by the reader still stop on a signal.

`eipctl scheduler ... 2>&1 | head -3` leaves the process writing its logs into a pipe nobody
reads. A log line it cannot write must be dropped (the process keeps working), and SIGTERM or
SIGINT must stop it within seconds, exit status 0. Every process runs in a session of its
own, and the whole session is SIGKILLed afterwards, whatever the test's outcome.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
STOP_WITHIN = 5.0  # seconds from the signal to the exit (the runner's own grace is 10 s)


def _clean_env() -> dict[str, str]:
    """The test's environment without EIPCTL_* variables that would change the flags."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EIPCTL_")}


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The API emulator as a process of its own, with the eipctl CRDs; its kubeconfig."""
    path = tmp_path_factory.mktemp("emulator") / "kubeconfig"
    cmd = [sys.executable, "-m", "kubemu", "--port", "0"]
    cmd += ["--kubeconfig-out", str(path), "--crds", str(CRDS)]
    log = (path.parent / "emulator.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=_clean_env(), start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + 30
        while not _is_kubeconfig(path):
            assert proc.poll() is None, (path.parent / "emulator.log").read_text()
            assert time.monotonic() < deadline, "the emulator wrote no kubeconfig in 30 s"
            time.sleep(0.05)
        yield path
    finally:
        _kill_session(proc)


def _is_kubeconfig(path: Path) -> bool:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and bool(data.get("clusters"))


def _read_until_quiet(
    fd: int, started: bytes = b"process.started", quiet: float = 1.0, limit: float = 20.0
) -> bytes:
    """What the process writes until it has written `started`, then nothing for `quiet` s."""
    out = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + limit
        last = time.monotonic()
        while time.monotonic() < deadline:
            if sel.select(0.05):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                out += chunk
                last = time.monotonic()
            elif started in out and time.monotonic() - last >= quiet:
                break
    return out


def _start(argv: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m eipctl ARGV` with stdout and stderr on one pipe; (process, read end)."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "eipctl", *argv],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            env=_clean_env(),
            start_new_session=True,
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return proc, read_end


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _flags(command: str, kubeconfig: Path) -> list[str]:
    common = [
        f"--kubeconfig={kubeconfig}",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
    ]
    key = kubeconfig.parent / "liveness.key"  # the scheduler and the controller refuse without
    if not key.exists():
        key.write_text(secrets.token_urlsafe(32) + "\n")
    if command == "controller":  # no claims on the emulator: the link is only read
        # liveness on loopback, on a free port (the host namespace is shared)
        liveness = ["--liveness-address=127.0.0.1", f"--liveness-port={_free_udp_port()}"]
        node = ["--iface=lo", "--node-name=hygiene-node", f"--liveness-key-file={key}"]
        return [*common, *node, *liveness]
    if command == "scheduler":
        common.append(f"--liveness-key-file={key}")
    return [*common, "--lease-namespace=default", f"--identity=hygiene-{command}"]


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        ("scheduler", signal.SIGTERM),
        ("scheduler", signal.SIGINT),
        ("allocator", signal.SIGTERM),
        ("nodeips", signal.SIGTERM),
        ("controller", signal.SIGTERM),  # the stock asyncio loop; the others run on uvloop
    ],
)
def test_a_process_whose_log_pipe_is_closed_stops_on_a_signal(
    command: str, signum: signal.Signals, kubeconfig: Path
) -> None:
    proc, read_end = _start([command, *_flags(command, kubeconfig)])
    try:
        try:
            seen = _read_until_quiet(read_end)
        finally:
            os.close(read_end)  # the reader goes away, as `| head -3` does
        assert proc.poll() is None, f"{command} exited before the test closed its pipe:\n{seen!r}"
        time.sleep(0.5)
        assert proc.poll() is None, f"{command} died of its closed log pipe"
        proc.send_signal(signum)
        assert _exit_status(proc) == 0, f"{command} exited non-zero after {signum.name}"
    finally:
        _kill_session(proc)


def _exit_status(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(STOP_WITHIN)
    except subprocess.TimeoutExpired:
        pass
    pytest.fail(f"{proc.args!r} still runs {STOP_WITHIN} s after the signal")


def _session_members(sid: int) -> list[int]:
    """Live processes of session `sid` (Linux /proc; zombies do not count)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(stat.parent.name))
    return members


def test_a_sandbox_whose_output_pipe_is_closed_stops_on_sigterm(tmp_path: Path) -> None:
    """Its logs go to files, its table to stdout: it must still stop, children and all."""
    argv = ["sandbox", "--nodes=1", "--services=0", f"--state-dir={tmp_path / 'state'}"]
    proc, read_end = _start([*argv, f"--kubeconfig-out={tmp_path / 'kubeconfig'}"])
    try:
        try:
            seen = _read_until_quiet(read_end, started=b"node-1")
        finally:
            os.close(read_end)
        assert proc.poll() is None, f"the sandbox exited early:\n{seen!r}"
        proc.send_signal(signal.SIGTERM)
        _exit_status(proc)  # the table could not be written: its status is not the point
        deadline = time.monotonic() + STOP_WITHIN
        while (left := _session_members(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, f"the sandbox left processes behind: {left}"
    finally:
        _kill_session(proc)
