"""scheduler/node_watch.py: what an IpNode's status tells the liveness judge."""

from __future__ import annotations

from typing import Any

from eipctl.core.fields import Obj
from eipctl.core.liveness import Liveness
from eipctl.scheduler.node_watch import NodeWatch

TIMEOUT = 1.0


class Bed:
    """A NodeWatch on a hand-moved clock; `kicks` counts the passes it asked for."""

    def __init__(self) -> None:
        self.now = 0.0
        self.kicks = 0
        # fresh_reads: one node alone may be judged dead (no stale-view rule to wait for)
        self.liveness = Liveness(TIMEOUT, fresh_reads=True)
        self.watch = NodeWatch(
            self.liveness,
            clock=lambda: self.now,
            kick=self._kick,
            leading=lambda: True,
            identity="test",
        )

    def _kick(self) -> None:
        self.kicks += 1

    def observe(self, old: Obj | None, new: Obj | None, at: float) -> None:
        self.now = at
        self.watch.observe(old, new)


def ipnode(**status: Any) -> Obj:
    return {"metadata": {"name": "n1"}, "status": status}


def test_a_first_heartbeat_after_none_is_a_change_even_a_zero() -> None:
    """An IpNode registered without a counter, then its first one: the counter moved."""
    bed = Bed()
    bed.observe(None, ipnode(), at=0.0)
    bed.observe(ipnode(), ipnode(heartbeat=0), at=0.5)
    assert bed.liveness.heartbeat_age("n1", 0.5) == 0.0
    bed.observe(ipnode(heartbeat=0), ipnode(heartbeat=0), at=0.75)  # a relist: no change
    assert bed.liveness.heartbeat_age("n1", 0.75) == 0.25


def test_a_restart_grace_is_waited_for_instead_of_the_timeout() -> None:
    bed = Bed()
    bed.observe(None, ipnode(heartbeat=7, restartGraceSeconds=10), at=0.0)
    assert bed.liveness.is_live("n1", 9.9)
    assert not bed.liveness.is_live("n1", 10.0)


def test_a_grace_that_is_no_number_is_none_the_node_timeout_holds() -> None:
    bed = Bed()
    bed.observe(None, ipnode(heartbeat=7, restartGraceSeconds="soon"), at=0.0)
    assert bed.liveness.is_live("n1", 0.9)
    assert not bed.liveness.is_live("n1", TIMEOUT)


def test_a_new_node_and_a_deleted_one_ask_for_a_pass() -> None:
    bed = Bed()
    bed.observe(None, ipnode(heartbeat=1), at=0.0)
    assert bed.kicks == 1
    bed.observe(ipnode(heartbeat=1), ipnode(heartbeat=2), at=0.5)  # live already: no pass
    assert bed.kicks == 1
    bed.observe(ipnode(heartbeat=2), None, at=0.6)
    assert bed.kicks == 2
    assert "n1" not in bed.liveness.known()
