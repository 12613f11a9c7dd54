"""scheduler/node_watch.py: what the liveness replies and an IpNode tell the judge."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from eipctl.core.fields import Obj
from eipctl.core.liveness import Liveness
from eipctl.core.liveness_wire import Flag
from eipctl.scheduler.node_watch import NodeWatch

TIMEOUT = 1.0


class Bed:
    """A NodeWatch on a hand-moved clock; `kicks` counts the passes it asked for, `targets`
    is what the prober was last told to probe. Node "w" (witness) keeps replying when a
    test calls `witness`, so that one silent node can be judged dead."""

    def __init__(self) -> None:
        self.now = 0.0
        self.kicks = 0
        self.targets: dict[str, tuple[str, int]] = {}
        self.target_updates = 0
        self.liveness = Liveness(TIMEOUT)
        self.watch = NodeWatch(
            self.liveness,
            clock=lambda: self.now,
            kick=self._kick,
            leading=lambda: True,
            identity="test",
            set_targets=self._set_targets,
        )

    def _kick(self) -> None:
        self.kicks += 1

    def _set_targets(self, targets: dict[str, tuple[str, int]]) -> None:
        self.targets = targets
        self.target_updates += 1

    def observe(self, old: Obj | None, new: Obj | None, at: float) -> None:
        self.now = at
        self.watch.observe(old, new)

    def heard(self, node: str, at: float, flags: Flag = Flag.NONE) -> None:
        self.now = at
        self.watch.heard(node, flags)

    def witness(self, until: float, step: float = 0.1) -> None:
        t = 0.0
        while t <= until + 1e-9:
            self.heard("w", t)
            t += step


def ipnode(name: str = "n1", spec: dict[str, Any] | None = None, **status: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": spec or {}, "status": status}


ENDPOINT = {"link": "eth0", "livenessAddress": "198.51.100.10", "livenessPort": 9473}


def test_the_endpoint_of_each_ipnode_is_probed_until_it_goes() -> None:
    bed = Bed()
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    assert bed.targets == {"n1": ("198.51.100.10", 9473)}
    bed.observe(ipnode(spec=ENDPOINT), ipnode(spec=ENDPOINT, heartbeat=3), at=0.1)
    assert bed.target_updates == 1  # unchanged endpoint: the prober is not disturbed
    moved = {**ENDPOINT, "livenessPort": 9999}
    bed.observe(ipnode(spec=ENDPOINT), ipnode(spec=moved), at=0.2)
    assert bed.targets == {"n1": ("198.51.100.10", 9999)}
    bed.observe(ipnode(spec=moved), ipnode(spec={"link": "eth0"}), at=0.3)
    assert bed.targets == {}
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.4)
    bed.observe(ipnode(spec=ENDPOINT), None, at=0.5)
    assert bed.targets == {}
    assert "n1" not in bed.liveness.known()


def test_replies_keep_a_node_live_and_their_absence_kills_it() -> None:
    bed = Bed()
    bed.witness(3.0)
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)  # first sight: one timeout
    assert bed.liveness.is_live("n1", 0.75)
    bed.heard("n1", 0.75)
    assert bed.liveness.is_live("n1", 1.5)
    assert not bed.liveness.is_live("n1", 1.75)
    kicks = bed.kicks
    bed.heard("n1", 2.0)  # back: a pass may place on it again
    assert bed.liveness.is_live("n1", 2.0)
    assert bed.kicks == kicks + 1


def test_a_node_that_never_replies_is_dead_after_one_timeout() -> None:
    bed = Bed()
    bed.witness(2.0)
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    assert not bed.liveness.is_live("n1", TIMEOUT)


def test_a_fenced_reply_kills_at_once_and_asks_for_a_pass() -> None:
    bed = Bed()
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    bed.heard("n1", 0.1)
    kicks = bed.kicks
    bed.heard("n1", 0.2, Flag.FENCED)
    assert not bed.liveness.is_live("n1", 0.2)
    assert bed.kicks == kicks + 1
    bed.heard("n1", 0.3, Flag.FENCED)  # still fenced: nothing new
    assert bed.kicks == kicks + 1
    bed.heard("n1", 0.4)  # restored
    assert bed.liveness.is_live("n1", 0.4)


def test_a_reply_says_whether_the_verdict_may_have_moved() -> None:
    """The Live conditions look at a node only when `heard` says so: a live node's reply,
    10,000 a second at 1,000 nodes, cannot move a verdict that is already "live"; a node that
    was dead, never heard, or fenced, or a FENCED reply can."""
    bed = Bed()
    bed.witness(3.0)
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    bed.now = 0.5
    assert bed.watch.heard("n1", Flag.NONE) is False  # introduced, live: stays live
    bed.now = 0.6
    assert bed.watch.heard("n1", Flag.EXTENDED | Flag.API_STALE) is False
    bed.now = 0.7
    assert bed.watch.heard("n1", Flag.FENCED) is True
    bed.now = 0.8
    assert bed.watch.heard("n1", Flag.NONE) is True  # fenced -> live
    bed.now = 2.5  # silent since 0.8: dead
    assert not bed.liveness.is_live("n1", 2.5)
    assert bed.watch.heard("n1", Flag.NONE) is True
    assert bed.liveness.is_live("n1", 2.5)


def test_every_reply_counts_once_as_a_sign_of_life() -> None:
    """Replies are refreshed in place; each one (a fresh seq, accepted once by the prober)
    restarts the node's timeout, also after a heartbeat-judged phase (its tokens differ)."""
    bed = Bed()
    bed.witness(3.0)
    bed.observe(None, ipnode(), at=0.0)  # no endpoint yet: judged by heartbeats
    bed.observe(ipnode(), ipnode(heartbeat=1), at=0.2)
    bed.observe(ipnode(heartbeat=1), ipnode(spec=ENDPOINT, heartbeat=1), at=0.3)
    for at in (1.0, 1.9, 2.8):
        bed.heard("n1", at)
        assert bed.liveness.silence("n1", at) == 0.0
    assert bed.liveness.is_live("n1", 3.7)


def test_api_heartbeats_do_not_count_for_a_node_with_an_endpoint() -> None:
    """Cut from the liveness path only: its 10 s API heartbeats must not revive it."""
    bed = Bed()
    bed.witness(5.0)
    bed.observe(None, ipnode(spec=ENDPOINT, heartbeat=1), at=0.0)
    bed.observe(ipnode(spec=ENDPOINT, heartbeat=1), ipnode(spec=ENDPOINT, heartbeat=2), at=2.0)
    assert not bed.liveness.is_live("n1", 2.0)


def test_a_node_without_an_endpoint_is_judged_by_its_heartbeat_counter() -> None:
    """A controller from before the liveness path, during an upgrade."""
    bed = Bed()
    bed.witness(3.0)
    bed.observe(None, ipnode(), at=0.0)
    bed.observe(ipnode(), ipnode(heartbeat=0), at=0.5)  # a first counter, even 0, is news
    assert bed.liveness.silence("n1", 0.5) == 0.0
    bed.observe(ipnode(heartbeat=0), ipnode(heartbeat=0), at=0.75)  # a relist: no change
    assert bed.liveness.silence("n1", 0.75) == 0.25
    bed.observe(ipnode(heartbeat=0), ipnode(heartbeat=1), at=1.4)
    assert bed.liveness.is_live("n1", 2.3)


def test_a_restart_grace_is_waited_for_instead_of_the_timeout() -> None:
    bed = Bed()
    bed.witness(12.0)
    bed.observe(None, ipnode(spec=ENDPOINT, heartbeat=7, restartGraceSeconds=10), at=0.0)
    assert bed.liveness.is_live("n1", 9.9)
    assert not bed.liveness.is_live("n1", 10.0)


def test_a_grace_counts_once_with_its_heartbeat_not_on_every_event() -> None:
    bed = Bed()
    bed.witness(30.0)
    graced = ipnode(spec=ENDPOINT, heartbeat=7, restartGraceSeconds=10)
    bed.observe(None, graced, at=0.0)
    bed.observe(graced, graced, at=9.0)  # a relist replays it: not a new grace
    assert not bed.liveness.is_live("n1", 10.0)
    bed.heard("n1", 11.0)  # the new process answers: the grace is over
    assert not bed.liveness.is_live("n1", 12.0)


def test_the_stopping_process_answering_after_its_grace_moves_nothing() -> None:
    """Seen in the upgrade story: the grace's watch event arrived, then one more reply from
    the process still closing its socket; that reply used to end the grace, and the node
    was declared dead one timeout later, mid-restart. Now the successor's first heartbeat
    (which clears restartGraceSeconds) ends it, and from then its replies alone count."""
    bed = Bed()
    bed.witness(20.0)
    bed.observe(None, ipnode(spec=ENDPOINT, heartbeat=6), at=0.0)
    graced = ipnode(spec=ENDPOINT, heartbeat=7, restartGraceSeconds=10)
    bed.observe(ipnode(spec=ENDPOINT, heartbeat=6), graced, at=1.0)
    bed.heard("n1", 1.01)  # late: the old responder was not closed yet
    assert bed.liveness.is_live("n1", 2.5)
    assert bed.liveness.is_live("n1", 10.9)
    bed.heard("n1", 4.0)  # the new process answers ...
    assert bed.liveness.is_live("n1", 6.0)  # ... still in grace until it beats
    bed.observe(graced, ipnode(spec=ENDPOINT, heartbeat=8), at=4.5)
    assert bed.liveness.is_live("n1", 5.4)  # the beat is its latest sign of life ...
    assert not bed.liveness.is_live("n1", 5.5)  # ... then one timeout, no grace


def test_a_grace_that_is_no_number_is_none_the_liveness_timeout_holds() -> None:
    bed = Bed()
    bed.witness(2.0)
    bed.observe(None, ipnode(spec=ENDPOINT, heartbeat=7, restartGraceSeconds="soon"), at=0.0)
    assert bed.liveness.is_live("n1", 0.9)
    assert not bed.liveness.is_live("n1", TIMEOUT)
    assert bed.targets == {}  # an IpNode the schema refuses: nothing read from it


def test_a_new_node_and_a_deleted_one_ask_for_a_pass() -> None:
    bed = Bed()
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    assert bed.kicks == 1
    bed.observe(ipnode(spec=ENDPOINT), ipnode(spec=ENDPOINT, heartbeat=2), at=0.5)
    assert bed.kicks == 1  # live already: no pass
    bed.observe(ipnode(spec=ENDPOINT), None, at=0.6)
    assert bed.kicks == 2
    assert "n1" not in bed.liveness.known()


def test_relabelling_asks_for_a_pass() -> None:
    bed = Bed()
    old = ipnode(spec=ENDPOINT)
    bed.observe(None, old, at=0.0)
    new = {**ipnode(spec=ENDPOINT), "metadata": {"name": "n1", "labels": {"zone": "a"}}}
    bed.observe(old, new, at=0.1)
    assert bed.kicks == 2


@pytest.mark.parametrize("drains", [False, True])
async def test_replies_queued_at_the_socket_are_read_before_the_judge_looks(
    drains: bool,
) -> None:
    """A scheduler whose loop fell behind (a flood, CPU starvation) must not declare a node
    dead whose reply has arrived but was not read yet ([hostile])."""
    bed = Bed()
    bed.observe(None, ipnode("n1", spec=ENDPOINT), at=0.0)
    bed.observe(None, ipnode("w", spec=ENDPOINT), at=0.0)
    bed.heard("n1", at=0.0)
    bed.witness(until=1.5)
    bed.now = 1.5  # n1 silent for 1.5 s as far as what was read says
    queued = ["n1"]  # its reply sits in the socket's queue

    def drain() -> None:
        while queued:
            bed.watch.heard(queued.pop(), Flag.NONE)

    bed.watch.drain = drain if drains else None
    task = asyncio.create_task(bed.watch.run())
    await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert bed.liveness.is_live("n1", bed.now) is drains


async def judge_once(bed: Bed) -> None:
    """One look of the judge (`NodeWatch.run`) at the bed's clock."""
    task = asyncio.create_task(bed.watch.run())
    await asyncio.sleep(0.02)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_node_declared_dead_and_heard_again_is_marked_returned() -> None:
    """`returned_at` feeds the placement's hold-down (a flapping node); a node seen for the
    first time, or live all along, is not returned."""
    bed = Bed()
    bed.observe(None, ipnode(spec=ENDPOINT), at=0.0)
    bed.observe(None, ipnode("w", spec=ENDPOINT), at=0.0)
    bed.witness(until=1.5)
    await judge_once(bed)
    assert "n1" in bed.watch.dead_since and bed.watch.returned_at == {}
    bed.heard("n1", 2.2)
    await judge_once(bed)
    assert bed.watch.returned_at == {"n1": 2.2}
    assert "n1" not in bed.watch.dead_since
    bed.observe(ipnode(spec=ENDPOINT), None, at=2.3)  # deleted: forgotten
    assert bed.watch.returned_at == {}
