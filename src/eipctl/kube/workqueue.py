"""A keyed work queue in the client-go mould, and the worker loop that drives it.

The queue carries keys, never events: a key added many times while pending is processed
once; a key is never handed to two workers at once, and a key re-added while in flight
runs once more after it is done. The queue, not the handler, owns retry backoff: handlers
return a `Result` instead of sleeping. A handler that raises `TerminalError` says a retry
would only repeat an error a user must fix: the key is dropped until it is added again.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import structlog

from eipctl.kube.slices import Timeslice

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):  # noqa: N818 (a state, like asyncio.QueueShutDown)
    """`get()` after shutdown once nothing is left to hand out."""


class TerminalError(Exception):
    """Retrying cannot help: the input is wrong until a user fixes it (after
    controller-runtime's reconcile.TerminalError).

    The worker logs it and forgets the key, with no retry: it runs again when it is added
    again (its object or what it refers to changed, a resync, a new term). The handler
    has told the user already (its Event, its status condition); `reason` names the error as
    that Event does.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Result:
    """What a handler wants next for its key: nothing, a requeue after a delay, or a retry."""

    requeue_after: float | None = None
    error: BaseException | None = None


DONE = Result()


def requeue_after(seconds: float) -> Result:
    """Process the key again after `seconds` (no failure counted, backoff reset)."""
    return Result(requeue_after=seconds)


def retry(error: BaseException) -> Result:
    """Failed: process the key again after its per-key exponential backoff."""
    return Result(error=error)


@dataclass
class Backoff:
    """Per-key exponential backoff with jitter: base * 2**failures, capped."""

    base: float = 0.005
    cap: float = 30.0
    jitter: float = 0.1

    def delay(self, failures: int) -> float:
        d: float = min(self.cap, self.base * 2.0 ** min(failures, 62))
        return d * (1 + self.jitter * random.random())


class WorkQueue(Generic[K]):
    """Dedup, one-worker-per-key, delayed adds, per-key rate-limited retries, drain."""

    def __init__(self, name: str = "queue", backoff: Backoff | None = None) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()  # pending: queued, or re-added while processing
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle = asyncio.Event()
        self._idle.set()
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: K) -> None:
        """Mark `key` as needing work; a no-op if already pending."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._idle.clear()
        if key in self._processing:
            return  # requeued by done()
        self._queue.append(key)
        self._wake()

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` after `delay` seconds; the earliest pending deadline wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= when:
                return
            current[1].cancel()
        self._idle.clear()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def add_rate_limited(self, key: K) -> None:
        """Re-add after this key's backoff, and count one more failure for it."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, self.backoff.delay(n))

    def forget(self, key: K) -> None:
        """Reset the key's failure count (it succeeded)."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key to process; the caller must call `done(key)` afterwards."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.cancelled():
                    if fut in self._waiters:
                        self._waiters.remove(fut)
                else:
                    self._wake()  # we were woken but leave: pass the wake-up on
                raise
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """Processing of `key` finished; it runs again if it was re-added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake()
        self._check_idle()

    def shutdown(self) -> None:
        """Stop accepting keys; queued keys still drain, delayed ones are dropped."""
        self._shutting_down = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
        self._check_idle()

    async def wait_idle(self) -> None:
        """Until nothing is queued, delayed or in flight."""
        await self._idle.wait()

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)
        self._check_idle()

    def _wake(self) -> None:
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    def _check_idle(self) -> None:
        if not self._queue and not self._processing and not self._timers:
            self._idle.set()


Handler = Callable[[K], Awaitable[Result | None]]


async def _worker(queue: WorkQueue[K], handler: Handler[K]) -> None:
    # a key whose handler has nothing to do never waits; 10,000 of them queued at a term's
    # start would otherwise hold the loop (and the Lease's renewal) until the last is done
    budget = Timeslice()
    while True:
        await budget.spent()
        try:
            key = await queue.get()
        except ShutDown:
            return
        try:
            try:
                result = await handler(key) or DONE
            except asyncio.CancelledError:
                raise
            except TerminalError as exc:
                log.warning(
                    "work.terminal",
                    queue=queue.name,
                    key=str(key),
                    reason=exc.reason,
                    error=exc.message,
                )
                queue.forget(key)
                continue
            except Exception as exc:
                result = retry(exc)
            if result.error is not None:
                log.warning(
                    "work.retry",
                    queue=queue.name,
                    key=str(key),
                    failures=queue.failures(key) + 1,
                    error=repr(result.error),
                )
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
                if result.requeue_after is not None:
                    queue.add_after(key, result.requeue_after)
        finally:
            queue.done(key)


async def run_workers(
    queue: WorkQueue[K], handler: Handler[K], *, workers: int = 2, drain_timeout: float = 10.0
) -> None:
    """Run `workers` loops over `queue` until cancelled or the queue is shut down.

    On cancellation the queue is shut down and in-flight/queued keys get up to
    `drain_timeout` seconds to finish before the workers are cancelled.
    """
    tasks = [
        asyncio.create_task(_worker(queue, handler), name=f"{queue.name}-worker-{i}")
        for i in range(workers)
    ]
    try:
        await asyncio.wait(tasks)  # unlike gather, cancelling wait() leaves the workers be
    except asyncio.CancelledError:
        queue.shutdown()
        _, pending = await asyncio.wait(tasks, timeout=drain_timeout)
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
