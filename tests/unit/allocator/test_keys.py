"""The allocator's queue keys: typed, folded by the queue like the strings they replace."""

from __future__ import annotations

from eipctl.allocator.keys import ALL_POOLS, AllocatorKey, AllPools, ClaimKey, PoolKey, ServiceKey
from eipctl.kube.workqueue import WorkQueue


def test_equal_keys_fold_into_one_and_kinds_never_collide() -> None:
    queue: WorkQueue[AllocatorKey] = WorkQueue("test")
    for key in (ServiceKey("ns/a"), ServiceKey("ns/a"), PoolKey("a"), ClaimKey("a"), PoolKey("a")):
        queue.add(key)
    queue.add(ALL_POOLS)
    queue.add(AllPools())
    assert len(queue) == 4


def test_logs_show_the_old_spelling() -> None:
    assert [str(k) for k in (ServiceKey("ns/a"), PoolKey("p"), ClaimKey("c"), ALL_POOLS)] == [
        "svc:ns/a",
        "pool:p",
        "claim:c",
        "pools",
    ]


def test_keys_of_different_kinds_with_one_name_are_different() -> None:
    assert PoolKey("a") != ClaimKey("a") and ServiceKey("a") != PoolKey("a")
    assert len({PoolKey("a"), ClaimKey("a"), ServiceKey("a")}) == 3
