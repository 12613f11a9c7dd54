"""The process heap after the caches have synced: out of the cyclic collector's way.

A leader-elected process holds every watched object as nested dicts and lists: at 10,000
Services and claims, millions of containers the cyclic garbage collector walks in every full
collection. Such a collection holds the event loop for ~0.1 s per 20,000 objects parsed
(measured with `benchmarks/bench_term_rebuild.py`), longer with the caches: long enough to read
liveness replies late (false deaths) or to pass the Lease's renew deadline. The objects the
first list brought live as long as the process or until a watch event replaces them (then
reference counting frees them, frozen or not; JSON has no cycles), so `settle` takes them out
of the collector's sight (`gc.freeze`, as the sandbox does with its simulated nodes) and
makes young collections rarer; the manager settles again whenever the caches have grown by
half (`SettleWhenGrown`: the 10,000 claims a fresh cluster's allocator creates after start-up
made full collections of 0.1-0.5 s again). `observe_pauses` times every collection
(``eipctl_gc_pause_seconds``), so a stall has a figure.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Final

import structlog

from eipctl.kube.metrics import GC_PAUSE

log = structlog.get_logger(__name__)

THRESHOLDS: Final = (10_000, 20, 100)
"""gc thresholds once settled: young collections every 10,000 allocations instead of 700
(the sandbox's, `sandbox.workers.GC_THRESHOLDS`)."""
LONG_PAUSE: Final = 0.05
"""A collection longer than this is logged: the liveness path's budget is 100 ms a round."""

GROWTH = 1.5
"""Settle again once the caches hold this many times the objects they held when last
settled (claims created after start-up are walked by every full collection until then)."""
GROWTH_MIN = 1000
"""...and at least this many more objects."""
RECHECK = 30.0
"""Seconds between two looks at the caches' size (`Manager`'s heap runnable)."""

_started: list[float] = []


class SettleWhenGrown:
    """When to settle the heap again: the caches grew by `GROWTH` since the last time."""

    def __init__(self, settled_at: int) -> None:
        self.settled_at = settled_at

    def due(self, objects: int) -> bool:
        """True (and remembers ``objects``) when the caches have grown enough."""
        if objects < max(self.settled_at * GROWTH, self.settled_at + GROWTH_MIN):
            return False
        self.settled_at = objects
        return True


def settle() -> None:
    """Collect once, freeze what is left, raise the thresholds; call after the first sync."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    log.info(
        "heap.settled",
        frozen=gc.get_freeze_count(),
        seconds=round(time.perf_counter() - started, 3),
    )


def observe_pauses() -> None:
    """Time every collection into ``eipctl_gc_pause_seconds`` (once per process)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[:] = [time.perf_counter()]
        return
    if not _started:
        return
    pause = time.perf_counter() - _started[0]
    generation = info.get("generation", 0)
    GC_PAUSE.labels(str(generation)).observe(pause)
    if pause >= LONG_PAUSE:
        log.info(
            "gc.long_pause",
            generation=generation,
            seconds=round(pause, 3),
            collected=info.get("collected"),
        )
