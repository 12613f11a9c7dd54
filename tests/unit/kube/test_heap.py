"""`kube.heap`: the synced caches frozen out of the collector's sight, and its pauses timed."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from eipctl.kube import heap
from eipctl.metrics import REGISTRY


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """The test process's collector as it was: thresholds, nothing frozen, no callback."""
    thresholds = gc.get_threshold()
    callbacks = list(gc.callbacks)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.callbacks[:] = callbacks


def _pauses(generation: int) -> float:
    value = REGISTRY.get_sample_value(
        "eipctl_gc_pause_seconds_count", {"generation": str(generation)}
    )
    return value or 0.0


@pytest.mark.usefixtures("restored_gc")
def test_settling_freezes_what_the_first_sync_brought_and_raises_the_thresholds() -> None:
    cache = [
        {"metadata": {"name": f"svc-{n}"}, "spec": {"ports": [{"port": n}]}} for n in range(2000)
    ]
    gc.unfreeze()
    heap.settle()
    assert gc.get_freeze_count() >= 3 * len(cache)  # each object: 2 dicts and a list, at least
    assert gc.get_threshold() == heap.THRESHOLDS
    tracked_after = len(gc.get_objects(generation=2))
    assert tracked_after < len(cache)  # a full collection no longer walks the cache


@pytest.mark.usefixtures("restored_gc")
def test_every_collection_is_timed_once_observed() -> None:
    heap.observe_pauses()
    heap.observe_pauses()  # once per process, however often it is asked
    assert gc.callbacks.count(heap._on_gc) == 1
    before = _pauses(2)
    gc.collect()
    assert _pauses(2) == before + 1


def test_the_heap_is_settled_again_once_the_caches_have_grown_by_half() -> None:
    grown = heap.SettleWhenGrown(10_000)
    assert not grown.due(14_999)
    assert grown.due(15_000)  # 10,000 Services, then their 5,000 claims made
    assert not grown.due(20_000)  # counted from the last settle: 15,000
    assert grown.due(22_500)
    small = heap.SettleWhenGrown(10)
    assert not small.due(500)  # a small cluster: not for a few hundred objects
    assert small.due(1_010)
