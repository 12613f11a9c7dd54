"""scheduler/claims.py: compare-and-set placement, consistency, the placement view (the
status it writes: test_claim_status.py)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from eipctl.core.claim_status import scheduled_status
from eipctl.core.claims import is_node_bound
from eipctl.core.fields import Mutation, name_of
from eipctl.scheduler import claims as c

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def claim(node: str = "", phase: str = "", bound: str = "", **labels: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "198-51-100-7", "labels": {"eipctl.io/pool": "p", **labels}},
        "spec": {"ip": "198.51.100.7"},
    }
    if node:
        obj["spec"]["nodeName"] = node
        obj["metadata"]["labels"]["eipctl.io/node"] = node
    if phase:
        obj["status"] = {"phase": phase, **({"boundNode": bound} if bound else {})}
    return obj


def applied(obj: dict[str, Any], mutation: Mutation) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    return mutation(out) or out


def test_place_sets_node_and_label_together() -> None:
    out = applied(claim("n1"), c.place("n1", "n2"))
    assert out["spec"]["nodeName"] == "n2"
    assert out["metadata"]["labels"]["eipctl.io/node"] == "n2"
    assert out["metadata"]["labels"]["eipctl.io/pool"] == "p"


def test_place_is_compare_and_set() -> None:
    moved_meanwhile = claim("n3")
    assert applied(moved_meanwhile, c.place("n1", "n2")) == moved_meanwhile


def test_place_all_nodes_clears_node() -> None:
    out = applied(claim("n1"), c.place("n1", "", all_nodes=True))
    assert "nodeName" not in out["spec"]
    assert "eipctl.io/node" not in out["metadata"]["labels"]
    assert out["metadata"]["labels"]["eipctl.io/placement"] == "all"
    back = applied(out, c.place("", "n2"))
    assert "eipctl.io/placement" not in back["metadata"]["labels"]


def test_consistency() -> None:
    assert c.consistent(claim())
    assert c.consistent(claim("n1", "Scheduled"))
    assert c.consistent(claim("n1", "Bound", "n1"))
    assert not c.consistent(claim("n1", "Bound", "n0"))
    assert not c.consistent(claim("n1", "Pending"))
    broken = claim("n1", "Scheduled")
    broken["metadata"]["labels"]["eipctl.io/node"] = "n9"
    assert not c.consistent(broken)
    marked = applied(claim(), c.place("", "", all_nodes=True))
    assert not c.consistent(marked)  # still Pending
    assert c.consistent(applied(marked, scheduled_status("all", now=NOW)))


def test_placement_view() -> None:
    view = c.placement_of(claim("n1"))
    assert (view.name, view.pool, view.node, view.all_nodes) == ("198-51-100-7", "p", "n1", False)


def test_an_unpooled_claims_view_has_no_pool_not_an_empty_one() -> None:
    """`ClaimPlacement.pool` is None for an unpooled claim (the policies and eligibility
    look-ups take None as "unpooled"), also when the pool label is there but empty."""
    unpooled = claim("n1")
    del unpooled["metadata"]["labels"]["eipctl.io/pool"]
    assert c.placement_of(unpooled).pool is None
    unpooled["metadata"]["labels"]["eipctl.io/pool"] = ""
    assert c.placement_of(unpooled).pool is None


def test_a_claim_marked_for_every_node_that_still_names_one_is_inconsistent() -> None:
    """Half of a move to policy all (the mark written, nodeName and label left): the pass
    must repair it, not take it as marked."""
    half = claim("n1", "Scheduled", **{"eipctl.io/placement": "all"})
    assert not c.consistent(half)


def test_per_node_changes() -> None:
    from eipctl.core.placement import Cluster
    from eipctl.scheduler.per_node import per_node_changes

    base = claim()
    base["metadata"]["uid"] = "u1"
    snapshot = Cluster(
        known=frozenset({"n1", "n2", "n3"}),
        live=frozenset({"n1"}),
        eligible={"p": frozenset({"n1", "n2"})},
    )
    first = per_node_changes([base], {}, snapshot)
    assert [name_of(b) for b in first.create] == ["198-51-100-7.n1", "198-51-100-7.n2"]
    assert first.delete == ()
    made = {name_of(b): b for b in first.create}
    assert per_node_changes([base], made, snapshot) == per_node_changes([], {}, snapshot)
    # no longer policy all: ours go, a hand-made nodeBound claim stays
    handmade = claim("n3")
    handmade["metadata"]["name"] = "198-51-100-7.n3"
    gone = per_node_changes([], {**made, "198-51-100-7.n3": handmade}, snapshot)
    assert sorted(name_of(o) for o in gone.delete) == ["198-51-100-7.n1", "198-51-100-7.n2"]
    assert is_node_bound(handmade)
    assert not is_node_bound(base)


def test_per_node_copies_of_a_local_service_only_where_kube_proxy_delivers() -> None:
    from eipctl.core.local_endpoints import EndpointNodes
    from eipctl.core.placement import Cluster
    from eipctl.scheduler.per_node import per_node_changes

    base = claim()
    base["metadata"]["uid"] = "u1"
    snapshot = Cluster(known=frozenset({"n1", "n2", "n3"}), live=frozenset({"n1", "n2"}))
    pods = EndpointNodes(frozenset({"n1"}), frozenset({"n3"}))  # n3: terminating, serving
    first = per_node_changes([base], {}, snapshot, local_of=lambda _: pods)
    assert [name_of(b) for b in first.create] == ["198-51-100-7.n1", "198-51-100-7.n3"]
    made = {name_of(b): b for b in first.create}
    moved = EndpointNodes(frozenset({"n2"}))  # the pods moved to n2
    after = per_node_changes([base], made, snapshot, local_of=lambda _: moved)
    assert [name_of(b) for b in after.create] == ["198-51-100-7.n2"]
    assert sorted(name_of(o) for o in after.delete) == ["198-51-100-7.n1", "198-51-100-7.n3"]
    everywhere = per_node_changes([base], {}, snapshot, local_of=lambda _: None)
    assert len(everywhere.create) == 3  # no Local Service: every admitted node


def test_no_per_node_claim_for_a_node_whose_name_leaves_no_room_for_one() -> None:
    """A node name may be 253 characters, a claim name too: ``<claim>.<node>`` can be
    none, and that node gets no copy while the others do."""
    from eipctl.core.placement import Cluster
    from eipctl.scheduler.per_node import per_node_changes

    long_node = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    assert len(long_node) == 253
    snapshot = Cluster(known=frozenset({"n1", long_node}), live=frozenset({"n1", long_node}))
    changes = per_node_changes([claim()], {}, snapshot)
    assert [name_of(b) for b in changes.create] == ["198-51-100-7.n1"]


def test_a_claim_whose_node_can_have_no_copy_is_marked_without_waiting_for_one() -> None:
    """`copy_missing` holds the mark back until the copy that will hold the IP is cached;
    on a node whose name leaves no room for a per-node claim name no copy will ever come,
    so the mark is not held back for it (forever)."""
    from eipctl.core.placement import Cluster, Decision, Reason
    from eipctl.scheduler.per_node import copy_missing

    long_node = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    snapshot = Cluster(known=frozenset({"n1", long_node}), live=frozenset({"n1", long_node}))
    on_long = Decision("198-51-100-7", long_node, "", Reason.ALL_NODES, all_nodes=True)
    assert not copy_missing(on_long, claim(long_node), {}, snapshot)
    on_n1 = Decision("198-51-100-7", "n1", "", Reason.ALL_NODES, all_nodes=True)
    assert copy_missing(on_n1, claim("n1"), {}, snapshot)
    copy_n1 = {"198-51-100-7.n1": claim("n1")}
    assert not copy_missing(on_n1, claim("n1"), copy_n1, snapshot)


def test_a_claim_on_a_dead_node_is_marked_without_waiting_for_a_copy() -> None:
    """The dead node holds nothing: marking it takes nothing off a live link."""
    from eipctl.core.placement import Cluster, Decision, Reason
    from eipctl.scheduler.per_node import copy_missing

    snapshot = Cluster(known=frozenset({"n1", "n2"}), live=frozenset({"n1"}))
    on_dead = Decision("198-51-100-7", "n2", "", Reason.ALL_NODES, all_nodes=True)
    assert not copy_missing(on_dead, claim("n2"), {}, snapshot)
