"""How the scheduler words what it did to a claim: the Event reason and type, the message of
the condition Scheduled, and the reason of a claim that waits. Pure: a decision in, text out.
"""

from __future__ import annotations

from eipctl.core.claim_status import REASON_NO_LIVE_NODE, REASON_NO_LOCAL_ENDPOINT
from eipctl.core.eligibility import Exclusion, reason_text
from eipctl.core.local_endpoints import no_endpoint_text
from eipctl.core.placement import Decision, Reason
from eipctl.kube.events import EventType

EVENTS: dict[Reason, tuple[EventType, str]] = {
    Reason.UNPLACED: ("Normal", "Placed"),
    Reason.NODE_DEAD: ("Warning", "NodeDead"),
    Reason.NODE_GONE: ("Warning", "NodeGone"),
    Reason.NODE_INELIGIBLE: ("Normal", "NodeIneligible"),
    Reason.REBALANCE: ("Normal", "Rebalanced"),
    Reason.ALL_NODES: ("Normal", "AllNodes"),
    Reason.NODE_EXCLUDED: ("Normal", "NodeExcluded"),
    Reason.NODE_TAINTED: ("Normal", "NodeTainted"),
    Reason.NODE_CORDONED: ("Normal", "NodeCordoned"),
    Reason.NO_LOCAL_ENDPOINT: ("Normal", "NoLocalEndpoint"),
}
EVENT_UNPLACED: tuple[EventType, str] = ("Warning", REASON_NO_LOCAL_ENDPOINT)
"""Taken off its node, to no other: a Local Service with no ready endpoint on a live node."""


def unplaceable_reason(d: Decision) -> str:
    """The condition and Event reason of a claim that waits for a node."""
    return REASON_NO_LOCAL_ENDPOINT if d.reason is Reason.NO_LOCAL_ENDPOINT else REASON_NO_LIVE_NODE


def claim_event(d: Decision) -> tuple[EventType, str]:
    """(type, reason) of the Event on the claim for a written decision."""
    return EVENT_UNPLACED if d.unplace else EVENTS[d.reason]


def placed_message(d: Decision, liveness_timeout: float, *, left_all: bool = False) -> str:
    """The condition Scheduled's message for a written decision."""
    if d.all_nodes:
        return "policy all: held by every node its pool admits"
    if d.reason is Reason.UNPLACED:
        return f"placed on {d.to_node}" + (" (no longer policy all)" if left_all else "")
    if d.unplace:
        left = no_endpoint_text(d.from_node)
        return f"taken off {d.from_node}: {left}, and none on any live node"
    why = {
        Reason.NODE_DEAD: (
            f"node {d.from_node} is dead (no liveness reply for {liveness_timeout:g}s)"
        ),
        Reason.NODE_GONE: f"IpNode {d.from_node} is gone",
        Reason.NODE_INELIGIBLE: f"pool no longer admits node {d.from_node}",
        Reason.REBALANCE: "rebalancing after nodes joined",
        Reason.NO_LOCAL_ENDPOINT: no_endpoint_text(d.from_node),
    }.get(d.reason)
    if why is None:
        why = (
            reason_text(d.from_node, Exclusion(d.reason.value))
            if d.reason.planned
            else d.reason.value
        )
    return f"moved from {d.from_node} to {d.to_node}: {why}"


def no_live_node_message(d: Decision) -> str:
    """The condition Scheduled's message for a claim that needs a node and has none."""
    if d.reason is Reason.NO_LOCAL_ENDPOINT:
        where = (
            f"still served by terminating endpoints on {d.from_node}" if d.from_node else "unplaced"
        )
        return f"no ready endpoint of its Local Service on any live node ({where})"
    if d.from_node:
        return f"no live eligible node to take it over from {d.from_node} ({d.reason.value})"
    return "no live eligible node"
