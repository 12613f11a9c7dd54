"""core/claim_status.py: every condition each writer puts, field by field, and the edges of
the phase rules (docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from eipctl.core.claim_status import (
    cloud_status,
    has_conflict,
    is_bound_here,
    mark_bound,
    mark_conflict,
    no_live_node_status,
    placed_status,
    scheduled_status,
)
from eipctl.core.claims import manual_claim, put_node
from eipctl.core.resources import IpClaim

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WHEN = "2026-01-01T00:00:00Z"


def claim(node: str = "", **status: str) -> dict[str, Any]:
    obj = manual_claim(ipaddress.ip_address("192.0.2.1"), pool="p", prefix_length=32, services=[])
    put_node(obj, node)
    if status:
        obj["status"] = dict(status)
    return obj


def marked_for_all_nodes() -> dict[str, Any]:
    obj = claim()
    obj["metadata"]["labels"]["eipctl.io/placement"] = "all"
    return obj


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [c for c in obj["status"]["conditions"] if c["type"] == type_]
    return dict(found)


def recent(found: dict[str, Any]) -> dict[str, Any]:
    """The condition without its time, after checking the time is now (UTC, whole seconds)."""
    stamp = datetime.fromisoformat(found.pop("lastTransitionTime"))
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 5
    return found


@pytest.mark.parametrize(
    ("make", "status", "reason"),
    [
        (claim, "False", "NoLiveNode"),
        (lambda: claim("n1"), "True", "Placed"),
        (marked_for_all_nodes, "True", "AllNodes"),
    ],
    ids=["unplaced", "placed", "all-nodes"],
)
def test_the_scheduled_condition_in_full(
    make: Callable[[], dict[str, Any]], status: str, reason: str
) -> None:
    obj = make()
    scheduled_status("why", now=NOW)(obj)
    assert condition(obj, "Scheduled") == {
        "type": "Scheduled",
        "status": status,
        "reason": reason,
        "message": "why",
        "lastTransitionTime": WHEN,
    }


def test_a_claim_for_all_nodes_without_a_phase_counts_as_pending() -> None:
    obj = marked_for_all_nodes()
    scheduled_status("all", now=NOW)(obj)
    assert obj["status"]["phase"] == "Scheduled"


def test_failed_on_the_node_it_is_placed_on_is_kept() -> None:
    obj = claim("n1", phase="Failed", boundNode="n1")
    scheduled_status("m", now=NOW)(obj)
    assert (obj["status"]["phase"], obj["status"]["boundNode"]) == ("Failed", "n1")


def test_no_live_node_in_full() -> None:
    obj = claim("n1", phase="Bound", boundNode="n1")
    no_live_node_status("gone", now=NOW)(obj)
    assert condition(obj, "Scheduled") == {
        "type": "Scheduled",
        "status": "False",
        "reason": "NoLiveNode",
        "message": "gone",
        "lastTransitionTime": WHEN,
    }


def test_placed_status_conditions_in_full() -> None:
    obj = claim("n1")
    placed_status()(obj)
    assert recent(condition(obj, "Scheduled")) == {
        "type": "Scheduled",
        "status": "True",
        "reason": "NodeBound",
        "message": "the IP of node n1",
    }
    orphan = claim()
    placed_status()(orphan)
    assert recent(condition(orphan, "Scheduled")) == {
        "type": "Scheduled",
        "status": "False",
        "reason": "Orphan",
        "message": "kept for reuse",
    }


def test_placed_status_resets_a_node_bound_there_but_not_bound() -> None:
    obj = claim("n1", phase="Failed", boundNode="n1")
    placed_status()(obj)
    assert obj["status"]["phase"] == "Scheduled" and "boundNode" not in obj["status"]


def test_cloud_status_conditions_in_full() -> None:
    obj = claim("n1")
    cloud_status("n1")(obj)
    assert recent(condition(obj, "CloudAddress")) == {
        "type": "CloudAddress",
        "status": "True",
        "reason": "Associated",
        "message": "associated with node n1",
    }
    cloud_status("n1", "NoPublicInterface", "no gateway")(obj)
    assert recent(condition(obj, "CloudAddress")) == {
        "type": "CloudAddress",
        "status": "False",
        "reason": "NoPublicInterface",
        "message": "no gateway",
    }


def test_the_conflict_condition_in_full_and_when_it_stops_bound_here() -> None:
    obj = claim("n1")
    mark_conflict("n1", "AddressInUse", "someone answers")(obj)
    assert recent(condition(obj, "Conflict")) == {
        "type": "Conflict",
        "status": "True",
        "reason": "AddressInUse",
        "message": "someone answers",
    }
    obj["status"].update(phase="Bound", boundNode="n1")
    assert not is_bound_here(IpClaim.from_dict(obj), "n1")  # a live conflict: not yet
    mark_bound("n1")(obj)
    assert recent(condition(obj, "Conflict")) == {
        "type": "Conflict",
        "status": "False",
        "reason": "Resolved",
        "message": "the address is on the link",
    }
    assert is_bound_here(IpClaim.from_dict(obj), "n1")


# --- guard mutants (docs/testing.md, "The guard operators") -------------------------------


def test_a_claim_marked_for_all_nodes_that_names_a_node_is_placed_there() -> None:
    """spec.nodeName decides the phase: a mark left on a placed claim (the repair drops it,
    `scheduler.claims.consistent`) must not unbind the node that holds the address."""
    obj = marked_for_all_nodes()
    put_node(obj, "n1")
    obj["status"] = {"phase": "Bound", "boundNode": "n1"}
    scheduled_status("on n1", now=NOW)(obj)
    assert (obj["status"]["phase"], obj["status"]["boundNode"]) == ("Bound", "n1")
    assert condition(obj, "Scheduled")["reason"] == "Placed"


@pytest.mark.parametrize("phase", ["Pending", "Scheduled"])
def test_only_bound_or_failed_on_the_node_is_kept_not_a_stray_bound_node(phase: str) -> None:
    """A status naming the node as bound without the phase (a hand edit) is not a binding:
    the claim becomes Scheduled there and the controller binds it."""
    obj = claim("n1", phase=phase, boundNode="n1")
    scheduled_status("on n1", now=NOW)(obj)
    assert obj["status"]["phase"] == "Scheduled"
    assert "boundNode" not in obj["status"]


def test_placed_status_resets_a_node_ip_bound_on_another_node() -> None:
    """A node IP reused on n2 is not Bound there because n1 had bound it."""
    obj = claim("n2", phase="Bound", boundNode="n1")
    placed_status()(obj)
    assert obj["status"]["phase"] == "Scheduled"
    assert (obj["status"].get("boundNode"), obj["status"]["previousNode"]) == (None, "n1")


def test_placed_status_never_keeps_an_unplaced_node_ip_bound() -> None:
    """Bound on no node (an empty boundNode) is no binding: an orphan is Pending."""
    obj = claim("", phase="Bound", boundNode="")
    placed_status()(obj)
    assert obj["status"]["phase"] == "Pending"
    assert recent(condition(obj, "Scheduled"))["reason"] == "Orphan"


def test_bound_here_needs_the_phase_bound_and_holds_without_any_condition() -> None:
    """A Failed claim whose boundNode is this node is not bound here: mark_bound must still
    write Bound; a Bound claim that never had a Conflict condition is."""
    assert not is_bound_here(IpClaim.from_dict(claim("n1", phase="Failed", boundNode="n1")), "n1")
    assert is_bound_here(IpClaim.from_dict(claim("n1", phase="Bound", boundNode="n1")), "n1")


def with_conflict(status: str, reason: str, message: str) -> IpClaim:
    obj = claim("n1")
    obj["status"] = {
        "conditions": [
            {
                "type": "Conflict",
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": WHEN,
            }
        ]
    }
    return IpClaim.from_dict(obj)


def test_has_conflict_needs_a_true_conflict_with_the_same_reason_and_message() -> None:
    """mark_conflict is skipped only when exactly what it writes is there: no condition, a
    resolved one, or another reason all need the write."""
    assert not has_conflict(IpClaim.from_dict(claim("n1")), "AddressInUse", "x answers")
    assert not has_conflict(
        with_conflict("False", "AddressInUse", "x answers"), "AddressInUse", "x answers"
    )
    assert not has_conflict(
        with_conflict("True", "AdminAddress", "x answers"), "AddressInUse", "x answers"
    )
    assert not has_conflict(
        with_conflict("True", "AddressInUse", "y answers"), "AddressInUse", "x answers"
    )
    assert has_conflict(
        with_conflict("True", "AddressInUse", "x answers"), "AddressInUse", "x answers"
    )
