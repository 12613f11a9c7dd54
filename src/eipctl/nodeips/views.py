"""Objects <-> the views of `core.node_claims`, and the edits nodeips makes to objects.

The edits are mutation functions for the serialized writer: each decides from the fresh
copy it is given (compare-and-set), never from what the cache showed when it was queued.
A node claim is spelled by `core.claims.node_ip_claim`; its status is written by
`core.claim_status.placed_status` and `cloud_status`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import structlog

from eipctl.core.claims import (
    IP,
    NODE_BOUND,
    bound_node_of,
    is_node_ip_claim,
    node_of,
    phase_of,
    pool_of,
    put_node,
    spec_of,
)
from eipctl.core.fields import Mutation, Obj, ResourceError, labels_of, meta_of, name_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATION_ID,
    ANNOTATION_SLOT,
    LABEL_EXTERNAL_IP,
    LABEL_PROVIDER,
    TAINT_NOT_ATTACHED,
    parse_ip,
)
from eipctl.core.node_claims import NodeClaim, NodeEdit, NodeView, PodView
from eipctl.core.resources import IpClaimPool

log = structlog.get_logger(__name__)


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
    if not is_node_ip_claim(obj):
        return None
    try:
        ip = parse_ip(str(spec_of(obj).get(IP) or ""))
    except ValueError:
        return None
    return NodeClaim(
        name=name_of(obj),
        ip=ip,
        pool=pool_of(obj),
        node=node_of(obj),
        phase=phase_of(obj),
        bound_node=bound_node_of(obj),
        provider=str(labels_of(obj).get(LABEL_PROVIDER) or ""),
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


class Cache(Protocol):
    def get(self, key: str) -> Obj | None: ...
    def objects(self) -> list[Obj]: ...


class Caches:
    """The informer caches nodeips reads, as the views of `core.node_claims`."""

    def __init__(self, *, nodes: Cache, claims: Cache, pools: Cache, pods: Cache) -> None:
        self.nodes = nodes
        self.claims = claims
        self.pools = pools
        self.pods_cache = pods

    def node_claims(self) -> list[NodeClaim]:
        return [c for c in (node_claim(o) for o in self.claims.objects()) if c is not None]

    def node_views(self) -> dict[str, NodeView]:
        return {view.name: view for view in (node_view(o) for o in self.nodes.objects())}

    def pods(self) -> list[PodView]:
        return [p for p in (pod_view(o) for o in self.pods_cache.objects()) if p is not None]

    def pool(self, name: str) -> IpClaimPool | None:
        """The pool, or None if it does not exist or does not parse (logged)."""
        obj = self.pools.get(name)
        if obj is None:
            return None
        try:
            return IpClaimPool.from_dict(obj)
        except ResourceError as exc:
            log.warning("pool.invalid", pool=name, error=str(exc))
            return None


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


class NotOurs(Exception):  # noqa: N818 (an outcome)
    """The fresh claim is not a node claim, or not where the decision found it."""


def bind(expected_from: str, to_node: str) -> Mutation:
    """Move a node claim from ``expected_from`` ("" = orphan) to ``to_node`` ("" = orphan it).

    Raises NotOurs when the fresh copy is not a node claim or sits elsewhere.
    """

    def mutate(obj: Obj) -> None:
        if not is_node_ip_claim(obj):
            raise NotOurs(f"claim {name_of(obj)} is not a node claim")
        current = node_of(obj)
        if current == to_node:
            return
        if current != expected_from:
            raise NotOurs(f"claim {name_of(obj)} is on {current!r}, not {expected_from!r}")
        put_node(obj, to_node, labelled=not labels_of(obj).get(LABEL_PROVIDER))
        obj["spec"][NODE_BOUND] = True

    return mutate
