"""scheduler/placing.py's pass without an API (the stub caches and writer of
test_pool_placement_unit.py): what the pass feeds `core.placement` from its own state, what
it writes and what it tells."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import structlog
from test_pool_placement_unit import NODES, Live, Nobody, Stub, Writer, base, made, pool, settle

from eipctl.core.eligibility import EXCLUDE_LABEL
from eipctl.core.fields import Mutation, Obj, name_of
from eipctl.core.local_endpoints import EndpointNodes
from eipctl.core.placement import Decision, Reason
from eipctl.metrics import REGISTRY
from eipctl.scheduler.claim_messages import claim_event
from eipctl.scheduler.placing import Placer
from eipctl.scheduler.planned_moves import PLANNED_IN_FLIGHT, PLANNED_STALE
from polling import LoopTurns


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
    async with LoopTurns() as turns:
        await placer.reconcile()
    await settle(placer)
    where = {name: obj["spec"].get("nodeName", "") for name, obj in writer.store.items()}
    return where, turns.during, placer


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


# ------------------------------------------------- writes held in flight, the planned limit


class Gated(Writer):
    """A `Writer` whose spec and status writes wait while their gate is closed (open at
    first), so a test can run a pass while earlier writes are in flight; `calls` lists
    every write begun, as (kind, claim)."""

    def __init__(self, objs: list[Obj]) -> None:
        super().__init__(objs)
        self.gates = {"spec": asyncio.Event(), "status": asyncio.Event()}
        for gate in self.gates.values():
            gate.set()
        self.calls: list[tuple[str, str]] = []

    async def update(self, ref: Any, name: str, mutate: Mutation, **kw: Any) -> Obj:
        self.calls.append(("spec", name))
        await self.gates["spec"].wait()
        return await super().update(ref, name, mutate, **kw)

    async def update_status(self, ref: Any, name: str, mutate: Mutation, **kw: Any) -> Obj:
        self.calls.append(("status", name))
        await self.gates["status"].wait()
        return await Writer.update(self, ref, name, mutate, **kw)

    def begun(self, kind: str) -> list[str]:
        return sorted(name for k, name in self.calls if k == kind)


def ip_claim(n: int, node: str = "", pool_name: str = "p") -> Obj:
    """Claim 198-51-100-<n> for 198.51.100.<n>, of ``pool_name``, Bound on ``node`` if any."""
    obj = base(f"198-51-100-{n}", node, pool_name)
    obj["spec"]["ip"] = f"198.51.100.{n}"
    if node:
        obj["status"] = {"phase": "Bound", "boundNode": node}
    return obj


class Cluster:
    """The caches and clock a Placer reads, each changeable between passes."""

    def __init__(self, claims: list[Obj], nodes: int = 3, **labels: dict[str, str]) -> None:
        self.claims = Stub(claims)
        self.nodes = Stub(
            [{"metadata": {"name": f"n{i}", "labels": labels.get(f"n{i}", {})}} for i in
             range(1, nodes + 1)]
        )  # fmt: skip
        self.live = Live(frozenset(f"n{i}" for i in range(1, nodes + 1)))
        self.kube_nodes = Stub([])
        self.pools = Stub([pool("p", cidr="198.51.100.0/24")])
        self.kicks: list[float] = []

    def exclude(self, *names: str) -> None:
        self.kube_nodes.objs += [
            {"metadata": {"name": n, "labels": {EXCLUDE_LABEL: ""}}} for n in names
        ]

    def placer(self, writer: Writer, **kw: Any) -> Placer:
        kw.setdefault("recorder", Nobody())
        kw.setdefault("services", Nobody())
        return Placer(
            claims=self.claims,
            nodes=self.nodes,
            pools=self.pools,
            liveness=self.live,  # type: ignore[arg-type]
            writer=writer,  # type: ignore[arg-type]
            policy="spread",
            clock=lambda: 0.0,
            kick=self.kicks.append,
            kube_nodes=self.kube_nodes,
            **kw,
        )


async def turns(n: int = 20) -> None:
    """Let the writes that are not held run (the fakes answer within a few loop turns)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_new_claims_are_not_limited_like_planned_moves() -> None:
    """The in-flight limit is for maintenance moves (each takes an address off a live
    node): six new claims are all placed in one pass."""
    claims = [ip_claim(n) for n in range(1, 7)]
    writer = Gated(claims)
    cluster = Cluster(claims)
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    assert len(writer.begun("spec")) == 6
    assert all(writer.store[name_of(c)]["spec"].get("nodeName") for c in claims)
    assert PLANNED_STALE not in cluster.kicks


def bound(obj: Obj) -> Obj:
    """``obj`` as its new node reports it: Bound there."""
    out = copy.deepcopy(obj)
    out["status"] = {"phase": "Bound", "boundNode": out["spec"]["nodeName"]}
    return out


async def planned_moves_begun(count: int = 6) -> tuple[Cluster, Gated, Placer, list[str]]:
    """``count`` claims Bound on n1, n1 excluded, one pass: the moves it began."""
    claims = [ip_claim(n, "n1") for n in range(1, count + 1)]
    writer = Gated(claims)
    cluster = Cluster(claims)
    cluster.exclude("n1")
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    return cluster, writer, placer, writer.begun("spec")


async def test_planned_moves_wait_beyond_the_in_flight_limit_until_one_binds() -> None:
    cluster, writer, placer, moved = await planned_moves_begun()
    assert len(moved) == PLANNED_IN_FLIGHT and cluster.kicks == [PLANNED_STALE]
    await placer.reconcile()  # written, not Bound yet: still no room
    await settle(placer)
    assert len(writer.begun("spec")) == PLANNED_IN_FLIGHT
    placer.observe_claim(bound(writer.store[moved[0]]))
    assert cluster.kicks[-1] == 0.0  # room again: a pass now
    await placer.reconcile()
    await settle(placer)
    assert len(writer.begun("spec")) == PLANNED_IN_FLIGHT + 1


async def test_claims_that_cannot_move_off_an_excluded_node_take_no_room_from_those_that_can() -> (
    None
):
    """Four claims of a pool that admits only the excluded n1 have no target (reported,
    not written as moves): the fifth, of a pool with other nodes, still moves now."""
    stuck = [ip_claim(n, "n1", "solo") for n in range(1, 5)]
    movable = ip_claim(9, "n1")
    writer = Gated([*stuck, movable])
    cluster = Cluster([*stuck, movable], n1={"r": "solo"})
    cluster.pools.objs.append(
        pool("solo", cidr="198.51.100.0/24", nodeSelector={"matchLabels": {"r": "solo"}})
    )
    cluster.exclude("n1")
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    assert writer.store[name_of(movable)]["spec"]["nodeName"] in {"n2", "n3"}
    assert all(writer.store[name_of(c)]["spec"]["nodeName"] == "n1" for c in stuck)
    assert PLANNED_STALE not in cluster.kicks


async def test_a_planned_move_decided_again_while_in_flight_is_deferred_not_held() -> None:
    """Four moves in flight fill the limit; when the node one of them goes to is excluded
    too, the pass decides that claim again: it waits for its own write (deferred), it takes
    no room and is not held back for the limit."""
    claims = [ip_claim(n, "n1") for n in range(1, 5)]
    writer = Gated(claims)
    cluster = Cluster(claims, nodes=5)
    cluster.exclude("n1")
    placer = cluster.placer(writer)
    writer.gates["spec"].clear()
    await placer.reconcile()
    assert len(placer.writes.pending) == PLANNED_IN_FLIGHT
    cluster.exclude("n2")
    await placer.reconcile()
    assert PLANNED_STALE not in cluster.kicks
    assert len(placer.writes.deferred) == 1
    writer.gates["spec"].set()
    await settle(placer)
    assert cluster.kicks == [0.0]  # the deferred claim's pass, once its write is done


async def test_a_failover_in_flight_takes_no_room_from_planned_moves() -> None:
    claims = [ip_claim(n, "n1") for n in range(1, 5)]
    dead = ip_claim(9, "n4")
    writer = Gated([*claims, dead])
    cluster = Cluster([*claims, dead], nodes=4)
    cluster.live.nodes = frozenset({"n1", "n2", "n3"})
    placer = cluster.placer(writer)
    writer.gates["spec"].clear()
    await placer.reconcile()
    await turns()
    assert writer.begun("spec") == [name_of(dead)]
    cluster.exclude("n1")
    await placer.reconcile()
    await turns()
    assert len(writer.begun("spec")) == 1 + PLANNED_IN_FLIGHT
    assert PLANNED_STALE not in cluster.kicks
    writer.gates["spec"].set()
    await settle(placer)


async def test_a_planned_move_written_and_not_yet_reported_counts_once_against_the_limit() -> None:
    """Between its spec write and its status write a move is both recorded as planned and
    in flight: two such moves leave room for two more."""
    claims = [ip_claim(1, "n1"), ip_claim(2, "n1"), ip_claim(3, "n2"), ip_claim(4, "n2")]
    writer = Gated(claims)
    cluster = Cluster(claims, nodes=4)
    cluster.exclude("n1")
    placer = cluster.placer(writer)
    writer.gates["status"].clear()
    await placer.reconcile()
    await turns()
    assert writer.begun("status") == ["198-51-100-1", "198-51-100-2"]
    cluster.exclude("n2")
    await placer.reconcile()
    await turns()
    assert writer.begun("spec") == [name_of(c) for c in claims]
    assert PLANNED_STALE not in cluster.kicks
    writer.gates["status"].set()
    await settle(placer)


async def test_an_inconsistent_claim_is_repaired_once_while_its_repair_is_in_flight() -> None:
    """The node label disagrees with spec.nodeName: one repair write, not one per pass
    (and a pass with a repair in flight still counts the room for planned moves)."""
    broken = ip_claim(1, "n1")
    broken["metadata"]["labels"]["eipctl.io/node"] = "n2"
    writer = Gated([broken])
    cluster = Cluster([broken])
    placer = cluster.placer(writer)
    writer.gates["spec"].clear()
    await placer.reconcile()
    await turns()
    await placer.reconcile()
    await turns()
    assert writer.calls == [("spec", name_of(broken))]
    writer.gates["spec"].set()
    await settle(placer)
    assert writer.store[name_of(broken)]["metadata"]["labels"]["eipctl.io/node"] == "n1"


async def test_a_pass_during_a_no_live_node_report_asks_for_no_further_pass() -> None:
    """Its node is dead and no other may take it: while the report is being written the
    next pass decides the same (the claim is not taken as unplaced), so nothing is deferred
    and no pass follows the write."""
    claim = ip_claim(1, "n1")
    writer = Gated([claim])
    cluster = Cluster([claim])
    cluster.live.nodes = frozenset()
    placer = cluster.placer(writer)
    writer.gates["status"].clear()
    await placer.reconcile()
    await turns()
    assert writer.begun("status") == [name_of(claim)]
    await placer.reconcile()
    await turns()
    assert not placer.writes.deferred
    writer.gates["status"].set()
    await settle(placer)
    assert cluster.kicks == []


def scheduled_message(obj: Obj) -> str:
    [condition] = [c for c in obj["status"]["conditions"] if c["type"] == "Scheduled"]
    message: str = condition["message"]
    return message


class Services:
    """A `ServiceNotifier` that tells one Service of every claim."""

    def placed(self, *_: Any) -> tuple[str, ...]:
        return ("default/web",)

    def unplaceable(self, *_: Any) -> tuple[str, ...]:
        return ("default/web",)


async def test_only_a_failover_records_when_its_node_was_found_dead() -> None:
    """`dead_since` (shared with the liveness watcher) times failovers: a new claim or a
    move off an excluded node must not enter a node in it."""
    claims = [ip_claim(1), ip_claim(2, "n1"), ip_claim(3, "n3")]
    writer = Gated(claims)
    cluster = Cluster(claims)
    cluster.exclude("n1")
    cluster.live.nodes = frozenset({"n1", "n2"})
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    assert all(writer.store[name_of(c)]["spec"].get("nodeName") == "n2" for c in claims)
    assert placer.dead_since == {"n3": 0.0}


async def reported_waiting() -> tuple[Obj, Gated, Cluster, Placer]:
    """A claim on n1 with no live node anywhere, after one pass (its NoLiveNode report)."""
    claim = ip_claim(1, "n1")
    writer = Gated([claim])
    cluster = Cluster([claim])
    cluster.live.nodes = frozenset()
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    return claim, writer, cluster, placer


async def test_a_claim_reported_waiting_for_a_node_moves_once_one_lives() -> None:
    claim, writer, cluster, placer = await reported_waiting()
    assert writer.log == [("update", name_of(claim))]  # the NoLiveNode report
    cluster.claims.objs = list(writer.store.values())  # the informer catches up
    cluster.live.nodes = frozenset({"n2"})
    await placer.reconcile()
    await settle(placer)
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n2"


async def test_a_claim_reported_waiting_is_not_written_again_by_the_next_pass() -> None:
    """`_reported`: the claim already says what the report would write (its phase and
    bound node left as they are): no write, and so no write's end waking a pass."""
    claim, writer, cluster, placer = await reported_waiting()
    assert writer.begun("status") == [name_of(claim)]
    cluster.claims.objs = list(writer.store.values())
    await placer.reconcile()
    await settle(placer)
    assert writer.begun("status") == [name_of(claim)]


async def test_a_mark_for_every_node_that_found_the_claim_taken_off_its_node_is_left() -> None:
    """Policy all: the pass marks a claim it sees on n1, whose copies are all cached; the
    API has it unplaced since (not marked): the write changes nothing and the pass reports
    nothing (no status saying "policy all" for an unmarked claim)."""
    cached = ip_claim(1, "n1")
    copies = made(cached, "n1", "n2", "n3")
    api_side = ip_claim(1)
    writer = Gated([api_side, *copies.values()])
    cluster = Cluster([cached, *copies.values()])
    cluster.pools.objs = [pool("p", cidr="198.51.100.0/24", placement="all")]
    placer = cluster.placer(writer)
    await placer.reconcile()
    await settle(placer)
    assert ("spec", name_of(cached)) in writer.calls
    assert writer.log == []
    assert writer.store[name_of(cached)] == api_side


class NoEndpoints:
    """`LocalTraffic` for claims whose Local Service has no endpoint on any node."""

    def of(self, _claim: Obj, _services: object = None) -> EndpointNodes:
        return EndpointNodes()


async def test_taking_a_claim_off_a_node_without_its_local_endpoint_is_no_planned_move() -> None:
    """NoLocalEndpoint is a planned reason, but a claim taken off (no node answers for
    its Service) goes nowhere: nothing to wait for, not counted as a planned move."""
    before = planned_moves(Reason.NO_LOCAL_ENDPOINT)
    claim = ip_claim(1, "n1")
    writer = Gated([claim])
    cluster = Cluster([claim])
    placer = cluster.placer(writer, local=NoEndpoints())
    await placer.reconcile()
    await settle(placer)
    assert "nodeName" not in writer.store[name_of(claim)]["spec"]
    assert planned_moves(Reason.NO_LOCAL_ENDPOINT) == before


async def test_a_new_claims_event_and_status_name_only_its_node() -> None:
    """The Event's log fields carry what the move has, None for what it has not (no empty
    node, no False); the status message says no more than "placed on"."""
    claim = ip_claim(1)
    told = Told()
    writer = Gated([claim])
    placer = Cluster([claim]).placer(writer, recorder=told)
    await placer.reconcile()
    await settle(placer)
    assert scheduled_message(writer.store[name_of(claim)]) == "placed on n1"
    [(_, fields)] = told.events
    assert fields == {
        "ip": "198.51.100.1",
        "from_node": None,
        "to_node": "n1",
        "all_nodes": None,
        "services": None,
    }


async def test_a_marked_claims_event_says_all_nodes_and_no_target_and_its_services() -> None:
    claim = ip_claim(1, "n1")
    copies = made(claim, "n1", "n2", "n3")
    told = Told()
    writer = Gated([claim, *copies.values()])
    cluster = Cluster([claim, *copies.values()])
    cluster.pools.objs = [pool("p", cidr="198.51.100.0/24", placement="all")]
    placer = cluster.placer(writer, recorder=told, services=Services())
    await placer.reconcile()
    await settle(placer)
    [(_, fields)] = told.events
    assert fields["from_node"] == "n1" and fields["to_node"] is None
    assert fields["all_nodes"] is True and fields["services"] == ["default/web"]


async def test_the_no_live_node_events_name_the_node_left_if_any_and_the_services() -> None:
    on_dead, new = ip_claim(1, "n1"), ip_claim(2)
    told = Told()
    writer = Gated([on_dead, new])
    cluster = Cluster([on_dead, new])
    cluster.live.nodes = frozenset()
    placer = cluster.placer(writer, recorder=told)
    await placer.reconcile()
    await settle(placer)
    assert sorted(((f["node"] or "-"), f["services"]) for _, f in told.events) == [
        ("-", None),
        ("n1", None),
    ]
    assert None in [f["node"] for _, f in told.events]
    told.events.clear()
    again = Cluster([ip_claim(3)])
    again.live.nodes = frozenset()
    placer = again.placer(Gated([ip_claim(3)]), recorder=told, services=Services())
    await placer.reconcile()
    await settle(placer)
    [(_, fields)] = told.events
    assert fields["services"] == ["default/web"]


async def test_a_planned_move_whose_claim_is_deleted_or_moved_elsewhere_frees_its_room() -> None:
    cluster, writer, placer, moved = await planned_moves_begun()
    assert len(moved) == PLANNED_IN_FLIGHT
    placer.observe_claim(None, moved[0])  # deleted
    assert cluster.kicks[-1] == 0.0
    await placer.reconcile()
    await settle(placer)
    assert len(writer.begun("spec")) == PLANNED_IN_FLIGHT + 1
    elsewhere = copy.deepcopy(writer.store[moved[1]])
    elsewhere["spec"]["nodeName"] = "n3" if elsewhere["spec"]["nodeName"] == "n2" else "n2"
    cluster.kicks.clear()
    placer.observe_claim(elsewhere)  # moved by someone else before its new node bound it
    assert cluster.kicks == [0.0]
    await placer.reconcile()
    await settle(placer)
    assert len(writer.begun("spec")) == PLANNED_IN_FLIGHT + 2


async def test_a_planned_move_binding_asks_for_a_pass_only_if_one_held_moves_back() -> None:
    cluster, writer, placer, [moved] = await planned_moves_begun(1)
    placer.observe_claim(bound(writer.store[moved]))
    assert cluster.kicks == []


async def test_a_repair_drops_the_all_nodes_mark_of_a_claim_on_a_node() -> None:
    """Policy spread, the claim on n1 still carries the mark of policy all: the repair
    takes the mark off (and keeps the node), so the claim is consistent after."""
    half = ip_claim(1, "n1")
    half["metadata"]["labels"]["eipctl.io/placement"] = "all"
    writer = Gated([half])
    placer = Cluster([half]).placer(writer)
    await placer.reconcile()
    await settle(placer)
    stored = writer.store[name_of(half)]
    assert "eipctl.io/placement" not in stored["metadata"]["labels"]
    assert stored["spec"]["nodeName"] == "n1"


async def test_a_repair_that_found_the_claim_moved_writes_no_status() -> None:
    """The cache has it on n1 with a wrong label, the API on n2 already: the repair's
    compare-and-set changes nothing and no "on n1" status is written over it."""
    cached = ip_claim(1, "n1")
    cached["metadata"]["labels"]["eipctl.io/node"] = "n3"
    api_side = ip_claim(1, "n2")
    writer = Gated([api_side])
    placer = Cluster([cached]).placer(writer)
    await placer.reconcile()
    await settle(placer)
    assert writer.calls == [("spec", name_of(cached))]
    assert writer.store[name_of(cached)] == api_side


async def test_a_repairs_log_line_names_the_node_or_none() -> None:
    on_node = ip_claim(1, "n1")
    on_node["metadata"]["labels"]["eipctl.io/node"] = "n3"
    marked = ip_claim(2, pool_name="all")
    marked["metadata"]["labels"]["eipctl.io/placement"] = "all"  # Pending: not consistent
    copies = made(marked, "n1", "n2", "n3")
    writer = Gated([on_node, marked, *copies.values()])
    cluster = Cluster([on_node, marked, *copies.values()])
    cluster.pools.objs.append(pool("all", cidr="198.51.100.0/24", placement="all"))
    placer = cluster.placer(writer)
    with structlog.testing.capture_logs() as logs:
        await placer.reconcile()
        await settle(placer)
    repaired = {e["claim"]: e["node"] for e in logs if e["event"] == "claim.repaired"}
    assert repaired == {name_of(on_node): "n1", name_of(marked): None}
