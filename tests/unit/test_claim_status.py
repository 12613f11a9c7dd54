"""core/claim_status.py: each process's status mutation decides from the fresh copy."""

from __future__ import annotations

import copy
import ipaddress
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
from eipctl.core.claims import manual_claim, node_ip_claim, put_node
from eipctl.core.fields import Mutation, Obj
from eipctl.core.resources import IpClaim

NOW = datetime(2026, 1, 1, tzinfo=UTC)
EIP = ipaddress.ip_address("198.51.100.9")
NODE = "node-a"
BROKEN = {"type": "Scheduled", "status": "Maybe", "lastTransitionTime": "2026-01-01T00:00:00Z"}


def scheduler_claim(node: str = "", phase: str = "", bound: str = "") -> dict[str, Any]:
    obj = manual_claim(
        ipaddress.ip_address("198.51.100.7"), pool="p", prefix_length=32, services=[]
    )
    if node:
        put_node(obj, node)
    if phase:
        obj["status"] = {"phase": phase, **({"boundNode": bound} if bound else {})}
    return obj


def controller_claim(ip: str, node: str = NODE) -> Obj:
    return {
        "metadata": {"name": ip.replace(".", "-")},
        "spec": {"ip": ip, "nodeName": node},
    }


def applied(obj: dict[str, Any], mutation: Mutation) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    return mutation(out) or out


# --- the scheduler ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "phase", "bound", "want_phase", "want_bound", "want_previous"),
    [
        ("n2", "Bound", "n1", "Scheduled", None, "n1"),  # moved: boundNode -> previousNode
        ("n2", "Bound", "n2", "Bound", "n2", None),  # the new node already bound it: keep
        ("n2", "", "", "Scheduled", None, None),
        ("n2", "Failed", "n1", "Scheduled", None, "n1"),
        ("", "Bound", "n1", "Pending", None, "n1"),
    ],
)
def test_scheduled_status_follows_the_fresh_node(
    node: str,
    phase: str,
    bound: str,
    want_phase: str,
    want_bound: str | None,
    want_previous: str | None,
) -> None:
    out = applied(scheduler_claim(node, phase or "Pending", bound), scheduled_status("m", now=NOW))
    assert out["status"]["phase"] == want_phase
    assert out["status"].get("boundNode") == want_bound
    assert out["status"].get("previousNode") == want_previous
    (cond,) = out["status"]["conditions"]
    assert cond["type"] == "Scheduled"
    assert cond["status"] == ("True" if node else "False")


def test_previous_node_lasts_until_bound_again() -> None:
    """Moved off n1, then bound on n2: the take-over rule needs n1 only in between."""
    moved = applied(scheduler_claim("n2", "Bound", "n1"), scheduled_status("m", now=NOW))
    assert moved["status"]["previousNode"] == "n1"
    again = applied(moved, scheduled_status("m", now=NOW))  # a repeat keeps it
    assert again["status"]["previousNode"] == "n1"
    bound = applied(again, mark_bound("n2"))
    assert (bound["status"]["boundNode"], bound["status"].get("previousNode")) == ("n2", None)
    assert IpClaim.from_dict(moved).status.previous_node == "n1"
    assert IpClaim.from_dict(moved).to_dict()["status"]["previousNode"] == "n1"


def test_condition_keeps_transition_time_when_status_holds() -> None:
    first = applied(scheduler_claim("n1", "Pending"), scheduled_status("on n1", now=NOW))
    later = datetime(2026, 1, 2, tzinfo=UTC)
    second = applied(first, scheduled_status("moved to n1", now=later))
    assert second["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert second["status"]["conditions"][0]["message"] == "moved to n1"
    third = applied(second, scheduled_status("moved to n1", now=later))
    assert third == second  # nothing to write


def test_a_claim_marked_for_all_nodes_is_scheduled_and_bound_nowhere() -> None:
    marked = scheduler_claim(phase="Pending")
    marked["metadata"]["labels"]["eipctl.io/placement"] = "all"
    out = applied(marked, scheduled_status("all", now=NOW))
    assert out["status"]["phase"] == "Scheduled"
    assert out["status"]["conditions"][0]["reason"] == "AllNodes"
    # Bound on n1 before its pool switched to all: no node holds the claim itself now (its
    # per-node copies do); n1 is kept as the previous holder
    out["status"].update(phase="Bound", boundNode="n1")
    again = applied(out, scheduled_status("all", now=NOW))["status"]
    assert (again["phase"], again.get("boundNode"), again["previousNode"]) == (
        "Scheduled",
        None,
        "n1",
    )


def test_no_live_node_leaves_phase_and_node_alone() -> None:
    out = applied(scheduler_claim("n1", "Bound", "n1"), no_live_node_status("gone", now=NOW))
    assert (out["status"]["phase"], out["status"]["boundNode"]) == ("Bound", "n1")
    (cond,) = out["status"]["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "NoLiveNode")
    assert applied(scheduler_claim(), no_live_node_status("x", now=NOW))["status"]["phase"] == (
        "Pending"
    )


# --- nodeips ------------------------------------------------------------------------------


def test_placed_status_keeps_bound_on_the_same_node() -> None:
    obj = node_ip_claim(ipaddress.ip_address("192.0.2.1"), node="n1", pool="p", prefix_length=32)
    placed_status()(obj)
    assert obj["status"]["phase"] == "Scheduled"
    obj["status"].update(phase="Bound", boundNode="n1")
    placed_status()(obj)
    assert obj["status"]["phase"] == "Bound"
    put_node(obj, "")
    placed_status()(obj)
    assert obj["status"]["phase"] == "Pending" and "boundNode" not in obj["status"]
    IpClaim.from_dict(obj)  # still valid


def test_cloud_status_only_for_the_node_it_is_on() -> None:
    obj = node_ip_claim(EIP, node="n1", pool="eips", prefix_length=None, provider="aws")
    cloud_status("n2")(obj)
    assert "status" not in obj
    cloud_status("n1", "NoPublicInterface", "no gateway")(obj)
    assert obj["status"]["conditions"][0]["reason"] == "NoPublicInterface"
    assert "phase" not in obj["status"]
    cloud_status("n1")(obj)
    assert obj["status"]["phase"] == "Bound" and obj["status"]["boundNode"] == "n1"
    assert obj["status"]["conditions"][0]["status"] == "True"


# --- the controller -----------------------------------------------------------------------


def test_mark_bound_sets_phase_and_clears_an_existing_conflict() -> None:
    obj = controller_claim("203.0.113.7")
    mark_conflict(NODE, "AddressInUse", "02:00:00:00:00:01 answers")(obj)
    assert obj["status"]["conditions"][0]["status"] == "True"
    assert has_conflict(IpClaim.from_dict(obj), "AddressInUse", "02:00:00:00:00:01 answers")
    assert not has_conflict(IpClaim.from_dict(obj), "AddressInUse", "another message")
    mark_bound(NODE)(obj)
    assert obj["status"]["phase"] == "Bound" and obj["status"]["boundNode"] == NODE
    (cond,) = obj["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Conflict", "False", "Resolved")
    assert is_bound_here(IpClaim.from_dict(obj), NODE)
    assert not is_bound_here(IpClaim.from_dict(obj), "node-b")


def test_mark_bound_adds_no_condition_when_there_was_none() -> None:
    obj = controller_claim("203.0.113.7")
    mark_bound(NODE)(obj)
    assert "conditions" not in obj["status"]


def test_mutations_do_nothing_once_the_claim_moved() -> None:
    obj = controller_claim("203.0.113.7", node="node-b")
    before = copy.deepcopy(obj)
    mark_bound(NODE)(obj)
    mark_conflict(NODE, "AddressInUse", "x")(obj)
    assert obj == before


# --- a malformed conditions list: one rule for every writer -------------------------------


@pytest.mark.parametrize(
    "mutation",
    [
        mark_bound(NODE),
        mark_conflict(NODE, "AddressInUse", "x"),
        scheduled_status("m", now=NOW),
        placed_status(),
        cloud_status(NODE),
    ],
    ids=["mark_bound", "mark_conflict", "scheduled", "placed", "cloud"],
)
def test_every_writer_writes_past_an_unreadable_entry_and_keeps_the_readable_ones(
    mutation: Mutation,
) -> None:
    """A hand edit the schema missed never blocks a write (the controller used to raise, so
    Bound was never written) nor erases the conditions other processes own."""
    obj = controller_claim("203.0.113.7")
    obj["metadata"]["labels"] = {"eipctl.io/origin": "node"}
    in_pool = {"type": "InPool", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    conflict = {"type": "Conflict", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    obj["status"] = {"phase": "Scheduled", "conditions": [BROKEN, in_pool, conflict]}
    mutation(obj)
    types = [c["type"] for c in obj["status"]["conditions"]]
    assert "InPool" in types and "Conflict" in types
    assert all(c["status"] in ("True", "False", "Unknown") for c in obj["status"]["conditions"])
    IpClaim.from_dict(obj)  # what is written parses
