"""The allocator and the scheduler as supervised child processes.

Why child processes rather than tasks in the sandbox's loop: they are the real commands with
the real flags, on their own loop (uvloop, as in production), so a crash or a stall in one
cannot take the API emulator or the simulated nodes down with it, and a leader-election
hiccup looks exactly as it would in a cluster. Output goes to ``<state dir>/<name>.log``.

A child that exits while the sandbox runs is started again after a growing delay. Stopping
sends SIGTERM (the processes finish in-flight work and release their Lease), then SIGKILL
after a grace period. Children run in their own session (Ctrl-C in the terminal reaches only
the sandbox, which stops them in order) and die with the sandbox if it is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

RESTART_DELAY_MIN = 0.5
RESTART_DELAY_MAX = 10.0
STABLE_AFTER = 30.0  # a child that ran this long gets its restart delay reset


def component_argv(
    command: str,
    kubeconfig: Path,
    log_level: str,
    *,
    liveness_key_file: Path | None = None,
    metrics_bind_address: str = "0",
) -> list[str]:
    """Flags for `eipctl allocator` / `eipctl scheduler` inside the sandbox (the scheduler
    also gets the liveness key it signs its probes with); /metrics is off unless
    `metrics_bind_address` names where (`eipctl sandbox --metrics`)."""
    key = [] if liveness_key_file is None else ["--liveness-key-file", str(liveness_key_file)]
    return [
        command,
        *key,
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        metrics_bind_address,
        "--health-probe-bind-address",
        "0",
        "--lease-namespace",
        "default",
        "--identity",
        f"sandbox-{command}",
        "--log-level",
        log_level,
    ]


@dataclass
class ChildStatus:
    name: str
    pid: int | None
    running: bool
    starts: int
    last_exit: int | None
    log_path: str


@dataclass
class Child:
    """One supervised child: `python -m eipctl.sandbox.child <our pid> <argv...>`."""

    name: str
    argv: list[str]
    log_path: Path
    prefix: list[str] = field(default_factory=list)  # e.g. ["ip", "netns", "exec", NS]
    starts: int = 0
    last_exit: int | None = None
    _proc: asyncio.subprocess.Process | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)

    def status(self) -> ChildStatus:
        running = self._proc is not None and self._proc.returncode is None
        pid = self._proc.pid if self._proc is not None else None
        return ChildStatus(self.name, pid, running, self.starts, self.last_exit, str(self.log_path))

    async def _spawn(self) -> asyncio.subprocess.Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            *self.prefix,
            *(sys.executable, "-m", "eipctl.sandbox.child", str(os.getpid())),
            *self.argv,
        ]
        with self.log_path.open("ab") as out:
            out.write(f"--- start {self.starts + 1}: {' '.join(argv)}\n".encode())
            out.flush()
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        log.info("child.started", child=self.name, pid=proc.pid, starts=self.starts)
        return proc

    async def supervise(self) -> None:
        """Keep the child running until `stop` is called (run as a task)."""
        delay = RESTART_DELAY_MIN
        while not self.is_stopping():
            started = time.monotonic()
            self._proc = await self._spawn()
            code = await self._proc.wait()
            self.last_exit = code
            if self.is_stopping():
                break
            if time.monotonic() - started > STABLE_AFTER:
                delay = RESTART_DELAY_MIN
            log.warning("child.exited", child=self.name, code=code, restart_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_DELAY_MAX)

    def stopping(self) -> None:
        """No more restarts from now on."""
        self._stopping = True

    def is_stopping(self) -> bool:
        return self._stopping

    async def kill(self) -> None:
        """SIGKILL: the process dies without a word (a machine losing power)."""
        self._stopping = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        self.last_exit = proc.returncode

    async def stop(self, grace: float) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns once the child is gone."""
        self._stopping = True
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace):
                await proc.wait()
        except TimeoutError:
            log.warning("child.kill", child=self.name, pid=proc.pid, after=grace)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        self.last_exit = proc.returncode
        log.info("child.stopped", child=self.name, code=proc.returncode)


class Children:
    """The set of supervised children, started and stopped together."""

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for child in self.children:
            self._tasks.append(asyncio.create_task(child.supervise(), name=f"child-{child.name}"))

    def add(self, child: Child) -> None:
        """Supervise one more child from now on (a component started again under a new
        name, e.g. a benchmark's restarted allocator); `stop` stops it with the rest."""
        self.children.append(child)
        self._tasks.append(asyncio.create_task(child.supervise(), name=f"child-{child.name}"))

    def statuses(self) -> list[ChildStatus]:
        return [c.status() for c in self.children]

    async def stop(self, grace: float = 5.0) -> None:
        """Stop supervising (no restarts), then stop every child in parallel."""
        for child in self.children:
            child.stopping()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await asyncio.gather(*(c.stop(grace) for c in self.children))
