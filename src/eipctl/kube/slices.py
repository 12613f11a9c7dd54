"""Long walks over the caches that give the event loop back every few milliseconds.

A process's loop also renews its Lease, reads its liveness replies and answers its probes.
A synchronous walk over 10,000 objects holds all of that up for most of a second, longer
than the default renew deadline (0.8 s): the term is lost as it begins, and the next one
walks again (issue #32's allocator livelock). `in_slices` walks the same items but yields to
the loop once a slice of `SLICE` seconds is used up, so nothing waits on it for longer; a
work queue's workers spend a `Timeslice` the same way, for a burst of keys whose handlers
find nothing to do (and so never wait on anything).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

SLICE = 0.005
"""Seconds of work between two yields: short against a 100 ms probe interval, long against
the ~10 us a yield costs."""


class Timeslice:
    """A budget of loop time (`SLICE` seconds unless given): `spent` yields to the loop once
    it is used up, and renews it.

    ``clock``: the monotonic clock by default; a test hands a fake one that its "work" moves,
    so where the yields fall is exact instead of depending on how busy the machine is.
    """

    __slots__ = ("_began", "_clock", "_until", "busy", "longest", "seconds", "yields")

    def __init__(
        self, seconds: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = SLICE if seconds is None else seconds
        self._clock = clock
        self._began = clock()
        self._until = self._began + self.seconds
        self.busy = 0.0
        """Seconds worked in the slices ended so far (`done` ends the last): the work's own
        time, without what the loop did in between."""
        self.longest = 0.0
        """The longest slice ended so far: the longest the loop waited on this work."""
        self.yields = 0
        """How often the loop got its turn back."""

    async def spent(self) -> None:
        """Call after each piece of work: yields to the loop when the slice is used up."""
        now = self._clock()
        if now >= self._until:
            self._end_slice(now)
            await asyncio.sleep(0)
            self.yields += 1
            self._began = self._clock()
            self._until = self._began + self.seconds

    def done(self) -> float:
        """End the current slice (the work is finished); returns `busy`."""
        self._end_slice(self._clock())
        self._began = self._until = self._clock()
        return self.busy

    def _end_slice(self, now: float) -> None:
        worked = max(0.0, now - self._began)
        self.busy += worked
        self.longest = max(self.longest, worked)


async def in_slices(
    items: Iterable[T],
    slice_seconds: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[T]:
    """Each item of ``items``, yielding to the loop whenever ``slice_seconds`` (`SLICE`)
    have passed on ``clock`` (`Timeslice`).

    The caller's loop body runs between items, so its time counts towards the slice; the
    items may change meanwhile (take a list, not a live view).
    """
    budget = Timeslice(slice_seconds, clock)
    for item in items:
        yield item
        await budget.spent()
