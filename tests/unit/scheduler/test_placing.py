"""scheduler/placing.py's pass without an API (the stub caches and writer of
test_pool_placement_unit.py): what the pass feeds `core.placement` from its own state, what
it writes and what it tells."""

from __future__ import annotations

import asyncio
from typing import Any

from test_pool_placement_unit import NODES, Live, Nobody, Stub, Writer, base, pool, settle

from eipctl.core.eligibility import EXCLUDE_LABEL
from eipctl.core.fields import Obj, name_of
from eipctl.core.placement import Decision, Reason
from eipctl.metrics import REGISTRY
from eipctl.scheduler.claim_messages import claim_event
from eipctl.scheduler.placing import Placer


class Told:
    """A recorder that keeps each Event's reason and fields."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    def tell(self, involved: Obj, type_: str, reason: str, message: str, **fields: object) -> None:
        self.events.append((reason, fields))


def make_placer(cached: Obj, writer: Writer, now: float = 0.0, **kw: Any) -> Placer:
    """A Placer over the known nodes n1..n3 whose claim cache holds `cached`."""
    kw.setdefault("liveness", Live(NODES))
    kw.setdefault("recorder", Nobody())
    return Placer(
        claims=Stub([cached]),
        nodes=Stub([{"metadata": {"name": n}} for n in sorted(NODES)]),
        pools=Stub([pool("p", cidr="198.51.100.0/24")]),
        writer=writer,  # type: ignore[arg-type]
        services=Nobody(),
        policy="spread",
        clock=lambda: now,
        kick=lambda _: None,
        **kw,
    )


async def placed_on(now: float, returned_at: dict[str, float], hold_down: float) -> str:
    """Where one new claim goes in a pass at `now` (three live nodes, no load)."""
    claim = base()
    writer = Writer([claim])
    placer = make_placer(claim, writer, now, returned_at=returned_at, hold_down=hold_down)
    await placer.reconcile()
    await settle(placer)
    node: str = writer.store[name_of(claim)]["spec"]["nodeName"]
    return node


async def test_a_node_back_from_the_dead_is_held_down_for_hold_down_seconds() -> None:
    """n1 came back at 0 with --node-hold-down 10: until 10 it takes a claim only if no other
    node can (the spread would pick n1 first), from 10 on it is a candidate like any."""
    assert await placed_on(0.0, {}, 10.0) == "n1"
    assert await placed_on(5.0, {"n1": 0.0}, 10.0) == "n2"
    assert await placed_on(9.9, {"n1": 0.0}, 10.0) == "n2"
    assert await placed_on(10.0, {"n1": 0.0}, 10.0) == "n1"
    assert await placed_on(5.0, {"n1": 0.0}, 0.0) == "n1"  # no hold-down by default


async def test_a_claim_placed_by_someone_else_since_the_decision_is_left_as_found() -> None:
    """The cache says unplaced, the API has it on n3 already: the placement write changes
    nothing (its precondition fails) and the pass reports nothing for it either."""
    writer = Writer([base(node="n3")])
    placer = make_placer(base(), writer)
    await placer.reconcile()
    await settle(placer)
    assert writer.log == []
    stored = writer.store[name_of(base())]
    assert stored["spec"]["nodeName"] == "n3" and "status" not in stored


def planned_moves(reason: Reason) -> float:
    sample = "eipctl_scheduler_planned_moves_total"
    return REGISTRY.get_sample_value(sample, {"reason": reason.value}) or 0.0


async def test_the_event_of_a_failover_names_both_nodes_and_it_is_no_planned_move() -> None:
    """A failover is no maintenance move: not counted as planned, not waited for."""
    before = planned_moves(Reason.NODE_DEAD)
    claim = base(node="n1")
    told = Told()
    writer = Writer([claim])
    placer = make_placer(claim, writer, liveness=Live(frozenset({"n2", "n3"})), recorder=told)
    await placer.reconcile()
    await settle(placer)
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n2"
    [(reason, fields)] = told.events
    assert reason == claim_event(Decision("c", "n1", "n2", Reason.NODE_DEAD))[1]
    assert fields["from_node"] == "n1" and fields["to_node"] == "n2"
    assert fields["ip"] == "198.51.100.7"
    assert planned_moves(Reason.NODE_DEAD) == before


async def test_a_move_off_an_excluded_node_is_a_planned_move() -> None:
    before = planned_moves(Reason.NODE_EXCLUDED)
    claim = base(node="n1")
    writer = Writer([claim])
    excluded = {"metadata": {"name": "n1", "labels": {EXCLUDE_LABEL: ""}}}
    placer = make_placer(claim, writer, kube_nodes=Stub([excluded]))
    await placer.reconcile()
    await settle(placer)
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n2"
    assert planned_moves(Reason.NODE_EXCLUDED) == before + 1


class Ticking:
    """A clock that every reading moves by ``step``: the pass's own work is what advances
    it, so where its slices end is exact, whatever the machine does."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def claims_to_place(count: int) -> list[Obj]:
    return [
        {**base(name=f"198-51-100-{i}"), "spec": {"ip": f"198.51.100.{i}", "prefixLength": 32}}
        for i in range(1, count + 1)
    ]


async def placements(clock: Ticking | None, count: int) -> tuple[dict[str, str], int, Placer]:
    """Where a pass puts ``count`` new claims on n1..n3, and how many turns a task beside it
    got meanwhile (a pass on a clock that never moves never yields)."""
    claims = claims_to_place(count)
    writer = Writer(claims)
    placer = make_placer(claims[0], writer)
    placer.claims = placer.writes.claims = Stub(claims)
    if clock is not None:
        placer.clock = clock
    turns, passing = 0, True

    async def beside() -> None:
        nonlocal turns
        while passing:
            await asyncio.sleep(0)
            turns += 1

    other = asyncio.create_task(beside())
    await asyncio.sleep(0)
    turns = 0
    await placer.reconcile()
    during = turns
    passing = False
    await other
    await settle(placer)
    where = {name: obj["spec"].get("nodeName", "") for name, obj in writer.store.items()}
    return where, during, placer


async def test_a_long_pass_gives_the_loop_back_and_decides_as_one_that_does_not() -> None:
    """[scale]: a pass over every claim held the loop the Lease is renewed on (~0.2 s at
    50,000 claims). In slices of the loop's time it must still decide exactly what one
    unbroken pass decides, each claim written once."""
    unbroken, turns, _ = await placements(None, 60)
    assert turns == 0
    sliced, turns, placer = await placements(Ticking(0.001), 60)
    assert turns >= 10  # ~3 clock readings per claim and step: a 5 ms slice is a few claims
    assert sliced == unbroken
    assert sorted(set(sliced.values())) == ["n1", "n2", "n3"]
    assert placer.longest_hold <= 0.005 + 0.003  # a slice, and the reading that ends it


async def test_passes_asked_for_at_once_run_one_after_the_other() -> None:
    """A rebalance and a placement pass are two keys of the work queue; sliced, they could
    interleave and decide on each other's half-done state."""
    claims = claims_to_place(30)
    writer = Writer(claims)
    placer = make_placer(claims[0], writer)
    placer.claims = placer.writes.claims = Stub(claims)
    clock = Ticking(0.001)
    placer.clock = clock
    inside, most = 0, 0
    passing = placer._pass

    async def counted(rebalance_moves: int) -> Any:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        try:
            return await passing(rebalance_moves)
        finally:
            inside -= 1

    placer._pass = counted  # type: ignore[method-assign]
    await asyncio.gather(placer.reconcile(), placer.reconcile(rebalance_moves=1))
    assert most == 1 and placer.passes == 2
    await settle(placer)
    assert sorted(writer.log).count(("update", "198-51-100-1")) == 2  # placed, then its status
