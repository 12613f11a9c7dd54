"""IpClaim status as each process writes it: ``phase``, ``boundNode`` and one condition each.

Every function returns a `Mutation` for the serialized writer, which applies it to the
freshest copy of the claim (again after every 409), so each decides from the copy it is
given, never from what its process believed when it queued the write:

- the scheduler (`scheduled_status`, `no_live_node_status`) derives the phase from the
  claim's *current* ``spec.nodeName``: it keeps Bound (or Failed) while ``boundNode`` is that
  node (the new node's controller may already have bound it) and otherwise resets to
  Scheduled and clears ``boundNode``. On a claim marked for all nodes it only turns Pending
  into Scheduled: what controllers report on it is theirs to say. Condition ``Scheduled``.
- nodeips (`placed_status`, `cloud_status`): the same phase rule for a node IP, and Bound
  once the cloud associated the address. Conditions ``Scheduled`` and ``CloudAddress``.
- the controller (`mark_bound`, `mark_conflict`): Bound on its node once the address is on
  the link; condition ``Conflict`` while a probe or an admin address stops the add. Both do
  nothing once the claim moved away. `is_bound_here` and `has_conflict` tell it when the
  cached claim already says so (no write).

Conditions go through `core.conditions.put_condition`, the one writer (and the one rule for
a malformed list).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from eipctl.core.claims import BOUND_NODE, PHASE, PREVIOUS_NODE, is_all_nodes, node_of
from eipctl.core.conditions import Condition, ConditionStatus, find_condition, put_condition
from eipctl.core.fields import Mutation, Obj
from eipctl.core.resources import IpClaim

CONDITION_SCHEDULED: Final = "Scheduled"
"""Written by the scheduler (and nodeips for node IPs): where the claim is placed, or why not."""
CONDITION_CONFLICT: Final = "Conflict"
"""Written by the controller: True while another holder or an admin address stops the add."""
CONDITION_CLOUD: Final = "CloudAddress"
"""On a cloud node claim: True once associated; False with the provider's reason."""

REASON_PLACED: Final = "Placed"
REASON_ALL_NODES: Final = "AllNodes"
REASON_NO_LIVE_NODE: Final = "NoLiveNode"
REASON_NO_LOCAL_ENDPOINT: Final = "NoLocalEndpoint"
"""Unplaced: its Local Service has no ready endpoint on a live node (`core.local_endpoints`)."""


def _now() -> datetime:
    return datetime.now(UTC)


def _status(obj: Obj) -> dict[str, Any]:
    status: dict[str, Any] = obj.setdefault("status", {})
    return status


def _bound(status: dict[str, Any], node: str) -> None:
    status[PHASE] = "Bound"
    status[BOUND_NODE] = node
    status.pop(PREVIOUS_NODE, None)


def _unbound(status: dict[str, Any], phase: str) -> None:
    """A phase short of Bound: ``boundNode`` goes with the old one, and is kept as
    ``previousNode`` for the next holder's take-over rule (`controller.takeover`)."""
    status[PHASE] = phase
    was = status.pop(BOUND_NODE, None)
    if was:
        status[PREVIOUS_NODE] = was


def _condition(
    type_: str, value: bool, reason: str, message: str, now: datetime | None = None
) -> Condition:
    status: ConditionStatus = "True" if value else "False"
    return Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now or _now(),
    )


# --- the scheduler ------------------------------------------------------------------------
def scheduled_status(
    message: str, *, now: datetime | None = None, unplaced_reason: str = REASON_NO_LIVE_NODE
) -> Mutation:
    """Phase, boundNode and the Scheduled condition as spec.nodeName now says (see above);
    ``unplaced_reason`` is the condition's reason when the claim is on no node."""

    def mutate(obj: Obj) -> None:
        node = node_of(obj)
        status = _status(obj)
        phase = status.get(PHASE) or "Pending"
        if is_all_nodes(obj) and not node:
            # held through its per-node copies, never itself: a Bound left from the node it
            # was on before the pool switched to all would name a node for good
            _unbound(status, "Scheduled")
            scheduled = _condition(CONDITION_SCHEDULED, True, REASON_ALL_NODES, message, now)
        elif node:
            if not (phase in ("Bound", "Failed") and status.get(BOUND_NODE) == node):
                _unbound(status, "Scheduled")
            scheduled = _condition(CONDITION_SCHEDULED, True, REASON_PLACED, message, now)
        else:
            _unbound(status, "Pending")
            scheduled = _condition(CONDITION_SCHEDULED, False, unplaced_reason, message, now)
        put_condition(status, scheduled)

    return mutate


def no_live_node_status(
    message: str, *, now: datetime | None = None, reason: str = REASON_NO_LIVE_NODE
) -> Mutation:
    """Report that the claim cannot be (re)placed; phase and node are left alone."""

    def mutate(obj: Obj) -> None:
        status = _status(obj)
        status.setdefault(PHASE, "Pending")
        put_condition(status, _condition(CONDITION_SCHEDULED, False, reason, message, now))

    return mutate


# --- nodeips ------------------------------------------------------------------------------
def placed_status() -> Mutation:
    """Phase from spec.nodeName: Scheduled on a node (Bound kept if bound there), else Pending."""

    def mutate(obj: Obj) -> None:
        node = node_of(obj)
        status = _status(obj)
        if node and status.get(PHASE) == "Bound" and status.get(BOUND_NODE) == node:
            return
        _unbound(status, "Scheduled" if node else "Pending")
        if node:
            scheduled = _condition(CONDITION_SCHEDULED, True, "NodeBound", f"the IP of node {node}")
        else:
            scheduled = _condition(CONDITION_SCHEDULED, False, "Orphan", "kept for reuse")
        put_condition(status, scheduled)

    return mutate


def cloud_status(node: str, reason: str = "", message: str = "") -> Mutation:
    """Cloud claim: Bound on ``node`` once associated (reason ""), else the provider's reason."""

    def mutate(obj: Obj) -> None:
        if node_of(obj) != node:
            return
        status = _status(obj)
        if not reason:
            _bound(status, node)
        put_condition(
            status,
            _condition(
                CONDITION_CLOUD,
                not reason,
                reason or "Associated",
                message or f"associated with node {node}",
            ),
        )

    return mutate


# --- the controller -----------------------------------------------------------------------
def mark_bound(node: str) -> Mutation:
    """Bound on ``node``, Conflict cleared (if it was ever set); no-op if the claim moved away."""

    def mutate(obj: Obj) -> None:
        if node_of(obj) != node:
            return
        status = _status(obj)
        _bound(status, node)
        resolved = _condition(CONDITION_CONFLICT, False, "Resolved", "the address is on the link")
        put_condition(status, resolved, only_if_present=True)

    return mutate


def mark_conflict(node: str, reason: str, message: str) -> Mutation:
    """Conflict=True with ``reason``; no-op if the claim moved away."""

    def mutate(obj: Obj) -> None:
        if node_of(obj) != node:
            return
        put_condition(_status(obj), _condition(CONDITION_CONFLICT, True, reason, message))

    return mutate


def is_bound_here(claim: IpClaim, node: str) -> bool:
    """What `mark_bound` writes is already there."""
    conflict = find_condition(claim.status.conditions, CONDITION_CONFLICT)
    return (
        claim.status.phase == "Bound"
        and claim.status.bound_node == node
        and (conflict is None or not conflict.is_true)
    )


def has_conflict(claim: IpClaim, reason: str, message: str) -> bool:
    """What `mark_conflict` writes is already there."""
    conflict = find_condition(claim.status.conditions, CONDITION_CONFLICT)
    return (
        conflict is not None
        and conflict.is_true
        and conflict.reason == reason
        and conflict.message == message
    )
