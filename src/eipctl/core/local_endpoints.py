"""Where a Service with ``externalTrafficPolicy: Local`` is answered: the nodes that run one
of its endpoints, read from its EndpointSlices the way kube-proxy reads them.

kube-proxy drops a Local Service's external traffic on every node without a local endpoint
(so the client's source address survives). On a node it uses the local endpoints that are
ready; if none is, the local ones that are still serving while they terminate (a rolling
update's old pods: kube-proxy's terminating-endpoints fallback); otherwise none. Placement
wants the first kind of node, and may leave a claim on the second kind while no node of the
first kind exists. Conditions as the EndpointSlice API documents them: ``ready`` missing
means ready; ``serving`` missing means ``ready``; ``terminating`` missing means not.

An EndpointSlice belongs to its Service by the label ``kubernetes.io/service-name`` in the
same namespace, and carries one address family (``addressType``); a claim's IP is answered
through the endpoints of its own family. Pure: objects in, node sets out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOCAL",
    "SERVICE_NAME_LABEL",
    "EndpointNodes",
    "endpoint_nodes",
    "is_local",
    "no_endpoint_text",
    "service_key_of_slice",
    "trim_slice",
]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
LOCAL = "Local"

_FAMILIES = {4: "IPv4", 6: "IPv6"}


@dataclass(frozen=True)
class EndpointNodes:
    """The nodes where a Local Service's traffic of one family reaches a pod."""

    ready: frozenset[str] = frozenset()
    """Nodes with a ready local endpoint: where its IP should be."""
    terminating: frozenset[str] = frozenset()
    """Nodes whose only serving local endpoints are terminating: kube-proxy still delivers
    there, but not for long. Never a target; a claim may stay while no node is ``ready``."""

    def __and__(self, other: EndpointNodes) -> EndpointNodes:
        """Nodes that answer for both (an IP shared by two Local Services)."""
        ready = self.ready & other.ready
        answering = (self.ready | self.terminating) & (other.ready | other.terminating)
        return EndpointNodes(ready, answering - ready)

    def answers(self, node: str) -> bool:
        return node in self.ready or node in self.terminating


def is_local(service: Mapping[str, Any]) -> bool:
    """Whether the Service's external traffic is answered only where its endpoints are."""
    spec = service.get("spec")
    return isinstance(spec, Mapping) and spec.get("externalTrafficPolicy") == LOCAL


def service_key_of_slice(slice_: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, Service name) the slice belongs to, or None for a slice of no Service."""
    meta = slice_.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    labels = meta.get("labels")
    name = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
    namespace = meta.get("namespace")
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return namespace, name


def _flag(conditions: Mapping[str, Any], key: str, default: bool) -> bool:
    value = conditions.get(key)
    return value if isinstance(value, bool) else default


def endpoint_nodes(slices: Iterable[Mapping[str, Any]], family: int) -> EndpointNodes:
    """The nodes answering for the Service whose EndpointSlices are ``slices``, for IPs of
    ``family`` (4 or 6). An endpoint without a nodeName answers nowhere for Local traffic;
    malformed parts of a slice are skipped, never fatal."""
    want = _FAMILIES.get(family)
    ready: set[str] = set()
    serving: set[str] = set()
    for slice_ in slices:
        if slice_.get("addressType") != want:
            continue
        endpoints = slice_.get("endpoints")
        for endpoint in endpoints if isinstance(endpoints, list) else []:
            if not isinstance(endpoint, Mapping):
                continue
            node = endpoint.get("nodeName")
            if not isinstance(node, str) or not node:
                continue
            raw = endpoint.get("conditions")
            conditions: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            is_ready = _flag(conditions, "ready", True)
            is_serving = _flag(conditions, "serving", is_ready)
            terminating = _flag(conditions, "terminating", False)
            if is_ready:  # terminating too only with publishNotReadyAddresses: still used
                ready.add(node)
            elif is_serving and terminating:
                serving.add(node)
    ready_nodes = frozenset(ready)
    return EndpointNodes(ready_nodes, frozenset(serving) - ready_nodes)


def no_endpoint_text(node: str) -> str:
    """Why a Local Service's IP left ``node``, worded for a person."""
    return f"no ready endpoint on {node} any more" if node else "no ready endpoint on any node"


def trim_slice(slice_: Mapping[str, Any]) -> dict[str, Any]:
    """What placement reads of an EndpointSlice, for the scheduler's cache: its identity, its
    Service, its family and each endpoint's node and conditions. Addresses, ports, hints,
    zones and managed fields are dropped: in a big cluster every pod is in some slice."""
    meta = slice_.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = meta.get("labels")
    service = labels.get(SERVICE_NAME_LABEL) if isinstance(labels, Mapping) else None
    endpoints = slice_.get("endpoints")
    kept = [
        {k: e[k] for k in ("nodeName", "conditions") if k in e}
        for e in (endpoints if isinstance(endpoints, list) else [])
        if isinstance(e, Mapping)
    ]
    out_meta: dict[str, Any] = {
        k: meta[k] for k in ("name", "namespace", "resourceVersion", "uid") if k in meta
    }
    if service is not None:
        out_meta["labels"] = {SERVICE_NAME_LABEL: service}
    return {"metadata": out_meta, "addressType": slice_.get("addressType"), "endpoints": kept}
