"""core/placement.py with externalTrafficPolicy: Local claims (`ClaimPlacement.local`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.local_endpoints import EndpointNodes
from eipctl.core.placement import ClaimPlacement, Cluster, Decision, Policy, Reason, plan

NODES = ("n1", "n2", "n3", "n4")


def cluster(live: tuple[str, ...] = NODES, **eligible: set[str]) -> Cluster:
    return Cluster(
        known=frozenset(NODES),
        live=frozenset(live),
        eligible={pool: frozenset(nodes) for pool, nodes in eligible.items()},
    )


def at(*ready: str, terminating: tuple[str, ...] = ()) -> EndpointNodes:
    return EndpointNodes(frozenset(ready), frozenset(terminating))


def local(name: str, node: str = "", *ready: str, **kw: object) -> ClaimPlacement:
    return ClaimPlacement(name, node=node, local=at(*ready, **kw))  # type: ignore[arg-type]


def test_a_local_claim_goes_only_where_its_endpoints_are_spread_among_them() -> None:
    claims = [local(f"c{i}", "", "n2", "n4") for i in range(4)]
    result = plan(claims, cluster(), Policy.SPREAD)
    assert [d.to_node for d in result.decisions] == ["n2", "n4", "n2", "n4"]
    assert {d.reason for d in result.decisions} == {Reason.UNPLACED}


def test_its_endpoint_moved_the_claim_follows_make_before_break() -> None:
    result = plan([local("c", "n1", "n3")], cluster(), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "n3", Reason.NO_LOCAL_ENDPOINT),)
    assert Reason.NO_LOCAL_ENDPOINT.planned  # the old node is live: it lets go once bound


def test_a_claim_where_its_endpoint_is_stays_whatever_the_load() -> None:
    others = [ClaimPlacement(f"o{i}", node="n1") for i in range(5)]
    result = plan([*others, local("c", "n1", "n1", "n2")], cluster(), Policy.SPREAD)
    assert result.decisions == ()


def test_the_last_endpoint_gone_the_claim_is_taken_off_and_keeps_waiting() -> None:
    result = plan([local("c", "n1")], cluster(), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "", Reason.NO_LOCAL_ENDPOINT, unplace=True),)
    assert result.moves == result.decisions
    waiting = plan([local("c", "")], cluster(), Policy.SPREAD)
    assert waiting.decisions == (Decision("c", "", "", Reason.NO_LOCAL_ENDPOINT),)
    assert waiting.decisions[0].no_live_node and not waiting.moves  # reported, not written


def test_a_node_still_serving_while_its_pods_terminate_keeps_the_claim_until_one_is_ready() -> None:
    draining = local("c", "n1", terminating=("n1",))
    result = plan([draining], cluster(), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "", Reason.NO_LOCAL_ENDPOINT),)
    assert not result.moves
    ready_elsewhere = local("c", "n1", "n2", terminating=("n1",))
    assert plan([ready_elsewhere], cluster(), Policy.SPREAD).decisions == (
        Decision("c", "n1", "n2", Reason.NO_LOCAL_ENDPOINT),
    )


def test_endpoints_on_dead_or_ineligible_nodes_do_not_count() -> None:
    result = plan([local("c", "n1", "n1", "n2")], cluster(live=("n2", "n3")), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "n2", Reason.NODE_DEAD),)
    pooled = ClaimPlacement("p", pool="a", node="", local=at("n1", "n2"))
    assert plan([pooled], cluster(a={"n2", "n3"}), Policy.SPREAD).decisions[0].to_node == "n2"
    dead = plan([local("c", "n1", "n4")], cluster(live=("n2", "n3")), Policy.SPREAD)
    assert dead.decisions == (Decision("c", "n1", "", Reason.NO_LOCAL_ENDPOINT, unplace=True),)


def test_no_live_node_at_all_leaves_even_a_local_claim_where_it_is() -> None:
    """A scheduler that lost its view of the nodes must not strip claims off them."""
    result = plan([local("c", "n1", "n2")], cluster(live=()), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "", Reason.NODE_DEAD),)
    assert not result.moves


def test_rebalance_moves_a_local_claim_only_to_a_node_with_its_endpoint() -> None:
    claims = [local(f"c{i}", "n1", "n1", "n2") for i in range(4)]
    result = plan(claims, cluster(), Policy.SPREAD, rebalance_moves=10)
    assert {d.to_node for d in result.decisions} == {"n2"}


NODE = st.sampled_from(NODES)
LOCAL_CLAIMS = st.lists(
    st.builds(
        lambda i, node, ready, term: ClaimPlacement(
            f"c{i:03d}",
            node=node,
            local=EndpointNodes(frozenset(ready), frozenset(term) - frozenset(ready)),
        ),
        st.integers(0, 999),
        st.sampled_from(["", *NODES]),
        st.sets(NODE),
        st.sets(NODE),
    ),
    max_size=12,
    unique_by=lambda c: c.name,
)


@given(LOCAL_CLAIMS, st.sets(NODE, min_size=1))
def test_no_local_claim_is_ever_sent_to_a_node_without_a_ready_endpoint(
    claims: list[ClaimPlacement], live: set[str]
) -> None:
    result = plan(claims, cluster(live=tuple(sorted(live))), Policy.SPREAD)
    by_name = {c.name: c for c in claims}
    for d in result.decisions:
        c = by_name[d.claim]
        assert c.local is not None
        if d.to_node:
            assert d.to_node in c.local.ready and d.to_node in live
        if d.unplace:  # taken off only where nothing answers and it is not serving
            assert not (c.local.ready & live)
            assert not (c.node in live and c.local.answers(c.node))
    for c in claims:  # a claim on a live node with a ready endpoint is never touched
        if c.node in live and c.local is not None and c.node in c.local.ready:
            assert c.name not in {d.claim for d in result.decisions}


@given(LOCAL_CLAIMS, st.sets(NODE, min_size=1))
def test_a_plan_written_is_stable(claims: list[ClaimPlacement], live: set[str]) -> None:
    c = cluster(live=tuple(sorted(live)))
    moves = {d.claim: d for d in plan(claims, c, Policy.SPREAD).moves}
    after = [
        ClaimPlacement(x.name, node=moves[x.name].to_node, local=x.local) if x.name in moves else x
        for x in claims
    ]
    assert plan(after, c, Policy.SPREAD).moves == ()


# ---------------------------------------------------------------- a flapping node (hold-down)


def held(live: tuple[str, ...] = NODES, held_down: tuple[str, ...] = ("n1",)) -> Cluster:
    return Cluster(known=frozenset(NODES), live=frozenset(live), held_down=frozenset(held_down))


def test_a_node_back_from_the_dead_gets_no_new_claim_while_another_may_take_it() -> None:
    result = plan([ClaimPlacement(f"c{i}") for i in range(6)], held(), Policy.SPREAD)
    assert "n1" not in {d.to_node for d in result.decisions}
    dead = plan([ClaimPlacement("c", node="n2")], held(live=("n1", "n3")), Policy.SPREAD)
    assert dead.decisions[0].to_node == "n3"


def test_a_held_down_node_keeps_what_it_has_and_is_the_last_resort() -> None:
    assert plan([ClaimPlacement("c", node="n1")], held(), Policy.SPREAD).decisions == ()
    only = plan([ClaimPlacement("c", node="n2")], held(live=("n1",)), Policy.SPREAD)
    assert only.decisions[0].to_node == "n1"  # better held there than nowhere
    pod_there = plan([local("c", "", "n1")], held(), Policy.SPREAD)
    assert pod_there.decisions[0].to_node == "n1"  # a Local Service's only endpoint


@given(st.lists(st.sampled_from(["", *NODES]), max_size=10), st.sets(NODE), st.sets(NODE))
def test_a_held_down_node_is_a_target_only_when_nothing_else_is(
    nodes: list[str], live: set[str], held_down: set[str]
) -> None:
    claims = [ClaimPlacement(f"c{i:02d}", node=n) for i, n in enumerate(nodes)]
    c = Cluster(known=frozenset(NODES), live=frozenset(live), held_down=frozenset(held_down))
    for d in plan(claims, c, Policy.SPREAD).decisions:
        if d.to_node in held_down:
            assert live <= held_down
