"""Fault injection: what a flaky apiserver does to a controller, on demand."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class Faults:
    """Knobs read by the request middleware; the admin path (/_emulator/) is exempt.

    `latency` (seconds added to every request), `error_rate` (share of requests answered
    with one of `error_codes`), `drop_watches()`, `force_gone(n)`, `pause(seconds)`.
    """

    def __init__(self, drop: Callable[[], int], rng: random.Random | None = None) -> None:
        self.latency = 0.0
        self.error_rate = 0.0
        self.error_codes: tuple[int, ...] = (500, 503, 429)
        self.gone_pending = 0
        self._drop = drop
        self._rng = rng or random.Random()
        self._resume = asyncio.Event()
        self._resume.set()
        self._resume_handle: asyncio.TimerHandle | None = None
        self._pause_waiters: list[asyncio.Future[None]] = []

    def drop_watches(self) -> int:
        """Close every open watch stream now; returns how many were closed."""
        n = self._drop()
        log.info("fault.drop_watches", closed=n)
        return n

    def force_gone(self, n: int = 1) -> None:
        """Answer the next `n` watch requests that carry a resourceVersion with 410 Gone."""
        self.gone_pending += n

    def take_gone(self) -> bool:
        """Consume one forced 410, if any are pending."""
        if self.gone_pending > 0:
            self.gone_pending -= 1
            return True
        return False

    def pause(self, seconds: float) -> Awaitable[None]:
        """Stop answering requests for `seconds`, starting now.

        Fire and forget (`srv.faults.pause(3)`), or `await srv.faults.pause(3)` to wait until
        the pause is over. Requests that arrive meanwhile are held, then answered.
        """
        loop = asyncio.get_running_loop()
        self._resume.clear()
        if self._resume_handle is not None:
            self._resume_handle.cancel()
        self._resume_handle = loop.call_later(seconds, self.resume)
        log.info("fault.pause", seconds=seconds)
        fut: asyncio.Future[None] = loop.create_future()
        self._pause_waiters.append(fut)
        return fut

    def resume(self) -> None:
        """End a pause early."""
        if self._resume_handle is not None:
            self._resume_handle.cancel()
            self._resume_handle = None
        self._resume.set()
        waiters, self._pause_waiters = self._pause_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_resumed(self) -> None:
        """Return once no pause is in force."""
        await self._resume.wait()

    @property
    def paused(self) -> bool:
        """True while requests are being held."""
        return not self._resume.is_set()

    def reset(self) -> None:
        """Back to a healthy server."""
        self.latency = 0.0
        self.error_rate = 0.0
        self.error_codes = (500, 503, 429)
        self.gone_pending = 0
        self.resume()

    async def before_request(self) -> int | None:
        """Apply pause and latency; returns an error code to answer with, or None."""
        if not self._resume.is_set():
            await self._resume.wait()
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if self.error_rate > 0 and self._rng.random() < self.error_rate and self.error_codes:
            return self._rng.choice(self.error_codes)
        return None

    def state(self) -> dict[str, Any]:
        """The knobs, as the admin endpoint shows them."""
        return {
            "latency": self.latency,
            "error_rate": self.error_rate,
            "error_codes": list(self.error_codes),
            "force_gone": self.gone_pending,
            "paused": self.paused,
        }

    def configure(self, body: dict[str, Any]) -> None:
        """Apply an admin request: any of latency, error_rate, error_codes, force_gone,
        drop_watches (true), pause (seconds), resume (true), reset (true)."""
        if body.get("reset"):
            self.reset()
        if "latency" in body:
            self.latency = float(body["latency"])
        if "error_rate" in body:
            self.error_rate = float(body["error_rate"])
        if "error_codes" in body:
            self.error_codes = tuple(int(c) for c in body["error_codes"])
        if body.get("force_gone"):
            self.force_gone(int(body["force_gone"]))
        if body.get("drop_watches"):
            self.drop_watches()
        if body.get("pause"):
            self.pause(float(body["pause"]))
        if body.get("resume"):
            self.resume()
