"""`eipctl sandbox [run|kill-node|revive-node|move-endpoint|status] [NODE]`.

`run` boots the sandbox and shows the live table until Ctrl-C, SIGTERM or --duration; the
other actions talk to a running sandbox through the control socket in --state-dir.

The sandbox runs on the stock asyncio loop: it hosts the simulated nodes' controllers, and
the controller does not run under uvloop (pyroute2#1335). Its own logs go to
``<state dir>/sandbox.log`` (the terminal belongs to the table); the allocator's and the
scheduler's to ``allocator.log`` and ``scheduler.log`` next to it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import structlog

from eipctl.runtime.config import SandboxSettings
from eipctl.runtime.logsetup import configure_logging
from eipctl.sandbox.boot import check_pool_cidr
from eipctl.sandbox.control import ControlError, request
from eipctl.sandbox.keys import KeyReader
from eipctl.sandbox.limits import raise_file_limit
from eipctl.sandbox.netns import unavailable as netns_unavailable

log = structlog.get_logger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def main(action: str, node: str | None, settings: SandboxSettings) -> int:
    if action == "run":
        if node:
            return _usage(f"`run` takes no node name (got {node!r})")
        return run(settings)
    if action in ("kill-node", "revive-node", "move-endpoint"):
        if not node:
            return _usage(f"{action} needs a node name, e.g. `eipctl sandbox {action} node-1`")
        return _control(settings, {"action": action, "node": node})
    if action == "status":
        return _control(settings, {"action": "status"})
    return _usage(f"unknown action {action!r}")


def _usage(message: str) -> int:
    sys.stderr.write(f"eipctl sandbox: error: {message}\n")
    return EXIT_USAGE


def _control(settings: SandboxSettings, payload: dict[str, str]) -> int:
    try:
        reply = asyncio.run(request(settings.state_dir, payload))
    except ControlError as exc:
        sys.stderr.write(f"eipctl sandbox: {exc}\n")
        return EXIT_FAILED
    stream = sys.stdout if reply.get("ok") else sys.stderr
    stream.write(f"{reply.get('message', '')}\n")
    return EXIT_OK if reply.get("ok") else EXIT_FAILED


def _log_to_file(path: Path, level: str) -> TextIO:
    """structlog and stdlib logging into `path` (line-buffered), not onto the table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stream = path.open("a", buffering=1, encoding="utf-8")
    configure_logging("text", level, "sandbox")
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))
    logging.basicConfig(level=logging.WARNING, stream=stream, force=True)
    return stream


def run(settings: SandboxSettings) -> int:
    try:
        pool_cidr = check_pool_cidr(settings.pool_cidr)
    except ValueError as exc:
        return _usage(str(exc))
    if settings.netns and (reason := netns_unavailable()) is not None:
        return _usage(reason)
    settings = replace(settings, pool_cidr=pool_cidr)
    log_stream = _log_to_file(Path(settings.state_dir) / "sandbox.log", settings.log_level)
    if not settings.netns:
        raise_file_limit(settings.nodes)
    try:
        return asyncio.run(_run(settings))
    except asyncio.CancelledError:  # a second Ctrl-C cut the shutdown short
        sys.stderr.write("eipctl sandbox: interrupted\n")
        return 130
    finally:
        log_stream.close()


async def _run(settings: SandboxSettings) -> int:
    from eipctl.sandbox.session import Sandbox

    out = sys.stdout
    tty = out.isatty()
    sandbox = Sandbox(settings, out=out, tty=tty)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        stop.set()  # before the log line, which could fail
        if signals > 1 and current is not None:
            current.cancel()  # a second Ctrl-C: stop waiting for graceful shutdown
        log.info("signal.received", signal=signal.Signals(signum).name, count=signals)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await sandbox.boot(stop)
    except ControlError as exc:
        sys.stderr.write(f"eipctl sandbox: {exc}\n")
        return EXIT_FAILED
    except OSError as exc:
        sys.stderr.write(f"eipctl sandbox: cannot start: {exc}\n")
        return EXIT_FAILED
    try:
        stdin = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):  # no stdin at all
        stdin = -1
    keys = KeyReader(stdin, lambda key: sandbox.on_key(key, stop))
    if tty:
        out.write("\x1b[?25l")  # hide the cursor while the table redraws
        sandbox.set_header(keys=keys.start())
    reader_gone = False
    try:
        await sandbox.run(stop)
    except BrokenPipeError:  # `eipctl sandbox | head`: stop, as ping or kubectl -w do
        reader_gone = True
        log.info("sandbox.output_closed")
    finally:
        keys.stop()
        await sandbox.shutdown()
        if not reader_gone:
            reader_gone = not _write_lines(
                out, (["\x1b[?25h"] if tty else []) + [f"{line}\n" for line in sandbox.summary()]
            )
    if reader_gone:
        _silence_stdout()
    return EXIT_OK


def _write_lines(out: TextIO, lines: list[str]) -> bool:
    """False if the reader of `out` has gone."""
    try:
        out.write("".join(lines))
        out.flush()
    except BrokenPipeError:
        return False
    return True


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's flush at exit does not fail on
    the closed pipe (and turn a clean stop into exit 120 and a traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
