"""The scheduler's queue keys: typed, folded by the queue like the strings they replace."""

from __future__ import annotations

from eipctl.kube.workqueue import WorkQueue
from eipctl.scheduler.keys import Pass, SchedulerKey, ServiceIpKey


def test_equal_keys_fold_into_one() -> None:
    queue: WorkQueue[SchedulerKey] = WorkQueue("test")
    for key in (Pass.PLACE, Pass.PLACE, ServiceIpKey("c"), ServiceIpKey("c"), Pass.REBALANCE):
        queue.add(key)
    assert len(queue) == 3


def test_logs_show_the_old_spelling() -> None:
    assert [str(k) for k in (Pass.PLACE, Pass.REBALANCE, ServiceIpKey("c"))] == [
        "place",
        "rebalance",
        "ip/c",
    ]
