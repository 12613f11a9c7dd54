"""scheduler/node_conditions.py: which IpNodes a placement pass looks at, and what it writes.

A hand-moved clock, a dict for the IpNodes informer's cache and a writer that applies the
mutation to it and echoes the informer event back, as the API would. `Bed.asked` is every
node the pass asked the judge about: the IpNodes it examined. The last test runs a scheduler
on the API emulator: what scheduler/process.py feeds `NodeConditions`.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from scheduler_harness import GROUP, SimNodes, add_claims, placements, scheduler

from eipctl.core.fields import Obj, name_of
from eipctl.core.ipnode import REASON_NO_REPLY, REASON_REPLYING, mark_live
from eipctl.core.liveness import Liveness
from eipctl.core.liveness_wire import Flag
from eipctl.kube.client import IPNODES, ResourceRef
from eipctl.kube.errors import ApiError, NotFound
from eipctl.scheduler import node_conditions
from eipctl.scheduler.node_conditions import FULL_WALK_INTERVAL, WRITE_WAIT, NodeConditions
from eipctl.scheduler.node_watch import NodeWatch
from kubemu import ApiServer
from polling import eventually

TIMEOUT = 1.0
LIVE = ("True", REASON_REPLYING)
NO_REPLY = ("False", REASON_NO_REPLY)
FENCED = ("False", "Fenced")


class AskedLiveness(Liveness):
    """A judge that notes every node it is asked about."""

    def __init__(self, timeout: float) -> None:
        super().__init__(timeout)
        self.asked: set[str] = set()

    def is_live(self, node: str, now: float) -> bool:
        self.asked.add(node)
        return super().is_live(node, now)

    def is_fenced(self, node: str) -> bool:
        self.asked.add(node)
        return super().is_fenced(node)

    def silence(self, node: str, now: float) -> float | None:
        self.asked.add(node)
        return super().silence(node, now)


class Cache:
    """The IpNodes informer's cache; `walks` counts the listings."""

    def __init__(self) -> None:
        self.by_name: dict[str, Obj] = {}
        self.walks = 0

    def objects(self) -> list[Obj]:
        self.walks += 1
        return list(self.by_name.values())


class Writer:
    """Status updates of the cached IpNodes, each echoed to the informer handler."""

    def __init__(self, bed: Bed) -> None:
        self.bed = bed
        self.writes: list[tuple[str, tuple[str, str] | None]] = []
        self.failures: dict[str, int] = {}
        """node -> how many of its next writes fail (a 500)."""
        self.gate: asyncio.Event | None = None
        """When set: every write waits for it."""
        self.echo = True
        """False: the informer lags, the object changes without an event (yet)."""

    async def update(
        self,
        ref: ResourceRef,
        name: str,
        mutate: Any,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> Obj:
        assert ref is IPNODES and status
        if self.gate is not None:
            await self.gate.wait()
        if self.failures.get(name):
            self.failures[name] -= 1
            raise ApiError(500, "InternalError", "etcdserver: request timed out")
        old = self.bed.cache.by_name.get(name)
        if old is None:
            raise NotFound(404, "NotFound", f'ipnodes "{name}" not found')
        new = copy.deepcopy(old)
        mutate(new)
        self.writes.append((name, live_of(new)))
        if self.echo:
            self.bed.event(old, new)
        else:
            self.bed.cache.by_name[name] = new
        return new


def live_of(obj: Obj) -> tuple[str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Live":
            return c["status"], c.get("reason", "")
    return None


def ipnode(name: str, live: tuple[bool, str] | None = None, message: str = "set") -> Obj:
    obj: Obj = {"metadata": {"name": name}, "spec": {"link": "eth0"}, "status": {}}
    if live is not None:
        mark_live(*live, message)(obj)
    return obj


def names(n: int) -> list[str]:
    return [f"node-{i:03d}" for i in range(n)]


class Bed:
    """One term's `NodeConditions`, fed the way `scheduler.process` feeds it."""

    def __init__(self, n: int = 0, **kwargs: Any) -> None:
        self.now = 0.0
        self.liveness = AskedLiveness(TIMEOUT)
        self.cache = Cache()
        self.writer = Writer(self)
        self.conditions = NodeConditions(
            self.cache, self.liveness, self.writer, clock=lambda: self.now, **kwargs
        )
        self._tokens = itertools.count()
        for name in names(n):
            self.add(name)
        self.transitions()  # new nodes report once as live

    def new_term(self) -> None:
        self.conditions = NodeConditions(
            self.cache, self.liveness, self.writer, clock=lambda: self.now
        )

    # --- what the informer and the `NodeWatch` pass on ---------------------------------------
    def event(self, old: Obj | None, new: Obj | None) -> None:
        name = name_of(new or old or {})
        if new is None:
            self.cache.by_name.pop(name, None)
            self.liveness.forget(name)
        else:
            self.cache.by_name[name] = new
            self.liveness.introduce(name, self.now)
        self.conditions.observe(old, new)

    def add(self, name: str, live: tuple[bool, str] | None = None) -> None:
        self.event(None, ipnode(name, live))

    def edit(self, name: str, live: tuple[bool, str], message: str = "by hand") -> None:
        old = self.cache.by_name[name]
        new = copy.deepcopy(old)
        mark_live(*live, message)(new)
        self.event(old, new)

    def reply(self, *nodes: str, at: float, flags: Flag = Flag.NONE) -> None:
        """Replies as `NodeWatch.heard` takes them: the conditions hear of one only if it
        may have moved the verdict (the node was not live, or it says FENCED)."""
        self.now = at
        for node in nodes:
            was_live = self.liveness.is_live(node, at)
            if flags & Flag.FENCED:
                self.liveness.fence(node, at)
            else:
                self.liveness.observe(node, ("reply", next(self._tokens)), at)
            if flags & Flag.FENCED or not was_live:
                self.conditions.changed(node)

    def transitions(self) -> None:
        """What `NodeWatch.run` reports when it wakes."""
        for t in self.liveness.transitions(self.now):
            self.conditions.changed(t.node)

    # --- the pass ---------------------------------------------------------------------------
    async def sync(self) -> int:
        self.liveness.asked.clear()
        self.cache.walks = 0
        return await self.conditions.sync()

    @property
    def asked(self) -> set[str]:
        return self.liveness.asked

    def live(self, name: str) -> tuple[str, str] | None:
        return live_of(self.cache.by_name[name])


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_pass_looks_only_at_the_node_whose_verdict_moved() -> None:
    bed = Bed(200)
    assert await bed.sync() == 200  # the term's first pass: every IpNode, none has Live yet
    assert bed.cache.walks == 1
    assert len(bed.asked) == 200
    assert all(bed.live(n) == LIVE for n in names(200))
    bed.reply(*(n for n in names(200) if n != "node-007"), at=0.5)
    assert await bed.sync() == 0
    assert bed.asked == set()  # 199 replies, no verdict moved: nothing to look at
    assert bed.cache.walks == 0
    bed.now = 1.05  # node-007 silent for a timeout, the others heard since
    bed.transitions()
    written = len(bed.writer.writes)
    assert await bed.sync() == 1
    assert bed.asked == {"node-007"}
    assert bed.cache.walks == 0
    assert bed.writer.writes[written:] == [("node-007", NO_REPLY)]
    assert await bed.sync() == 0
    assert bed.asked == set()


async def test_a_fenced_reply_and_a_return_are_written_at_the_next_pass() -> None:
    bed = Bed(20)
    await bed.sync()
    bed.reply("node-003", at=0.1, flags=Flag.FENCED)
    assert await bed.sync() == 1
    assert bed.asked == {"node-003"}
    assert bed.live("node-003") == FENCED
    bed.reply("node-003", at=0.2)
    assert await bed.sync() == 1
    assert bed.asked == {"node-003"}
    assert bed.live("node-003") == LIVE


async def test_a_dead_node_that_fences_itself_changes_reason() -> None:
    """Dead (NoReply) -> Fenced is no live/dead transition, but it is a new reason."""
    bed = Bed(3)
    bed.reply("node-000", "node-001", at=0.6)
    bed.now = 1.1
    bed.transitions()
    await bed.sync()
    assert bed.live("node-002") == NO_REPLY
    bed.reply("node-002", at=1.2, flags=Flag.FENCED)
    assert await bed.sync() == 1
    assert bed.live("node-002") == FENCED


async def test_the_first_pass_of_a_term_puts_right_what_the_previous_leader_left() -> None:
    bed = Bed()
    bed.add("right", (True, REASON_REPLYING))
    bed.add("wrong", (False, REASON_NO_REPLY))  # e.g. the old leader's last word
    bed.add("none")
    bed.new_term()  # the events above went to the previous term's NodeConditions
    assert await bed.sync() == 2
    assert bed.cache.walks == 1
    assert bed.asked == {"right", "wrong", "none"}
    assert sorted(bed.writer.writes) == [("none", LIVE), ("wrong", LIVE)]
    # a later term looks at everything again, and finds nothing to write
    bed.new_term()
    assert await bed.sync() == 0
    assert bed.asked == {"right", "wrong", "none"}


async def test_a_failed_write_is_tried_again_at_the_next_pass() -> None:
    bed = Bed(200)
    bed.writer.failures["node-042"] = 2
    assert await bed.sync() == 200
    assert bed.live("node-042") is None
    assert await bed.sync() == 1  # tried again; fails again
    assert bed.asked == {"node-042"}
    assert await bed.sync() == 1
    assert bed.asked == {"node-042"}
    assert bed.live("node-042") == LIVE
    assert await bed.sync() == 0
    assert bed.asked == set()


async def test_a_node_whose_ipnode_is_gone_is_not_tried_again() -> None:
    bed = Bed(3)
    await bed.sync()
    del bed.cache.by_name["node-001"]  # deleted; its event not here yet
    bed.reply("node-001", at=0.1, flags=Flag.FENCED)
    assert await bed.sync() == 1  # NotFound
    assert await bed.sync() == 0
    assert bed.asked == set()


async def test_only_transitions_are_written_never_a_message_or_a_time() -> None:
    bed = Bed(3)
    await bed.sync()
    bed.reply("node-000", "node-001", at=0.6)
    bed.now = 1.1
    bed.transitions()
    await bed.sync()
    writes = len(bed.writer.writes)
    for t in (1.5, 2.0, 5.0):  # node-002's silence grows: another message, the same verdict
        bed.reply("node-000", "node-001", at=t)
        bed.conditions.changed("node-002")
        assert await bed.sync() == 0
    assert len(bed.writer.writes) == writes
    # a message edited by somebody else is no transition either
    bed.edit("node-000", (True, REASON_REPLYING), message="another message")
    assert await bed.sync() == 0


async def test_a_condition_edited_by_somebody_else_is_put_right_at_the_next_pass() -> None:
    """The edit asks for that pass: in a steady cluster nothing else would (the replies of
    a live node do not look at its condition)."""
    kicks: list[None] = []
    bed = Bed(200, kick=lambda: kicks.append(None))
    await bed.sync()
    kicks.clear()  # the new IpNodes' marks asked (as `NodeWatch` does for a new node)
    bed.edit("node-100", (True, REASON_REPLYING), message="reworded by hand")
    assert kicks == []  # no transition: nothing to put right
    bed.edit("node-100", (False, REASON_NO_REPLY))
    assert kicks == [None]
    assert await bed.sync() == 1
    assert bed.asked == {"node-100"}
    assert bed.cache.walks == 0
    assert bed.live("node-100") == LIVE


async def test_a_recreated_ipnode_gets_its_condition_at_the_next_pass() -> None:
    bed = Bed(200)
    await bed.sync()
    old = bed.cache.by_name["node-100"]
    bed.event(old, None)
    bed.add("node-100")
    assert bed.live("node-100") is None
    assert await bed.sync() == 1
    assert bed.asked == {"node-100"}
    assert bed.live("node-100") == LIVE


async def test_an_ipnode_not_judged_yet_is_written_once_the_judge_knows_it() -> None:
    bed = Bed(1)
    bed.cache.by_name["late"] = ipnode("late")  # listed, but the judge has not seen it
    bed.conditions.observe(None, bed.cache.by_name["late"])
    assert await bed.sync() == 1
    assert bed.live("late") is None
    bed.liveness.introduce("late", bed.now)  # `NodeWatch.observe`, then the mark
    bed.conditions.changed("late")
    assert await bed.sync() == 1
    assert bed.live("late") == LIVE


async def test_every_ipnode_is_walked_again_after_the_interval() -> None:
    """The safety net: a change that reached no mark (here: the cache changed without an
    event) is put right by the first pass after `FULL_WALK_INTERVAL`, not before."""
    assert FULL_WALK_INTERVAL == 30.0
    bed = Bed(50)
    await bed.sync()  # at 0: the term's walk
    bed.cache.by_name["node-010"] = ipnode("node-010", (False, REASON_NO_REPLY))
    bed.now = 29.9  # every node silent since 0: a stale view, nobody is dead
    assert await bed.sync() == 0
    assert bed.cache.walks == 0
    bed.now = 30.0
    assert await bed.sync() == 1
    assert bed.cache.walks == 1
    assert len(bed.asked) == 50
    assert bed.live("node-010") == LIVE
    bed.now = 59.9
    assert await bed.sync() == 0
    assert bed.cache.walks == 0


async def test_the_walk_interval_can_be_set() -> None:
    bed = Bed(5, full_walk_interval=2.0)
    await bed.sync()
    bed.now = 2.0
    await bed.sync()
    assert bed.cache.walks == 1


@pytest.mark.parametrize("echo", [True, False], ids=["echoed", "informer-lags"])
async def test_a_verdict_that_moves_back_during_its_write_is_written_again(
    monkeypatch: pytest.MonkeyPatch, echo: bool
) -> None:
    monkeypatch.setattr(node_conditions, "WRITE_WAIT", 0.01)
    bed = Bed(3)
    await bed.sync()
    bed.writer.echo = echo
    bed.writer.gate = asyncio.Event()
    bed.reply("node-001", at=0.1, flags=Flag.FENCED)
    assert await bed.sync() == 1  # the write of Fenced hangs
    bed.reply("node-001", at=0.2)  # live again, as node-001 carries (for now)
    assert await bed.sync() == 0  # its write is still under way
    bed.writer.gate.set()
    await settle()
    assert bed.live("node-001") == FENCED
    assert await bed.sync() == 1
    assert bed.live("node-001") == LIVE


async def test_the_end_of_a_write_overtaken_by_the_verdict_asks_for_a_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing else may start a pass in a quiet cluster: without the ask, the Fenced
    written last stayed on the IpNode of a live node (seen at 200 nodes booting)."""
    monkeypatch.setattr(node_conditions, "WRITE_WAIT", 0.01)
    asked: list[str] = []
    bed = Bed(3, kick=lambda: asked.append("pass"))
    await bed.sync()
    bed.writer.gate = asyncio.Event()
    bed.reply("node-001", at=0.1, flags=Flag.FENCED)
    assert await bed.sync() == 1  # the write of Fenced hangs
    bed.reply("node-001", at=0.2)  # live again while it is written
    asked.clear()
    bed.writer.gate.set()
    await settle()
    assert asked  # the write's end (and the echo of what it stored) ask
    assert await bed.sync() == 1  # the pass asked for writes Live again
    assert bed.live("node-001") == LIVE
    asked.clear()
    await settle()
    assert asked == []  # a write the verdict agrees with asks for nothing


def test_the_pass_waits_for_its_writes_at_most_write_wait(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock (tests/virtual_clock.py): exactly WRITE_WAIT, not a hair more."""

    async def main() -> None:
        assert WRITE_WAIT <= 0.25
        bed = Bed(2)
        bed.writer.gate = asyncio.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await bed.sync() == 2
        assert loop.time() - started == pytest.approx(WRITE_WAIT)
        bed.writer.gate.set()
        await settle()
        assert bed.live("node-000") == LIVE  # finished in the background
        await bed.conditions.close()

    run_virtual(main())


async def test_the_node_watch_passes_on_the_transitions_it_finds() -> None:
    """`NodeWatch.run` hands each batch of transitions over (the scheduler marks them)."""
    liveness = Liveness(0.05)
    loop = asyncio.get_running_loop()
    batches: list[list[tuple[str, bool]]] = []
    watch = NodeWatch(
        liveness,
        clock=loop.time,
        kick=lambda: None,
        leading=lambda: True,
        identity="test",
        set_targets=lambda targets: None,
        on_transitions=lambda ts: batches.append([(t.node, t.live) for t in ts]),
    )
    watch.heard("a", Flag.NONE)
    watch.heard("w", Flag.NONE)
    task = asyncio.create_task(watch.run())
    try:
        for _ in range(20):  # "w" keeps replying, "a" goes silent
            await asyncio.sleep(0.01)
            watch.heard("w", Flag.NONE)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert batches[0] == [("a", True), ("w", True)]
    assert [("a", False)] in batches[1:]


async def test_the_scheduler_feeds_transitions_returns_and_edits(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    """Heartbeat-judged nodes: a death is the judge's transition, a return an IpNode event."""

    def live(name: str) -> tuple[str, str] | None:
        return live_of(srv.store.get(GROUP, "ipnodes", name))

    for name in names(3):
        nodes.add(name)
    add_claims(srv, 6)
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        await eventually(lambda: all(placements(srv).values()), what="every claim placed")
        await eventually(lambda: all(live(n) == LIVE for n in names(3)), what="all Live")
        conditions = running.scheduler.node_conditions
        nodes.kill("node-001")
        await eventually(lambda: live("node-001") == NO_REPLY, what="NoReply")
        nodes.revive("node-001")
        await eventually(lambda: live("node-001") == LIVE, what="Replying again")
        # somebody else's edit, put right at the next pass (a new claim asks for one)
        obj = srv.store.get(GROUP, "ipnodes", "node-002")
        mark_live(False, REASON_NO_REPLY, "by hand")(obj)
        srv.store.update(GROUP, "ipnodes", obj, status=True)
        add_claims(srv, 1, base=6)
        await eventually(lambda: live("node-002") == LIVE, what="put right")
        assert running.scheduler.node_conditions is conditions  # all in one term
