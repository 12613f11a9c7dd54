"""The IpClaim vocabulary every process speaks: field names, constructors and predicates.

Claims are read and written as plain dicts (cache objects, writer mutations); this module is
the one place that spells them. Four kinds are made, each with its own origin label
(`core.naming`) and constructor here: the allocator's for annotated Services, the
scheduler's for hand-set external IPs and its per-node copies for placement policy ``all``,
and nodeips' for a Node's own IP. The status a claim goes through is written by
`core.claim_status`.

``spec.nodeBound`` means one thing on the wire (the claim belongs to ``spec.nodeName`` for
good) and is read for two reasons, one predicate each: `is_node_bound` (the scheduler never
places, moves or collects it) and `skips_probe` (the controller adds it without probing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from eipctl.core.fields import Obj, labels_of, meta_of, name_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATION_ID,
    ANNOTATION_CLAIM_SHARING_KEY,
    API_VERSION,
    LABEL_NODE,
    LABEL_ORIGIN,
    LABEL_PLACEMENT,
    LABEL_POOL,
    LABEL_PROVIDER,
    ORIGIN_ALL_NODES,
    ORIGIN_ALLOCATOR,
    ORIGIN_MANUAL,
    ORIGIN_NODE,
    PLACEMENT_ALL,
    IPAddress,
    claim_name_for,
    node_claim_name_for,
    parse_node_claim_name,
)

KIND: Final = "IpClaim"

# --- field names (the CRD, deploy/crds/ipclaims.yaml) ---------------------------------------
IP: Final = "ip"
PREFIX_LENGTH: Final = "prefixLength"
NODE_NAME: Final = "nodeName"
"""spec: the IpNode the claim is placed on; absent = unplaced."""
LINK: Final = "link"
SERVICES: Final = "services"
NODE_BOUND: Final = "nodeBound"
"""spec: the claim belongs to ``nodeName`` for good (see the module docstring)."""
PHASE: Final = "phase"
BOUND_NODE: Final = "boundNode"
"""status: the node that reported the IP on its link."""
PREVIOUS_NODE: Final = "previousNode"
"""status: the node it was bound on before the scheduler moved it (until bound again): the
new holder asks whether that node is declared dead, and skips its address probe if so."""
CONDITIONS: Final = "conditions"


# --- lenient reads of a cached claim ------------------------------------------------------
def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = obj.get("spec") or {}
    return spec


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status: Mapping[str, Any] = obj.get("status") or {}
    return status


def node_of(obj: Mapping[str, Any]) -> str:
    """``spec.nodeName``, "" when unplaced."""
    return str(spec_of(obj).get(NODE_NAME) or "")


def phase_of(obj: Mapping[str, Any]) -> str:
    """``status.phase``, Pending when unset."""
    return str(status_of(obj).get(PHASE) or "Pending")


def bound_node_of(obj: Mapping[str, Any]) -> str:
    return str(status_of(obj).get(BOUND_NODE) or "")


def pool_of(obj: Mapping[str, Any]) -> str:
    """The ``eipctl.io/pool`` label, "" when unpooled."""
    return str(labels_of(obj).get(LABEL_POOL) or "")


# --- predicates -----------------------------------------------------------------------------
def is_per_node_name(name: str) -> bool:
    """A per-node claim's name, ``<claim>.<node>`` (`core.naming.node_claim_name_for`)."""
    try:
        parse_node_claim_name(name)
    except ValueError:
        return False
    return True


def is_node_bound(obj: Mapping[str, Any]) -> bool:
    """Bound to its node for good: the scheduler never places, moves or collects it.

    ``spec.nodeBound`` (per-node claims of policy ``all``, node IPs of nodeips), or a
    per-node name (a hand-made copy without the field).
    """
    return bool(spec_of(obj).get(NODE_BOUND)) or is_per_node_name(name_of(obj))


def skips_probe(name: str, node_bound: bool) -> bool:
    """The controller adds the claim's address without probing for another holder.

    Per-node claims of policy ``all`` (``spec.nodeBound`` or a per-node name): every node
    holds the IP on purpose, so another answer is expected, not a conflict. Node IPs of
    nodeips carry ``spec.nodeBound`` too and are treated alike (docs/node-ips.md, "Limits"):
    one someone else already answers for is not reported as a Conflict.
    """
    return node_bound or is_per_node_name(name)


def is_all_nodes(obj: Mapping[str, Any]) -> bool:
    """The IP's own claim, marked by placement policy ``all`` (its per-node copies hold it)."""
    return labels_of(obj).get(LABEL_PLACEMENT) == PLACEMENT_ALL


def is_per_node_copy(obj: Mapping[str, Any]) -> bool:
    """A per-node claim the scheduler made for policy ``all`` (origin ``all-nodes``)."""
    return labels_of(obj).get(LABEL_ORIGIN) == ORIGIN_ALL_NODES


def is_node_ip_claim(obj: Mapping[str, Any]) -> bool:
    """A Node's own IP, made by nodeips (origin ``node``)."""
    return labels_of(obj).get(LABEL_ORIGIN) == ORIGIN_NODE


def is_bound_on(obj: Mapping[str, Any], node: str) -> bool:
    """Bound, and by ``node``."""
    return phase_of(obj) == "Bound" and bound_node_of(obj) == node


# --- constructors ---------------------------------------------------------------------------
def _claim(metadata: Obj, spec: Obj) -> Obj:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _prefix(ip: IPAddress, prefix_length: int | None) -> int:
    """The mask on the interface: the pool's, else the whole address (/32, /128)."""
    return prefix_length or ip.max_prefixlen


def allocator_claim(
    ip: IPAddress, *, pool: str, prefix_length: int | None, service: str, sharing_key: str
) -> Obj:
    """The claim that reserves ``ip`` for an annotated ``service`` (unplaced)."""
    metadata: Obj = {
        "name": claim_name_for(ip),
        "labels": {LABEL_POOL: pool, LABEL_ORIGIN: ORIGIN_ALLOCATOR},
    }
    if sharing_key:
        metadata["annotations"] = {ANNOTATION_CLAIM_SHARING_KEY: sharing_key}
    spec: Obj = {IP: str(ip), PREFIX_LENGTH: _prefix(ip, prefix_length), SERVICES: [service]}
    return _claim(metadata, spec)


def manual_claim(
    ip: IPAddress, *, pool: str | None, prefix_length: int, services: Iterable[str]
) -> Obj:
    """The claim the scheduler makes for an IP Services hand-set (unplaced)."""
    labels = {LABEL_ORIGIN: ORIGIN_MANUAL}
    if pool:
        labels[LABEL_POOL] = pool
    spec: Obj = {IP: str(ip), PREFIX_LENGTH: prefix_length, SERVICES: sorted(services)}
    return _claim({"name": claim_name_for(ip), "labels": labels}, spec)


def node_ip_claim(
    ip: IPAddress,
    *,
    node: str,
    pool: str,
    prefix_length: int | None,
    provider: str = "",
    allocation: str = "",
) -> Obj:
    """A Node's own IP, bound to ``node`` for good (nodeips).

    Bare-metal claims carry ``eipctl.io/node`` so the node's controller holds them; cloud
    claims do not: the cloud, not the node's link, holds those addresses.
    """
    labels = {LABEL_POOL: pool, LABEL_ORIGIN: ORIGIN_NODE}
    if provider:
        labels[LABEL_PROVIDER] = provider
    else:
        labels[LABEL_NODE] = node
    metadata: Obj = {"name": claim_name_for(ip), "labels": labels}
    if allocation:
        metadata["annotations"] = {ANNOTATION_ALLOCATION_ID: allocation}
    spec: Obj = {
        IP: str(ip),
        PREFIX_LENGTH: _prefix(ip, prefix_length),
        NODE_NAME: node,
        NODE_BOUND: True,
    }
    return _claim(metadata, spec)


def per_node_claim(base: Mapping[str, Any], node: str) -> Obj | None:
    """The per-node copy of ``base`` (policy ``all``) for ``node``; None if no valid name
    exists for it. Owned by ``base`` (garbage-collected with it when it has a uid)."""
    spec = spec_of(base)
    try:
        name = node_claim_name_for(str(spec.get(IP) or ""), node)
    except ValueError:
        return None
    labels = {LABEL_NODE: node, LABEL_ORIGIN: ORIGIN_ALL_NODES}
    pool = labels_of(base).get(LABEL_POOL)
    if pool:
        labels[LABEL_POOL] = pool
    new_spec: Obj = {IP: spec.get(IP), NODE_NAME: node, NODE_BOUND: True}
    for key in (PREFIX_LENGTH, LINK):
        if spec.get(key):
            new_spec[key] = spec[key]
    metadata: Obj = {"name": name, "labels": labels}
    uid = meta_of(base).get("uid")
    if uid:
        metadata["ownerReferences"] = [
            {"apiVersion": API_VERSION, "kind": KIND, "name": name_of(base), "uid": uid}
        ]
    return _claim(metadata, new_spec)


def reference(obj: Mapping[str, Any]) -> Obj:
    """An object reference for Events (list items from the API carry no kind)."""
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": dict(meta_of(obj))}


# --- spec edits -----------------------------------------------------------------------------
def put_node(obj: Obj, node: str, *, labelled: bool = True) -> None:
    """Place the claim on ``node`` ("" = unplace it): ``spec.nodeName`` and, when
    ``labelled``, the ``eipctl.io/node`` label a controller selects its claims by, together."""
    spec = obj.setdefault("spec", {})
    metadata = obj.setdefault("metadata", {})
    labels = dict(metadata.get("labels") or {})
    if node:
        spec[NODE_NAME] = node
        if labelled:
            labels[LABEL_NODE] = node
    else:
        spec.pop(NODE_NAME, None)
        labels.pop(LABEL_NODE, None)
    metadata["labels"] = labels
