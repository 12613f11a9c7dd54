"""The lifecycle every eipctl process shares: logging, event loop, probes, signals.

The first SIGTERM/SIGINT sets the `stop` event: the process stops taking new work and
finishes what it is doing. A second signal, or a process that has not returned within
`grace` seconds, is cancelled outright.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import structlog

from eipctl.config import CommonSettings
from eipctl.health import Health
from eipctl.logsetup import configure_logging

log = structlog.get_logger(__name__)


def run_process(
    component: str,
    settings: CommonSettings,
    main: Callable[..., Awaitable[None]],
    *,
    use_uvloop: bool,
    grace: float = 10.0,
) -> int:
    """Run `main(settings, health=..., stop=...)` to completion; returns the exit status."""
    configure_logging(settings.log_format, settings.log_level, component)
    coro = _supervise(component, settings, main, grace)
    if use_uvloop:
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


async def _supervise(
    component: str,
    settings: CommonSettings,
    main: Callable[..., Awaitable[None]],
    grace: float,
) -> int:
    stop = asyncio.Event()
    health = Health()
    task = asyncio.create_task(_main_task(settings, main, health, stop), name=component)
    signals_seen = 0

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        log.info("signal.received", signal=signal.Signals(signum).name, count=signals_seen)
        if signals_seen == 1:
            stop.set()
            asyncio.get_running_loop().call_later(grace, task.cancel)
        else:
            task.cancel()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    await health.start(settings.metrics_bind_address, settings.health_probe_bind_address)
    log.info("process.started", component=component)
    try:
        await task
        status = 0
    except asyncio.CancelledError:
        status = 0 if stop.is_set() else 1
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
