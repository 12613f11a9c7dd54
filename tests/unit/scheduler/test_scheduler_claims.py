"""The claim mutations the writer applies: compare-and-set placement, phase from the fresh copy."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

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


@pytest.mark.parametrize(
    ("node", "phase", "bound", "want_phase", "want_bound"),
    [
        ("n2", "Bound", "n1", "Scheduled", None),  # moved: reset, clear boundNode
        ("n2", "Bound", "n2", "Bound", "n2"),  # the new node already bound it: keep
        ("n2", "", "", "Scheduled", None),
        ("n2", "Failed", "n1", "Scheduled", None),
        ("", "Bound", "n1", "Pending", None),
    ],
)
def test_scheduled_status_follows_the_fresh_node(
    node: str, phase: str, bound: str, want_phase: str, want_bound: str | None
) -> None:
    out = applied(claim(node, phase or "Pending", bound), c.scheduled_status("msg", now=NOW))
    assert out["status"]["phase"] == want_phase
    assert out["status"].get("boundNode") == want_bound
    (cond,) = out["status"]["conditions"]
    assert cond["type"] == "Scheduled"
    assert cond["status"] == ("True" if node else "False")


def test_condition_keeps_transition_time_when_status_holds() -> None:
    first = applied(claim("n1", "Pending"), c.scheduled_status("on n1", now=NOW))
    later = datetime(2026, 1, 2, tzinfo=UTC)
    second = applied(first, c.scheduled_status("moved to n1", now=later))
    assert second["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert second["status"]["conditions"][0]["message"] == "moved to n1"
    third = applied(second, c.scheduled_status("moved to n1", now=later))
    assert third == second  # nothing to write


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
    assert c.consistent(applied(marked, c.scheduled_status("all", now=NOW)))


def test_placement_view() -> None:
    view = c.placement_of(claim("n1"))
    assert (view.name, view.pool, view.node, view.all_nodes) == ("198-51-100-7", "p", "n1", False)


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
    assert c.is_per_node(handmade)
    assert not c.is_per_node(base)
