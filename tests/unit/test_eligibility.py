"""Planned maintenance: which Nodes may hold external IPs (`core.eligibility`), and how
`core.placement` moves claims off the others."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.eligibility import (
    EXCLUDE_LABEL,
    EXCLUDE_TAINT,
    Exclusion,
    NodeFacts,
    exclusion,
    facts_of,
    reason_text,
)
from eipctl.core.placement import ClaimPlacement, Cluster, Policy, Reason, plan

NODES = ("n1", "n2", "n3")


def node(
    labels: dict[str, str] | None = None,
    unschedulable: Any = None,
    taints: Any = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    if taints is not None:
        spec["taints"] = taints
    return {"metadata": {"name": "n1", "labels": labels or {}}, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "cordon", "want"),
    [
        (node(), True, None),
        (node({EXCLUDE_LABEL: ""}), False, Exclusion.EXCLUDED),
        (node({EXCLUDE_LABEL: "false"}), False, Exclusion.EXCLUDED),  # the key counts
        (node(taints=[{"key": EXCLUDE_TAINT, "effect": "NoSchedule"}]), False, Exclusion.TAINTED),
        (node(taints=[{"key": "other", "effect": "NoSchedule"}]), True, None),
        (node(unschedulable=True), False, None),  # cordon honoured only with the flag
        (node(unschedulable=True), True, Exclusion.CORDONED),
        (node(unschedulable="true"), True, None),  # malformed: absent
        (node(taints="junk"), True, None),
        (node(taints=[{"effect": "NoSchedule"}, "x"]), True, None),
        # precedence: label, then taint, then cordon
        (
            node({EXCLUDE_LABEL: ""}, True, [{"key": EXCLUDE_TAINT}]),
            True,
            Exclusion.EXCLUDED,
        ),
        (node(None, True, [{"key": EXCLUDE_TAINT}]), True, Exclusion.TAINTED),
    ],
)
def test_exclusion_from_a_node(obj: dict[str, Any], cordon: bool, want: Exclusion | None) -> None:
    assert exclusion(facts_of(obj), cordoned_excludes=cordon) is want


def test_facts_of_a_malformed_node_are_empty() -> None:
    assert facts_of({"metadata": "x", "spec": []}) == NodeFacts(labels={})


def test_reason_text_is_the_event_wording() -> None:
    assert reason_text("node-1", Exclusion.EXCLUDED) == "node-1 excluded"
    assert reason_text("node-1", Exclusion.CORDONED) == "node-1 cordoned"
    assert EXCLUDE_TAINT in reason_text("node-1", Exclusion.TAINTED)


def test_exclusion_values_are_the_placement_reasons() -> None:
    """Planned (make-before-break) moves: the exclusions, and a Local Service's endpoints
    moving (`Reason.NO_LOCAL_ENDPOINT`, worded by `core.local_endpoints`, not here)."""
    for why in Exclusion:
        assert Reason(why.value).planned
    others = {r for r in Reason if r.planned and r.value not in {e.value for e in Exclusion}}
    assert others == {Reason.NO_LOCAL_ENDPOINT}


# ---------------------------------------------------------------- placement


def cluster(
    excluded: dict[str, Reason], live: tuple[str, ...] = NODES, **eligible: set[str]
) -> Cluster:
    return Cluster(
        known=frozenset(NODES),
        live=frozenset(live),
        eligible={p: frozenset(n) for p, n in eligible.items()},
        excluded=excluded,
    )


def test_claims_leave_an_excluded_node_with_its_reason() -> None:
    claims = [ClaimPlacement(f"c{i}", None, "n1") for i in range(4)] + [
        ClaimPlacement("c9", None, "n2")
    ]
    result = plan(claims, cluster({"n1": Reason.NODE_EXCLUDED}), Policy.SPREAD)
    assert {d.claim for d in result.moves} == {"c0", "c1", "c2", "c3"}
    assert all(d.reason is Reason.NODE_EXCLUDED and d.from_node == "n1" for d in result.moves)
    assert {d.to_node for d in result.moves} == {"n2", "n3"}


def test_nothing_new_lands_on_an_excluded_node() -> None:
    claims = [ClaimPlacement(f"c{i}") for i in range(6)]
    for policy in (Policy.SPREAD, Policy.SINGLE):
        result = plan(claims, cluster({"n2": Reason.NODE_CORDONED}), policy)
        assert "n2" not in {d.to_node for d in result.decisions}


def test_an_excluded_node_with_no_alternative_keeps_its_claims() -> None:
    claims = [ClaimPlacement("c0", "rack", "n1")]
    result = plan(claims, cluster({"n1": Reason.NODE_TAINTED}, rack={"n1"}), Policy.SPREAD)
    assert result.moves == ()
    (d,) = result.decisions
    assert d.no_live_node and d.reason is Reason.NODE_TAINTED


def test_a_pool_that_stops_admitting_wins_over_an_exclusion() -> None:
    claims = [ClaimPlacement("c0", "rack", "n1")]
    c = cluster({"n1": Reason.NODE_EXCLUDED}, rack={"n2"})
    (d,) = plan(claims, c, Policy.SPREAD).decisions
    assert (d.reason, d.to_node) == (Reason.NODE_INELIGIBLE, "n2")


def test_back_from_exclusion_nothing_moves_back() -> None:
    claims = [ClaimPlacement("c0", None, "n2"), ClaimPlacement("c1", None, "n3")]
    assert plan(claims, cluster({}), Policy.SPREAD).decisions == ()


def test_rebalance_never_targets_an_excluded_node() -> None:
    claims = [ClaimPlacement(f"c{i}", None, "n2") for i in range(6)]
    result = plan(claims, cluster({"n1": Reason.NODE_EXCLUDED}), Policy.SPREAD, rebalance_moves=5)
    assert {d.to_node for d in result.decisions} == {"n3"}


def test_policy_all_leaves_excluded_nodes_out() -> None:
    c = cluster({"n1": Reason.NODE_EXCLUDED})
    assert c.admits(None) == {"n2", "n3"}
    assert c.selected(None) == set(NODES)


@given(
    st.lists(st.sampled_from(("", *NODES)), max_size=25),
    st.sets(st.sampled_from(NODES)),
    st.dictionaries(
        st.sampled_from(NODES),
        st.sampled_from((Reason.NODE_EXCLUDED, Reason.NODE_TAINTED, Reason.NODE_CORDONED)),
    ),
    st.sampled_from((Policy.SPREAD, Policy.SINGLE)),
)
def test_exclusion_invariants(
    where: list[str], live: set[str], excluded: dict[str, Reason], policy: Policy
) -> None:
    claims = [ClaimPlacement(f"c{i:03d}", None, n) for i, n in enumerate(where)]
    c = cluster(excluded, tuple(sorted(live)))
    result = plan(claims, c, policy)
    decided = {d.claim: d for d in result.decisions}
    for claim in claims:
        d = decided.get(claim.name)
        if d is not None and d.to_node:
            assert d.to_node in c.live and d.to_node not in excluded  # never lands there
        if claim.node in excluded and claim.node in c.live:
            # a live excluded node's claim moves, or is reported stuck, with its exclusion
            assert d is not None and d.reason is excluded[claim.node]
            assert bool(d.to_node) == bool(c.live - excluded.keys())
        if claim.node and claim.node in c.live and claim.node not in excluded:
            assert d is None  # a claim on a live eligible node stays


def test_a_stop_is_a_departure_when_the_node_is_deleted_drained_or_excluded() -> None:
    from eipctl.core.eligibility import leaving_reason

    assert leaving_reason({"metadata": {"name": "n"}}) is None  # a rolling update
    assert leaving_reason({"metadata": {"deletionTimestamp": "2026-12-01T00:00:00Z"}}) == (
        "NodeDeleting"
    )
    assert leaving_reason({"spec": {"unschedulable": True}}) == "NodeCordoned"
    excluded = {
        "metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "x"}}
    }
    assert leaving_reason(excluded) == "NodeExcluded"
    tainted = {
        "spec": {"taints": [{"key": "eipctl.io/exclude-from-external-ips", "effect": "NoSchedule"}]}
    }
    assert leaving_reason(tainted) == "NodeTainted"
    assert leaving_reason({"spec": {"unschedulable": "yes"}}) is None  # malformed: no evidence
