"""Placement with a policy per pool (`core.placement.Policies`): tables, then hypothesis."""

from __future__ import annotations

import copy
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from test_placement import apply

from eipctl.core.placement import (
    ClaimPlacement,
    Cluster,
    Decision,
    Policies,
    Policy,
    Reason,
    plan,
)

NODES = frozenset({"n1", "n2", "n3"})


def on_nodes(claims: list[ClaimPlacement], nodes: frozenset[str]) -> dict[str, int]:
    count = dict.fromkeys(sorted(nodes), 0)
    for c in claims:
        if c.node in count:
            count[c.node] += 1
    return count


# ---------------------------------------------------------------- tables


def test_policies_of_a_pool_else_the_default() -> None:
    policies = Policies(Policy.SINGLE, {"bgp": Policy.ALL, "l2": Policy.SPREAD})
    assert policies.of("bgp") is Policy.ALL
    assert policies.of("l2") is Policy.SPREAD
    assert policies.of("other") is Policy.SINGLE  # no placement of its own, or unknown
    assert policies.of(None) is Policy.SINGLE  # unpooled
    assert Policies.of_any("all") == Policies(Policy.ALL)
    assert Policies.of_any(policies) is policies


def test_one_pass_decides_each_claim_by_its_pool() -> None:
    claims = [
        ClaimPlacement("a", "bgp"),
        ClaimPlacement("b", "l2"),
        ClaimPlacement("c", "bgp", "n1"),
        ClaimPlacement("d"),
        ClaimPlacement("e", "l2"),
    ]
    policies = Policies(Policy.SINGLE, {"bgp": Policy.ALL, "l2": Policy.SPREAD})
    result = plan(claims, Cluster(NODES, NODES), policies)
    assert result.decisions == (
        Decision("a", "", "", Reason.ALL_NODES, all_nodes=True),
        Decision("b", "", "n1", Reason.UNPLACED),
        Decision("c", "n1", "", Reason.ALL_NODES, all_nodes=True),
        # single: the most loaded candidate; b is on n1 now (c leaves it)
        Decision("d", "", "n1", Reason.UNPLACED),
        Decision("e", "", "n2", Reason.UNPLACED),
    )
    assert result.cursor == "n2"


def test_spread_counts_the_claims_of_other_policies() -> None:
    # two single-policy claims sit on n1, one spread claim on n2: new spread claims go to
    # n3 first, then n2, and never to n1 while it holds more
    claims = [
        ClaimPlacement("s1", "gather", "n1"),
        ClaimPlacement("s2", "gather", "n1"),
        ClaimPlacement("t1", "l2", "n2"),
        *(ClaimPlacement(f"u{i}", "l2") for i in range(3)),
    ]
    policies = Policies(Policy.SPREAD, {"gather": Policy.SINGLE})
    result = plan(claims, Cluster(NODES, NODES), policies)
    assert [d.to_node for d in result.decisions] == ["n3", "n2", "n3"]
    assert on_nodes(apply(claims, result), NODES) == {"n1": 2, "n2": 2, "n3": 2}


def test_single_gathers_where_claims_of_any_policy_are() -> None:
    claims = [*(ClaimPlacement(f"t{i}", "l2", "n2") for i in range(2)), ClaimPlacement("g")]
    policies = Policies(Policy.SINGLE, {"l2": Policy.SPREAD})
    assert plan(claims, Cluster(NODES, NODES), policies).decisions == (
        Decision("g", "", "n2", Reason.UNPLACED),
    )


def test_claims_marked_for_every_node_are_no_load() -> None:
    claims = [
        *(ClaimPlacement(f"a{i}", "bgp", all_nodes=True) for i in range(5)),
        ClaimPlacement("b", "l2", "n1"),
        ClaimPlacement("c", "l2"),
    ]
    policies = Policies(Policy.SPREAD, {"bgp": Policy.ALL})
    assert plan(claims, Cluster(NODES, NODES), policies).decisions == (
        Decision("c", "", "n2", Reason.UNPLACED),
    )


def test_a_claim_leaving_for_every_node_no_longer_weighs_on_its_node() -> None:
    policies = Policies(Policy.SPREAD, {"bgp": Policy.ALL})
    staying = [ClaimPlacement("x", "l2", "n1"), ClaimPlacement("y", "l2", "n2")]
    claims = [ClaimPlacement("a", "bgp", "n1"), *staying, ClaimPlacement("z", "l2")]
    # n1 and n2 hold one each once a is marked: z goes to n1 (round-robin from the start)
    two = frozenset({"n1", "n2"})
    assert plan(claims, Cluster(two, two), policies).decisions == (
        Decision("a", "n1", "", Reason.ALL_NODES, all_nodes=True),
        Decision("z", "", "n1", Reason.UNPLACED),
    )
    # the same when the bgp pool admits no live node: a is marked all the same, and is not
    # a claim stuck on n1
    nodes = Cluster(NODES, two, {"bgp": frozenset({"n3"})})
    assert plan(claims, nodes, policies).decisions == (
        Decision("a", "n1", "", Reason.ALL_NODES, all_nodes=True),
        Decision("z", "", "n1", Reason.UNPLACED),
    )


def test_switching_a_pool_to_all_marks_its_claims_only() -> None:
    claims = [ClaimPlacement("a", "p", "n1"), ClaimPlacement("b", "q", "n2")]
    result = plan(claims, Cluster(NODES, NODES), Policies(Policy.SPREAD, {"p": Policy.ALL}))
    assert result.decisions == (Decision("a", "n1", "", Reason.ALL_NODES, all_nodes=True),)


def test_switching_a_pool_from_all_places_its_claims_on_one_node() -> None:
    claims = [
        ClaimPlacement("a", "p", all_nodes=True),
        ClaimPlacement("b", "q", all_nodes=True),
        ClaimPlacement("c", "r", "n1"),
    ]
    policies = Policies(Policy.ALL, {"p": Policy.SPREAD, "r": Policy.SINGLE})
    result = plan(claims, Cluster(NODES, NODES), policies)
    assert result.decisions == (Decision("a", "", "n2", Reason.UNPLACED),)


def test_rebalance_moves_only_spread_claims() -> None:
    claims = [
        *(ClaimPlacement(f"g{i}", "gather", "n1") for i in range(4)),
        *(ClaimPlacement(f"s{i}", "l2", "n1") for i in range(2)),
    ]
    policies = Policies(Policy.SPREAD, {"gather": Policy.SINGLE})
    result = plan(claims, Cluster(NODES, NODES), policies, rebalance_moves=5)
    assert result.decisions == (
        Decision("s0", "n1", "n2", Reason.REBALANCE),
        Decision("s1", "n1", "n3", Reason.REBALANCE),
    )
    # the default is spread no longer: a spread pool is still rebalanced
    policies = Policies(Policy.SINGLE, {"l2": Policy.SPREAD})
    assert [d.claim for d in plan(claims, Cluster(NODES, NODES), policies, rebalance_moves=5)
            .decisions] == ["s0", "s1"]  # fmt: skip
    assert plan(claims, Cluster(NODES, NODES), Policy.SINGLE, rebalance_moves=5).decisions == ()


# ---------------------------------------------------------------- properties

POOLS = ("p1", "p2", "p3")
node_names = st.lists(st.sampled_from([f"n{i}" for i in range(6)]), min_size=1, unique=True)
policies_st = st.builds(
    Policies,
    st.sampled_from(list(Policy)),
    st.dictionaries(st.sampled_from(POOLS), st.sampled_from(list(Policy))),
)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ClaimPlacement], Cluster]:
    known = draw(node_names)
    live = draw(st.lists(st.sampled_from(known), unique=True))
    eligible = {
        p: frozenset(draw(st.lists(st.sampled_from(known), unique=True)))
        for p in draw(st.lists(st.sampled_from(POOLS), unique=True))
    }
    excluded = {
        n: Reason.NODE_EXCLUDED for n in draw(st.lists(st.sampled_from(known), unique=True))
    }
    claim_nodes = st.sampled_from(["", *known, "ghost"])
    claims = [
        ClaimPlacement(
            f"c{i:03d}",
            draw(st.sampled_from([None, *POOLS, "gone"])),
            draw(claim_nodes),
            draw(st.booleans()),
        )
        for i in range(draw(st.integers(0, 30)))
    ]
    return claims, Cluster(frozenset(known), frozenset(live), eligible, excluded)


@given(scenarios(), policies_st, st.sampled_from(["", "n0", "n3", "n9"]), st.integers(0, 4))
def test_mixed_policies_hold_the_rules(
    scenario: tuple[list[ClaimPlacement], Cluster],
    policies: Policies,
    cursor: str,
    budget: int,
) -> None:
    claims, snapshot = scenario
    before = copy.deepcopy((claims, snapshot, policies))
    result = plan(claims, snapshot, policies, cursor=cursor, rebalance_moves=budget)
    assert (claims, snapshot, policies) == before  # inputs untouched
    assert result == plan(claims, snapshot, policies, cursor=cursor, rebalance_moves=budget)
    by_name = {c.name: c for c in claims}
    assert len({d.claim for d in result.decisions}) == len(result.decisions)
    for d in result.decisions:
        claim = by_name[d.claim]
        policy = policies.of(claim.pool)
        assert d.from_node == claim.node
        assert d.all_nodes == (policy is Policy.ALL)  # each claim by its own pool's policy
        if d.reason is Reason.REBALANCE:
            assert policy is Policy.SPREAD
        if d.to_node:
            assert d.to_node in snapshot.candidates(claim.pool)
    after = apply(claims, result)
    for claim in after:
        policy = policies.of(claim.pool)
        if policy is Policy.ALL:
            # every claim of an all-pool is marked (and on no node)
            assert claim.all_nodes and not claim.node
        elif snapshot.candidates(claim.pool):
            # no claim of another policy is left on a dead, gone, ineligible or excluded
            # node while a live candidate exists
            assert claim.node in snapshot.candidates(claim.pool)
    # nothing left to do afterwards but claims with no live node (and rebalancing)
    assert plan(after, snapshot, policies, cursor=result.cursor).moves == ()


@given(scenarios(), policies_st, st.integers(0, 3), st.data())
def test_mixed_plan_does_not_depend_on_the_order_of_claims(
    scenario: tuple[list[ClaimPlacement], Cluster],
    policies: Policies,
    budget: int,
    data: st.DataObject,
) -> None:
    claims, snapshot = scenario
    shuffled = data.draw(st.permutations(claims))
    assert plan(shuffled, snapshot, policies, rebalance_moves=budget) == plan(
        claims, snapshot, policies, rebalance_moves=budget
    )


@given(scenarios(), st.sampled_from(list(Policy)), st.integers(0, 3))
def test_a_pool_naming_the_default_changes_nothing(
    scenario: tuple[list[ClaimPlacement], Cluster], policy: Policy, budget: int
) -> None:
    claims, snapshot = scenario
    same = Policies(policy, dict.fromkeys(POOLS, policy))
    assert plan(claims, snapshot, same, rebalance_moves=budget) == plan(
        claims, snapshot, policy, rebalance_moves=budget
    )


@given(scenarios(), policies_st, st.sampled_from([Policy.SPREAD, Policy.SINGLE]))
def test_load_is_counted_across_policies(
    scenario: tuple[list[ClaimPlacement], Cluster], policies: Policies, other: Policy
) -> None:
    """Claims that stay on a node weigh the same whatever their policy: give the pool
    ``fixed`` (whose claims all stay put on live nodes) spread or single, and every other
    claim gets the same decision."""
    claims, snapshot = scenario
    hosts = sorted(snapshot.candidates("fixed"))  # where they stay put
    fixed = [
        ClaimPlacement(f"f{i:03d}", "fixed", hosts[i % len(hosts)])
        for i in range(len(hosts) * 2 - 1)
    ]
    everyone = claims + fixed
    as_spread = Policies(policies.default, {**policies.by_pool, "fixed": Policy.SPREAD})
    as_other = Policies(policies.default, {**policies.by_pool, "fixed": other})
    assert plan(everyone, snapshot, as_spread) == plan(everyone, snapshot, as_other)


@given(scenarios(), policies_st)
def test_spread_targets_the_least_loaded_counting_every_policy(
    scenario: tuple[list[ClaimPlacement], Cluster], policies: Policies
) -> None:
    """Replay the decisions in order: each spread target is a least-loaded candidate, where
    load is every claim left on a node (any policy) plus the placements decided before."""
    claims, snapshot = scenario
    result = plan(claims, snapshot, policies)
    moved = {d.claim for d in result.moves}
    load = Counter(c.node for c in claims if c.node and c.name not in moved)
    by_name = {c.name: c for c in claims}
    for d in result.moves:
        if not d.to_node:
            continue
        if policies.of(by_name[d.claim].pool) is Policy.SPREAD:
            candidates = snapshot.candidates(by_name[d.claim].pool)
            assert load[d.to_node] == min(load[n] for n in candidates)
        load[d.to_node] += 1


@given(st.integers(0, 60), st.integers(0, 60), st.integers(1, 8))
def test_spread_stays_even_beside_an_all_pool(n_spread: int, n_all: int, n_nodes: int) -> None:
    nodes = frozenset(f"node-{i}" for i in range(n_nodes))
    claims = [ClaimPlacement(f"a{i:03d}", "bgp") for i in range(n_all)] + [
        ClaimPlacement(f"s{i:03d}", "l2") for i in range(n_spread)
    ]
    result = plan(claims, Cluster(nodes, nodes), Policies(Policy.SPREAD, {"bgp": Policy.ALL}))
    after = apply(claims, result)
    assert all(c.all_nodes for c in after if c.pool == "bgp")
    counts = on_nodes(after, nodes)
    assert sum(counts.values()) == n_spread
    assert max(counts.values()) - min(counts.values()) <= 1
