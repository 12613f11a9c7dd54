"""Objects <-> the views of `core.node_claims`, and the edits nodeips makes to objects.

The edits are mutation functions for the serialized writer: each decides from the fresh
copy it is given (compare-and-set), never from what the cache showed when it was queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from eipctl.core.conditions import Condition, put_condition
from eipctl.core.fields import Mutation, Obj, labels_of, meta_of, name_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATION_ID,
    ANNOTATION_SLOT,
    API_VERSION,
    LABEL_EXTERNAL_IP,
    LABEL_NODE,
    LABEL_ORIGIN,
    LABEL_POOL,
    LABEL_PROVIDER,
    ORIGIN_NODE,
    TAINT_NOT_ATTACHED,
    IPAddress,
    claim_name_for,
    parse_ip,
)
from eipctl.core.node_claims import NodeClaim, NodeEdit, NodeView, PodView

CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_CLOUD: Final = "CloudAddress"
"""On a cloud node claim: True once associated; False with the provider's reason."""


def is_node_claim(obj: Mapping[str, Any]) -> bool:
    return labels_of(obj).get(LABEL_ORIGIN) == ORIGIN_NODE


def node_view(obj: Mapping[str, Any]) -> NodeView:
    meta = meta_of(obj)
    spec = obj.get("spec") or {}
    taints = spec.get("taints") or ()
    return NodeView(
        name=str(meta.get("name") or ""),
        labels=dict(meta.get("labels") or {}),
        unschedulable=bool(spec.get("unschedulable")),
        slot=str((meta.get("annotations") or {}).get(ANNOTATION_SLOT) or ""),
        tainted=any(t.get("key") == TAINT_NOT_ATTACHED for t in taints if isinstance(t, dict)),
        provider_id=str(spec.get("providerID") or ""),
    )


def node_claim(obj: Mapping[str, Any]) -> NodeClaim | None:
    """None for an object that is not a usable node claim."""
    if not is_node_claim(obj):
        return None
    meta = meta_of(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        ip = parse_ip(str(spec.get("ip") or ""))
    except ValueError:
        return None
    labels = meta.get("labels") or {}
    return NodeClaim(
        name=str(meta.get("name") or ""),
        ip=ip,
        pool=str(labels.get(LABEL_POOL) or ""),
        node=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        bound_node=str(status.get("boundNode") or ""),
        provider=str(labels.get(LABEL_PROVIDER) or ""),
    )


def allocation_id(obj: Mapping[str, Any]) -> str:
    return str((meta_of(obj).get("annotations") or {}).get(ANNOTATION_ALLOCATION_ID) or "")


def pod_view(obj: Mapping[str, Any]) -> PodView | None:
    ip = str(labels_of(obj).get(LABEL_EXTERNAL_IP) or "")
    if not ip:
        return None
    phase = str((obj.get("status") or {}).get("phase") or "")
    return PodView(
        ip=ip,
        node=str((obj.get("spec") or {}).get("nodeName") or ""),
        finished=phase in ("Succeeded", "Failed"),
    )


def involved(kind: str, obj: Mapping[str, Any]) -> Obj:
    api_version = "v1" if kind == "Node" else API_VERSION
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(meta_of(obj))}


# --- Node edits ----------------------------------------------------------------------------


def set_slot(expected: str, new: str) -> Mutation:
    """Slot compare-and-set: write ``new`` ("" clears) only while the slot holds ``expected``."""

    def mutate(obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        if annotations.get(ANNOTATION_SLOT, "") != expected:
            return
        if new:
            annotations[ANNOTATION_SLOT] = new
        else:
            annotations.pop(ANNOTATION_SLOT, None)
        meta["annotations"] = annotations

    return mutate


def slot_of(obj: Mapping[str, Any]) -> str:
    return str((meta_of(obj).get("annotations") or {}).get(ANNOTATION_SLOT) or "")


def apply_node_edit(edit: NodeEdit) -> Mutation:
    def mutate(obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        if edit.external_ip is not None:
            labels = dict(meta.get("labels") or {})
            if edit.external_ip:
                labels[LABEL_EXTERNAL_IP] = edit.external_ip
            else:
                labels.pop(LABEL_EXTERNAL_IP, None)
            meta["labels"] = labels
        if edit.remove_taint:
            spec = obj.setdefault("spec", {})
            taints = [t for t in spec.get("taints") or () if t.get("key") != TAINT_NOT_ATTACHED]
            if taints:
                spec["taints"] = taints
            else:
                spec.pop("taints", None)

    return mutate


# --- claims --------------------------------------------------------------------------------


def new_claim(
    ip: IPAddress,
    *,
    node: str,
    pool: str,
    prefix_length: int | None,
    provider: str = "",
    allocation: str = "",
) -> Obj:
    """A node claim for ``ip`` bound to ``node`` (named after the IP, like every claim).

    Bare-metal claims carry ``eipctl.io/node`` so the node's controller holds them; cloud
    claims do not: the cloud, not the node's link, holds those addresses.
    """
    labels = {LABEL_POOL: pool, LABEL_ORIGIN: ORIGIN_NODE}
    if provider:
        labels[LABEL_PROVIDER] = provider
    else:
        labels[LABEL_NODE] = node
    meta: Obj = {"name": claim_name_for(ip), "labels": labels}
    if allocation:
        meta["annotations"] = {ANNOTATION_ALLOCATION_ID: allocation}
    spec: Obj = {
        "ip": str(ip),
        "prefixLength": prefix_length or ip.max_prefixlen,
        "nodeName": node,
        "nodeBound": True,
    }
    return {"apiVersion": API_VERSION, "kind": "IpClaim", "metadata": meta, "spec": spec}


class NotOurs(Exception):  # noqa: N818 (an outcome)
    """The fresh claim is not a node claim, or not where the decision found it."""


def bind(expected_from: str, to_node: str) -> Mutation:
    """Move a node claim from ``expected_from`` ("" = orphan) to ``to_node`` ("" = orphan it).

    Raises NotOurs when the fresh copy is not a node claim or sits elsewhere.
    """

    def mutate(obj: Obj) -> None:
        if not is_node_claim(obj):
            raise NotOurs(f"claim {name_of(obj)} is not a node claim")
        spec = obj.setdefault("spec", {})
        current = str(spec.get("nodeName") or "")
        if current == to_node:
            return
        if current != expected_from:
            raise NotOurs(f"claim {name_of(obj)} is on {current!r}, not {expected_from!r}")
        meta = obj.setdefault("metadata", {})
        labels = dict(meta.get("labels") or {})
        cloud = bool(labels.get(LABEL_PROVIDER))
        if to_node:
            spec["nodeName"] = to_node
            if not cloud:
                labels[LABEL_NODE] = to_node
        else:
            spec.pop("nodeName", None)
            labels.pop(LABEL_NODE, None)
        spec["nodeBound"] = True
        meta["labels"] = labels

    return mutate


def _now() -> datetime:
    return datetime.now(UTC)


def placed_status() -> Mutation:
    """Phase from spec.nodeName: Scheduled on a node (Bound kept if bound there), else Pending."""

    def mutate(obj: Obj) -> None:
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        status = obj.setdefault("status", {})
        bound = status.get("boundNode") or ""
        if node and status.get("phase") == "Bound" and bound == node:
            return
        status["phase"] = "Scheduled" if node else "Pending"
        status.pop("boundNode", None)
        reason, text = (
            ("NodeBound", f"the IP of node {node}") if node else ("Orphan", "kept for reuse")
        )
        put_condition(
            status,
            Condition(
                type=CONDITION_SCHEDULED,
                status="True" if node else "False",
                reason=reason,
                message=text,
                last_transition_time=_now(),
            ),
        )

    return mutate


def cloud_status(node: str, reason: str = "", message: str = "") -> Mutation:
    """Cloud claim: Bound on ``node`` once associated (reason ""), else the provider's reason."""

    def mutate(obj: Obj) -> None:
        if str((obj.get("spec") or {}).get("nodeName") or "") != node:
            return
        status = obj.setdefault("status", {})
        if not reason:
            status["phase"] = "Bound"
            status["boundNode"] = node
        put_condition(
            status,
            Condition(
                type=CONDITION_CLOUD,
                status="False" if reason else "True",
                reason=reason or "Associated",
                message=message or f"associated with node {node}",
                last_transition_time=_now(),
            ),
        )

    return mutate
