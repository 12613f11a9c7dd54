"""HTTP endpoints for operators: /metrics, /healthz and /readyz.

/healthz answers "is this process worth keeping?": the event loop turns (a watchdog task
ticks; a loop blocked for longer than `stall_after` fails the check) and every registered
liveness check passes (e.g. the informer tasks have not died). /readyz answers "has it
synced?": every readiness check passes (informers synced; the controller's IpNode exists).
"""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import Callable

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from eipctl.metrics import REGISTRY
from eipctl.runtime.values import BindAddress

log = structlog.get_logger(__name__)

Check = Callable[[], bool]
Reason = Callable[[], str | None]
"""A readiness check that says why it fails (a string) or passes (None)."""


class BindError(OSError):
    """A server cannot listen at `address`; `role` says which: "metrics" or "probes"."""

    def __init__(self, role: str, address: BindAddress, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.role = role
        self.address = address

    def __str__(self) -> str:
        if self.errno == errno.EADDRINUSE:
            return f"{self.address} is already in use"
        return f"{self.address}: {self.strerror or 'cannot listen'}"


class Health:
    """Holds the checks and serves them; metrics may share the probe port or have their own."""

    def __init__(self, registry: CollectorRegistry = REGISTRY, stall_after: float = 5.0) -> None:
        self._registry = registry
        self._stall_after = stall_after
        self._live: dict[str, Check] = {}
        self._ready: dict[str, Check] = {}
        self._ready_reasons: dict[str, Reason] = {}
        self._runners: list[web.AppRunner] = []
        self._watchdog: asyncio.Task[None] | None = None
        self._last_tick = time.monotonic()

    def add_liveness_check(self, name: str, check: Check) -> None:
        self._live[name] = check

    def add_readiness_check(self, name: str, check: Check) -> None:
        self._ready[name] = check

    def add_readiness_reason(self, name: str, reason: Reason) -> None:
        """A readiness check whose failure names its cause: /readyz shows ``name (reason)``
        (an operator sees which link is missing without reading the logs)."""
        self._ready_reasons[name] = reason

    def failing(self, which: str) -> list[str]:
        """Names of the failing checks of `which` ("live" or "ready")."""
        checks = self._live if which == "live" else self._ready
        failed = [name for name, check in checks.items() if not _safe(check)]
        if which == "ready":
            for name, reason in self._ready_reasons.items():
                if (line := _with_reason(name, reason)) is not None:
                    failed.append(line)
        if which == "live" and time.monotonic() - self._last_tick > self._stall_after:
            failed.append("event-loop")
        return failed

    async def start(self, metrics: BindAddress, probes: BindAddress) -> None:
        """Listen on both addresses, or on neither: raises BindError with nothing left open."""
        self._watchdog = asyncio.create_task(self._tick(), name="health-watchdog")
        same = metrics.enabled and (metrics.host, metrics.port) == (probes.host, probes.port)
        servers = []
        if probes.enabled:
            servers.append((probes, same, True))
        if metrics.enabled and not same:
            servers.append((metrics, True, False))
        try:
            for addr, with_metrics, with_probes in servers:
                await self._serve(addr, with_metrics=with_metrics, with_probes=with_probes)
        except BaseException:
            await self.stop()
            raise
        for addr, with_metrics, with_probes in servers:  # after all: a failure is one line
            log.info("http.listening", address=str(addr), metrics=with_metrics, probes=with_probes)

    async def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def ports(self) -> list[int]:
        """Bound ports (useful when started with port 0 in tests)."""
        return [int(addr[1]) for runner in self._runners for addr in runner.addresses]

    async def _serve(self, addr: BindAddress, *, with_metrics: bool, with_probes: bool) -> None:
        app = web.Application()
        if with_probes:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/readyz", self._readyz)
        if with_metrics:
            app.router.add_get("/metrics", make_aiohttp_handler(self._registry))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        try:
            await web.TCPSite(runner, addr.host, addr.port).start()
        except OSError as exc:
            raise BindError("probes" if with_probes else "metrics", addr, exc) from exc

    async def _healthz(self, _request: web.Request) -> web.Response:
        return _answer(self.failing("live"))

    async def _readyz(self, _request: web.Request) -> web.Response:
        return _answer(self.failing("ready"))

    async def _tick(self) -> None:
        while True:
            self._last_tick = time.monotonic()
            await asyncio.sleep(0.5)


def _safe(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:
        return False


def _with_reason(name: str, reason: Reason) -> str | None:
    """``name (why)`` when failing, None when passing; a raising check fails by its name."""
    try:
        why = reason()
    except Exception:
        return name
    return None if why is None else f"{name} ({why})"


def _answer(failed: list[str]) -> web.Response:
    if failed:
        return web.Response(status=503, text="failing: " + ", ".join(sorted(failed)) + "\n")
    return web.Response(text="ok\n")
