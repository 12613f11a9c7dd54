"""scheduler/placing.py's pass without an API (the stub caches and writer of
test_pool_placement_unit.py): what the pass feeds `core.placement` from its own state, what
it writes and what it tells."""

from __future__ import annotations

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
