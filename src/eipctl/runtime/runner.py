"""The lifecycle every eipctl process shares: logging, event loop, probes, signals.

The first SIGTERM/SIGINT sets the `stop` event: the process stops taking new work and
finishes what it is doing. A second signal, or a process that has not returned within
`grace` seconds, is cancelled outright. Logging cannot get in the way: the handler acts
before it logs, and a line that cannot be written is dropped (`logsetup.DroppingStream`).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Sequence

import structlog

from eipctl.kube.errors import KubeConfigError
from eipctl.runtime.config import CommonSettings
from eipctl.runtime.health import BindError, Health
from eipctl.runtime.logsetup import configure_logging
from eipctl.runtime.settings import Deprecation, usage_error

log = structlog.get_logger(__name__)

BIND_FLAGS = {"metrics": "--metrics-bind-address", "probes": "--health-probe-bind-address"}


def run_process(
    component: str,
    settings: CommonSettings,
    main: Callable[..., Awaitable[None]],
    *,
    use_uvloop: bool,
    grace: float = 10.0,
    deprecations: Sequence[Deprecation] = (),
) -> int:
    """Run `main(settings, health=..., stop=...)` to completion; returns the exit status.

    Each flag given under its old name is logged first, as a warning.
    """
    configure_logging(settings.log_format, settings.log_level, component)
    log_deprecations(deprecations)
    coro = _supervise(component, settings, main, grace)
    if use_uvloop:
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def log_deprecations(deprecations: Sequence[Deprecation]) -> None:
    """One warning per flag given under its old name (`runtime.settings.Deprecation`)."""
    for old in deprecations:
        log.warning(
            "flag.deprecated",
            flag=f"--{old.flag}",
            replacement=f"--{old.replacement}",
            source=old.source,
            applied=old.applied,
            detail=old.text,
        )


async def _supervise(
    component: str,
    settings: CommonSettings,
    main: Callable[..., Awaitable[None]],
    grace: float,
) -> int:
    stop = asyncio.Event()
    health = Health()
    loop = asyncio.get_running_loop()
    task: asyncio.Task[None] | None = None
    signals_seen = 0

    def cancel() -> None:
        if task is not None:
            task.cancel()

    def on_signal(signum: int) -> None:
        """Act first, log after: a log line that fails must not keep the process running."""
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen == 1:
            stop.set()
            loop.call_later(grace, cancel)
        else:
            cancel()
        log.info("signal.received", signal=signal.Signals(signum).name, count=signals_seen)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:  # before main runs: a busy port is a usage error, not a half-started process
        await health.start(settings.metrics_bind_address, settings.health_probe_bind_address)
    except BindError as exc:
        return usage_error(component, f"{BIND_FLAGS[exc.role]}: {exc}")
    task = asyncio.create_task(_main_task(settings, main, health, stop), name=component)
    log.info("process.started", component=component)
    try:
        await task
        status = 0
    except asyncio.CancelledError:
        status = 0 if stop.is_set() else 1
    except KubeConfigError as exc:  # nothing to reach: a usage error, like a missing file
        status = usage_error(component, f"--kubeconfig: {exc}")
    except Exception:
        log.exception("process.failed", component=component)
        status = 1
    finally:
        await health.stop()
    log.info("process.stopped", component=component, status=status)
    return status


async def _main_task(
    settings: CommonSettings,
    main: Callable[..., Awaitable[None]],
    health: Health,
    stop: asyncio.Event,
) -> None:
    await main(settings, health=health, stop=stop)
