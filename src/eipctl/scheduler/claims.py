"""IpClaim dicts as the scheduler reads and writes them: placement views and mutations.

The mutations are handed to the serialized writer, which applies them to the freshest copy
of the claim (again after every 409), so each one decides from what it is given, not from
what the scheduler believed when it queued the write:

- `place` is a compare-and-set on ``spec.nodeName``: it writes only if the claim is still
  where the decision found it. A stale cache, a restarted scheduler or a deposed leader can
  therefore never move a claim twice on the strength of one observation.
- `scheduled_status` derives the phase from the claim's *current* ``spec.nodeName``: it keeps
  Bound while ``boundNode`` is that node (the new node's controller may already have bound
  it) and otherwise resets to Scheduled and clears ``boundNode``. On a claim marked for all
  nodes it only turns Pending into Scheduled.

Policy ``all``: the IP's own claim is marked (``spec.nodeName`` empty, no ``eipctl.io/node``
label, label ``eipctl.io/placement: all``, ``status.phase`` Scheduled, condition
``Scheduled`` True with reason ``AllNodes``), and for every IpNode the claim's pool admits the
scheduler keeps a *per-node claim* (``core.naming.node_claim_name_for``: ``<claim>.<node>``,
``spec.nodeBound: true``, ``spec.nodeName`` and label = that node, label
``eipctl.io/origin: all-nodes``, owner reference to the IP's claim). Controllers hold their
per-node claims like any claim placed on them, without probing (the IP is shared on purpose).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from eipctl.core.conditions import Condition, set_condition
from eipctl.core.fields import Mutation, Obj, ResourceError, labels_of, name_of
from eipctl.core.naming import (
    API_VERSION,
    LABEL_NODE,
    LABEL_ORIGIN,
    LABEL_PLACEMENT,
    LABEL_POOL,
    ORIGIN_ALL_NODES,
    ORIGIN_MANUAL,
    PLACEMENT_ALL,
    node_claim_name_for,
    parse_node_claim_name,
)
from eipctl.core.placement import ClaimPlacement

CONDITION_SCHEDULED: Final = "Scheduled"
REASON_PLACED: Final = "Placed"
REASON_ALL_NODES: Final = "AllNodes"
REASON_NO_LIVE_NODE: Final = "NoLiveNode"


def _meta(obj: Obj) -> dict[str, Any]:
    meta: dict[str, Any] = obj.setdefault("metadata", {})
    return meta


def node_of(obj: Obj) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


def is_all_nodes(obj: Obj) -> bool:
    return labels_of(obj).get(LABEL_PLACEMENT) == PLACEMENT_ALL


def is_per_node(obj: Obj) -> bool:
    """True for a per-node claim (policy ``all``): never placed or moved, only kept or removed."""
    if (obj.get("spec") or {}).get("nodeBound"):
        return True
    try:
        parse_node_claim_name(name_of(obj))
    except ValueError:
        return False
    return True


def per_node_claim(base: Obj, node: str) -> Obj | None:
    """The per-node claim of ``base`` for ``node``; None if no valid name exists for it."""
    spec = base.get("spec") or {}
    try:
        name = node_claim_name_for(str(spec.get("ip") or ""), node)
    except ValueError:
        return None
    labels = {LABEL_NODE: node, LABEL_ORIGIN: ORIGIN_ALL_NODES}
    pool = labels_of(base).get(LABEL_POOL)
    if pool:
        labels[LABEL_POOL] = pool
    new_spec: dict[str, Any] = {"ip": spec.get("ip"), "nodeName": node, "nodeBound": True}
    for key in ("prefixLength", "link"):
        if spec.get(key):
            new_spec[key] = spec[key]
    meta: dict[str, Any] = {"name": name, "labels": labels}
    uid = (base.get("metadata") or {}).get("uid")
    if uid:
        meta["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": "IpClaim", "name": name_of(base), "uid": uid}
        ]
    return {"apiVersion": API_VERSION, "kind": "IpClaim", "metadata": meta, "spec": new_spec}


def placement_of(obj: Obj) -> ClaimPlacement:
    """The claim as `core.placement` sees it."""
    return ClaimPlacement(
        name=name_of(obj),
        pool=labels_of(obj).get(LABEL_POOL) or None,
        node=node_of(obj),
        all_nodes=is_all_nodes(obj),
    )


def consistent(obj: Obj) -> bool:
    """True if the node label, the all-nodes mark and the phase agree with spec.nodeName."""
    labels = labels_of(obj)
    node = node_of(obj)
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    if labels.get(LABEL_NODE, "") != node:
        return False
    if is_all_nodes(obj):
        return not node and phase != "Pending"
    if not node:
        return True
    bound = (obj.get("status") or {}).get("boundNode") or ""
    return phase != "Pending" and not (phase == "Bound" and bound != node)


def place(expected_from: str, to_node: str, *, all_nodes: bool = False) -> Mutation:
    """Set spec.nodeName and the node label together, if the claim is still on ``expected_from``.

    ``to_node == expected_from`` repairs the labels without moving the claim.
    """

    def mutate(obj: Obj) -> None:
        if node_of(obj) != expected_from:
            return  # moved by someone else since we decided: leave it
        spec = obj.setdefault("spec", {})
        labels = _meta(obj).setdefault("labels", {})
        if to_node:
            spec["nodeName"] = to_node
            labels[LABEL_NODE] = to_node
        else:
            spec.pop("nodeName", None)
            labels.pop(LABEL_NODE, None)
        if all_nodes:
            labels[LABEL_PLACEMENT] = PLACEMENT_ALL
        else:
            labels.pop(LABEL_PLACEMENT, None)

    return mutate


def scheduled_status(message: str, *, now: datetime | None = None) -> Mutation:
    """Phase, boundNode and the Scheduled condition as spec.nodeName now says (see above)."""

    def mutate(obj: Obj) -> None:
        node = node_of(obj)
        status = obj.setdefault("status", {})
        phase = status.get("phase") or "Pending"
        bound = status.get("boundNode") or ""
        if is_all_nodes(obj) and not node:
            if phase == "Pending":  # what controllers report on it is theirs to say
                status["phase"] = "Scheduled"
            _condition(status, "True", REASON_ALL_NODES, message, now)
        elif node:
            if not (phase in ("Bound", "Failed") and bound == node):
                status["phase"] = "Scheduled"
                status.pop("boundNode", None)
            _condition(status, "True", REASON_PLACED, message, now)
        else:
            status["phase"] = "Pending"
            status.pop("boundNode", None)
            _condition(status, "False", REASON_NO_LIVE_NODE, message, now)

    return mutate


def no_live_node_status(message: str, *, now: datetime | None = None) -> Mutation:
    """Report that the claim cannot be (re)placed; phase and node are left alone."""

    def mutate(obj: Obj) -> None:
        status = obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
        _condition(status, "False", REASON_NO_LIVE_NODE, message, now)

    return mutate


def _condition(
    status: dict[str, Any], value: str, reason: str, message: str, now: datetime | None
) -> None:
    current: list[Condition] = []
    for raw in status.get("conditions") or []:
        try:
            current.append(Condition.from_dict(raw))
        except (ResourceError, AttributeError):
            continue  # a malformed condition the schema would have refused anyway
    new = Condition(
        type=CONDITION_SCHEDULED,
        status="True" if value == "True" else "False",
        last_transition_time=now or datetime.now(UTC),
        reason=reason,
        message=message,
    )
    updated = set_condition(current, new)
    if updated != tuple(current):
        status["conditions"] = [c.to_dict() for c in updated]


def new_claim(
    name: str,
    ip: str,
    *,
    pool: str | None,
    prefix_length: int,
    services: list[str],
) -> Obj:
    """A claim the scheduler creates for a hand-set external IP (unplaced)."""
    labels = {LABEL_ORIGIN: ORIGIN_MANUAL}
    if pool:
        labels[LABEL_POOL] = pool
    return {
        "apiVersion": API_VERSION,
        "kind": "IpClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {"ip": ip, "prefixLength": prefix_length, "services": sorted(services)},
    }


def set_services(services: list[str]) -> Mutation:
    """spec.services of a scheduler-made claim = the Services that hand-set its IP."""

    def mutate(obj: Obj) -> None:
        obj.setdefault("spec", {})["services"] = sorted(services)

    return mutate


def involved(obj: Obj) -> Obj:
    """An object reference for Events (list items from the API carry no kind)."""
    return {"apiVersion": API_VERSION, "kind": "IpClaim", "metadata": obj.get("metadata") or {}}
