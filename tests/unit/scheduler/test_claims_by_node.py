"""The claim cache's node index, and the failover it serves: a dead node's claims planned
alone over the others' counts, decided as a pass over every claim would, never while our
own writes could make those counts wrong."""

from __future__ import annotations

import copy

import pytest
from test_placing import Cluster, Gated, ip_claim
from test_pool_placement_unit import Stub, Writer, settle

from eipctl.core.fields import Obj, name_of
from eipctl.scheduler import placing
from eipctl.scheduler.claims_by_node import NODE_INDEX, placed_node
from eipctl.scheduler.placing import Placer


def test_the_index_holds_placements_only() -> None:
    placed = ip_claim(1, "n1")
    bound = ip_claim(2, "n1")
    bound["spec"]["nodeBound"] = True  # a copy of policy all, or a node IP: never moved
    assert list(placed_node(placed)) == ["n1"]
    assert list(placed_node(bound)) == []
    assert list(placed_node(ip_claim(3))) == []  # not placed yet


class Indexed(Stub):
    """A claim cache with the informer's node index; counts the walks of every claim."""

    walks = 0

    def objects(self) -> list[Obj]:
        self.walks += 1
        return super().objects()

    def get(self, key: str) -> Obj | None:
        found = [o for o in self.objs if name_of(o) == key]
        return copy.deepcopy(found[0]) if found else None

    def by_index(self, index: str, value: str) -> list[Obj]:
        assert index == NODE_INDEX
        return [copy.deepcopy(o) for o in self.objs if value in placed_node(o)]

    def index_count(self, index: str, value: str) -> int:
        return len(self.by_index(index, value))


def ten_on_each_of_three() -> list[Obj]:
    """Claims 198.51.100.1-30 on n1..n3; n4 holds nothing yet."""
    return [ip_claim(n, f"n{1 + n % 3}") for n in range(1, 31)]


def after_n2_died(claims: list[Obj], writer: Writer, by_node: Indexed | None) -> Placer:
    cluster = Cluster(claims, nodes=4)
    cluster.claims = by_node or Stub(claims)
    cluster.live.nodes = frozenset({"n1", "n3", "n4"})
    return cluster.placer(writer, dead_since={"n2": 0.0}, by_node=by_node)


def targets(writer: Writer, claims: list[Obj]) -> dict[str, str]:
    return {name_of(c): writer.store[name_of(c)]["spec"]["nodeName"] for c in claims}


async def test_a_death_is_planned_from_its_claims_alone_as_a_whole_pass_plans_it() -> None:
    claims = ten_on_each_of_three()
    victims = [c for c in claims if c["spec"]["nodeName"] == "n2"]
    index, fast_writes = Indexed(claims), Writer(claims)
    placer = after_n2_died(claims, fast_writes, index)
    assert placer.dead_holding(0.0) == ["n2"]
    assert await placer.failover()
    await settle(placer)
    assert index.walks == 0  # no claim but n2's was read
    assert placer.failovers == 1
    whole_writes = Writer(claims)
    whole = after_n2_died(claims, whole_writes, None)
    await whole.reconcile()
    await settle(whole)
    assert targets(fast_writes, victims) == targets(whole_writes, victims)
    # the others' counts were used: n1 and n3 hold 10 each, the empty n4 takes all ten
    assert set(targets(fast_writes, victims).values()) == {"n4"}
    assert fast_writes.store.keys() == whole_writes.store.keys()


async def test_no_failover_of_its_own_while_a_write_of_ours_is_in_flight() -> None:
    """The cache's counts would miss where that write puts its claim (a death during a
    batch of placements): the pass over every claim decides instead."""
    claims = [*ten_on_each_of_three(), ip_claim(40)]  # .40 is new: a placement to write
    writer = Gated(claims)
    placer = after_n2_died(claims, writer, Indexed(claims))
    placer.liveness.nodes = frozenset({"n1", "n2", "n3", "n4"})  # type: ignore[attr-defined]
    writer.gates["spec"].clear()
    await placer.reconcile()
    assert placer.writes.pending
    placer.liveness.nodes = frozenset({"n1", "n3", "n4"})  # type: ignore[attr-defined]
    assert placer.dead_holding(0.0) == ["n2"]
    assert not await placer.failover()
    writer.gates["spec"].set()
    await settle(placer)


async def test_no_failover_of_its_own_before_the_cache_holds_what_we_wrote() -> None:
    claims = ten_on_each_of_three()
    index = Indexed(claims)
    placer = after_n2_died(claims, Writer(claims), index)
    ours = copy.deepcopy(claims[0])
    ours["metadata"]["resourceVersion"] = "7"  # stored by us, the cache still at "1"
    placer.writes.remember(ours)
    assert not await placer.failover()
    index.objs[0] = ours  # the cache caught up
    assert await placer.failover()
    await settle(placer)


async def test_nothing_to_do_without_a_dead_node_holding_claims() -> None:
    claims = ten_on_each_of_three()
    placer = after_n2_died(claims, Writer(claims), Indexed(claims))
    placer.dead_since.clear()
    assert placer.dead_holding(0.0) == []
    assert not await placer.failover()
    no_index = after_n2_died(claims, Writer(claims), None)
    assert no_index.dead_holding(0.0) == []
    assert not await no_index.failover()


async def test_claims_with_nowhere_to_go_are_left_to_the_pass_that_reports_them() -> None:
    """Every other node is dead too: no write, no failover counted, on every try."""
    claims = ten_on_each_of_three()
    writer = Writer(claims)
    placer = after_n2_died(claims, writer, Indexed(claims))
    placer.liveness.nodes = frozenset()  # type: ignore[attr-defined]
    for _ in range(2):
        assert not await placer.failover()
    await settle(placer)
    assert writer.log == [] and placer.failovers == 0


def test_only_nodes_still_dead_and_still_holding_claims_are_failed_over() -> None:
    """A pass may have marked a node dead that replied since, or one that holds nothing."""
    claims = ten_on_each_of_three()
    placer = after_n2_died(claims, Writer(claims), Indexed(claims))
    placer.dead_since.update({"n1": 0.0, "n4": 0.0})  # n1 replies again; n4 holds nothing
    placer.liveness.nodes = frozenset({"n1", "n3"})  # type: ignore[attr-defined]
    assert placer.dead_holding(0.0) == ["n2"]


async def test_a_storm_of_deaths_is_left_to_the_paced_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """More claims on dead nodes than FAILOVER_MOST: many nodes judged dead together."""
    claims = ten_on_each_of_three()
    placer = after_n2_died(claims, Writer(claims), Indexed(claims))
    monkeypatch.setattr(placing, "FAILOVER_MOST", 9)  # n2 holds 10
    assert not await placer.failover()
    monkeypatch.setattr(placing, "FAILOVER_MOST", 10)
    assert await placer.failover()
    await settle(placer)
