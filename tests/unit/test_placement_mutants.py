"""core/placement.py: stuck claims as load, the rebalance budget and its choice of moves,
pinned where mutation testing found them loose; from the guard operators: a Local claim
on an excluded node, or on a dead node that still serves it (docs/testing.md, "Mutation")."""

from __future__ import annotations

from eipctl.core.local_endpoints import EndpointNodes
from eipctl.core.placement import ClaimPlacement, Cluster, Decision, Policy, Reason, plan


def cluster(live: str, known: str = "", **eligible: str) -> Cluster:
    live_nodes = frozenset(live.split())
    return Cluster(
        known=live_nodes | frozenset(known.split()),
        live=live_nodes,
        eligible={pool: frozenset(nodes.split()) for pool, nodes in eligible.items()},
    )


def on(node: str, count: int, prefix: str = "", pool: str | None = None) -> list[ClaimPlacement]:
    return [ClaimPlacement(f"{prefix or node}-{i}", pool, node) for i in range(count)]


def targets(claims: list[ClaimPlacement], nodes: Cluster, **kw: int) -> list[str]:
    return [d.to_node for d in plan(claims, nodes, Policy.SPREAD, **kw).decisions]


def test_a_claim_stuck_on_a_live_node_still_counts_as_its_load() -> None:
    # x is ineligible on n1 and its pool has no live node: it stays, and n1 carries it
    nodes = cluster("n1 n2", known="n3", p="n3")
    stuck = ClaimPlacement("x", "p", "n1")
    assert targets([stuck, ClaimPlacement("y")], nodes) == ["", "n2"]
    # n1: one staying + the stuck one (2); n2: one staying (1)
    claims = [*on("n1", 1), *on("n2", 1), stuck, ClaimPlacement("y")]
    assert targets(claims, nodes) == ["", "n2"]
    # n1: only the stuck one (1); n2: one staying (1): a tie goes to n1
    assert targets([*on("n2", 1), stuck, ClaimPlacement("y")], nodes) == ["", "n1"]


def test_a_claim_without_a_candidate_does_not_stop_the_others() -> None:
    nodes = cluster("n1 n2", known="n3", p="n3")
    claims = [ClaimPlacement("a", "p"), ClaimPlacement("b")]
    result = plan(claims, nodes, Policy.SPREAD)
    assert result.decisions == (
        Decision("a", "", "", Reason.UNPLACED),
        Decision("b", "", "n1", Reason.UNPLACED),
    )


def test_spread_counts_each_new_placement_once() -> None:
    assert targets(
        [*on("n1", 2), *(ClaimPlacement(f"u{i}") for i in range(3))], cluster("n1 n2")
    ) == [
        "n2",
        "n2",
        "n1",
    ]


def test_rebalance_is_off_by_default_and_only_for_spread() -> None:
    claims = [*on("n1", 4)]
    nodes = cluster("n1 n2")
    assert plan(claims, nodes, Policy.SPREAD).decisions == ()
    assert plan(claims, nodes, Policy.SINGLE, rebalance_moves=3).decisions == ()
    assert plan(claims, nodes, Policy.SPREAD, rebalance_moves=1).decisions == (
        Decision("n1-0", "n1", "n2", Reason.REBALANCE),
    )


def test_rebalance_moves_until_no_node_has_two_more_than_another() -> None:
    assert len(plan(on("n1", 4), cluster("n1 n2"), Policy.SPREAD, rebalance_moves=5).decisions) == 2
    # 2 against an empty node is one move (1/1), 1 against 0 is none
    assert len(plan(on("n1", 2), cluster("n1 n2"), Policy.SPREAD, rebalance_moves=5).decisions) == 1
    assert plan(on("n1", 1), cluster("n1 n2"), Policy.SPREAD, rebalance_moves=5).decisions == ()


def test_rebalance_takes_from_the_most_loaded_to_the_least_loaded() -> None:
    claims = [*on("n1", 3), *on("n2", 5), *on("n3", 1)]
    result = plan(claims, cluster("n1 n2 n3 n4"), Policy.SPREAD, rebalance_moves=1)
    assert result.decisions == (Decision("n2-0", "n2", "n4", Reason.REBALANCE),)
    # the least loaded target, not the first by name
    claims = [*on("n1", 4), *on("n2", 1)]
    result = plan(claims, cluster("n1 n2 n3"), Policy.SPREAD, rebalance_moves=1)
    assert result.decisions == (Decision("n1-0", "n1", "n3", Reason.REBALANCE),)


def test_rebalance_keeps_the_placements_and_never_moves_a_claim_twice() -> None:
    nodes = cluster("n1 n2 n3", p="n2")
    # a-x is ineligible on n1 and moves to n2; n1 keeps 3 more, n3 is empty
    claims = [ClaimPlacement("a-x", "p", "n1"), *on("n1", 3), ClaimPlacement("new")]
    result = plan(claims, nodes, Policy.SPREAD, rebalance_moves=3)
    named = [d.claim for d in result.decisions]
    assert len(named) == len(set(named))
    assert result.decisions[:2] == (
        Decision("a-x", "n1", "n2", Reason.NODE_INELIGIBLE),
        Decision("new", "", "n3", Reason.UNPLACED),
    )
    assert [d.reason for d in result.decisions[2:]] == [Reason.REBALANCE]
    assert result.decisions[2].from_node == "n1"


def test_an_excluded_node_says_why_even_for_a_local_claim_it_does_not_serve() -> None:
    """The exclusion is the reason reported (and planned for), not the missing endpoint."""
    claim = ClaimPlacement("c", node="n1", local=EndpointNodes(frozenset({"n2"})))
    excluded = Cluster(
        known=frozenset({"n1", "n2"}),
        live=frozenset({"n1", "n2"}),
        excluded={"n1": Reason.NODE_CORDONED},
    )
    result = plan([claim], excluded, Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "n2", Reason.NODE_CORDONED),)


def test_a_dead_node_still_serving_a_local_claim_does_not_keep_it() -> None:
    """Terminating endpoints keep a claim only on a live node: on a dead one nothing
    delivers, so with no ready endpoint anywhere the claim is taken off and waits."""
    claim = ClaimPlacement(
        "c", node="n1", local=EndpointNodes(frozenset(), terminating=frozenset({"n1"}))
    )
    result = plan([claim], cluster("n2 n3", known="n1"), Policy.SPREAD)
    assert result.decisions == (Decision("c", "n1", "", Reason.NO_LOCAL_ENDPOINT, unplace=True),)
