"""Events on Services about where their IP is: `kubectl describe svc` answers "where is my IP".

The placement pass reports here each placement it has written, and each claim it could not
place; every Service the claim lists (``spec.services``, "namespace/name": the allocator's
claims and the scheduler's own claims for hand-set IPs both list theirs) gets one Event:

- ``IPPlaced`` (Normal): ``203.0.113.4 placed on node-2``
- ``IPMoved`` (Normal): ``203.0.113.4 now on node-2: node-1 lost (no liveness reply)``
- ``NoLiveNode`` (Warning): ``203.0.113.4 cannot move: node-1 lost (no liveness reply), and
  no other live node may hold it``
- ``NoLocalEndpoint`` (Warning): ``203.0.113.4 taken off node-1, waits: no ready endpoint on
  any live node`` (an ``externalTrafficPolicy: Local`` Service; a move to a node with an
  endpoint is an ``IPMoved``: ``... no ready endpoint on node-1 any more``)

The wording is pure (`placement_event`, `no_live_node_event`). `ServiceEvents` only looks the
Services up in the scheduler's Service cache, for the uid that `kubectl describe` matches
Events on (no API read; a Service not in the cache yet gets its Event without a uid: `kubectl
get events` shows it, `describe` does not), and hands them to the recorder (fire and forget,
deduplicated, bounded). Cost: one Event per listed Service per placement change; nothing in
steady state, since the pass decides nothing for a claim that stays put.

Policy ``all``: one Event when the IP's claim is marked for every node its pool admits, none
when the per-node claims follow nodes that join or leave (those list no Services): a node
joining would otherwise post one Event per IP on every Service, and the answer, "every node
the pool admits", has not changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

import structlog

from eipctl.core.eligibility import Exclusion, reason_text
from eipctl.core.fields import Obj, labels_of
from eipctl.core.local_endpoints import no_endpoint_text
from eipctl.core.naming import LABEL_POOL
from eipctl.core.placement import Decision, Reason
from eipctl.kube.events import EventType, reference

log = structlog.get_logger(__name__)

REASON_PLACED: Final = "IPPlaced"
REASON_MOVED: Final = "IPMoved"
REASON_NO_LIVE_NODE: Final = "NoLiveNode"
REASON_NO_LOCAL_ENDPOINT: Final = "NoLocalEndpoint"
EVERY_NODE: Final = "every node its pool admits"


class ServiceCache(Protocol):
    def get(self, key: str) -> Obj | None: ...


class Recorder(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...


@dataclass(frozen=True)
class ServiceEvent:
    type: EventType
    reason: str
    message: str


def why(d: Decision, pool: str | None) -> str:
    """Why the claim left (or must leave) ``d.from_node``, worded for a person."""
    gone = d.from_node
    if d.reason is Reason.NODE_DEAD:
        return f"{gone} lost (no liveness reply)"
    if d.reason is Reason.NODE_GONE:
        return f"{gone} left the cluster (IpNode deleted)"
    if d.reason is Reason.NODE_INELIGIBLE:
        return f"pool {pool} no longer admits {gone}" if pool else f"{gone} no longer eligible"
    if d.reason is Reason.REBALANCE:
        return f"moved off {gone} to even out the load"
    if d.reason is Reason.ALL_NODES:
        return f"policy all (was on {gone})"
    if d.reason is Reason.NO_LOCAL_ENDPOINT:
        return no_endpoint_text(gone)
    if d.reason.planned:
        return reason_text(gone, Exclusion(d.reason.value))
    return f"moved off {gone} ({d.reason.value})"


def placement_event(ip: str, d: Decision, pool: str | None = None) -> ServiceEvent:
    """The Event for a written placement: first placement, or a move and why."""
    if d.unplace:
        return no_local_endpoint_event(ip, d)
    where = EVERY_NODE if d.all_nodes else d.to_node
    if not d.from_node:
        suffix = " (policy all)" if d.all_nodes else ""
        return ServiceEvent("Normal", REASON_PLACED, f"{ip} placed on {where}{suffix}")
    if d.reason.planned:  # a maintenance move: both ends are worth saying
        message = f"{ip} moved from {d.from_node} to {where}: {why(d, pool)}"
        return ServiceEvent("Normal", REASON_MOVED, message)
    return ServiceEvent("Normal", REASON_MOVED, f"{ip} now on {where}: {why(d, pool)}")


def no_local_endpoint_event(ip: str, d: Decision) -> ServiceEvent:
    """A Local Service's IP with no ready endpoint on any live node: it waits, unplaced (or
    stays where terminating endpoints still serve it)."""
    if d.unplace:
        message = f"{ip} taken off {d.from_node}, waits: no ready endpoint on any live node"
    elif d.from_node:
        message = f"{ip} stays on {d.from_node} while its endpoints there terminate: no ready one"
    else:
        message = f"{ip} waits for a ready endpoint on a live node"
    return ServiceEvent("Warning", REASON_NO_LOCAL_ENDPOINT, message)


def no_live_node_event(ip: str, d: Decision, pool: str | None = None) -> ServiceEvent:
    """The Event for a claim that needs a node and has none to go to."""
    if d.reason is Reason.NO_LOCAL_ENDPOINT:
        return no_local_endpoint_event(ip, d)
    if not d.from_node:
        message = f"{ip} waits for a node: no live node may hold it"
    else:
        message = f"{ip} cannot move: {why(d, pool)}, and no other live node may hold it"
    return ServiceEvent("Warning", REASON_NO_LIVE_NODE, message)


def services_of(claim: Obj) -> tuple[str, ...]:
    """The "namespace/name" keys the claim lists in ``spec.services`` (malformed ones dropped)."""
    listed = (claim.get("spec") or {}).get("services") or []
    keys = {str(s) for s in listed if isinstance(s, str)}
    return tuple(sorted(k for k in keys if _split(k) is not None))


def _split(key: str) -> tuple[str, str] | None:
    ns, sep, name = key.partition("/")
    return (ns, name) if sep and ns and name and "/" not in name else None


def service_ref(key: str, cached: Obj | None) -> Obj:
    """involvedObject for an Event on Service ``key``: with the uid when the cache has one."""
    ns, name = _split(key) or ("", key)
    meta: dict[str, str] = {"namespace": ns, "name": name}
    if cached is not None:
        cached_meta = cached.get("metadata") or {}
        for field in ("uid", "resourceVersion"):
            if cached_meta.get(field):
                meta[field] = str(cached_meta[field])
    return reference("v1", "Service", {"metadata": meta})


class ServiceEvents:
    """Posts the placement Events on the Services a claim lists (see the module docstring)."""

    def __init__(self, services: ServiceCache, recorder: Recorder) -> None:
        self.services = services
        self.recorder = recorder

    def placed(self, claim: Obj, d: Decision) -> tuple[str, ...]:
        """A placement of ``claim`` was written; returns the Services told."""
        return self._emit(claim, placement_event(_ip(claim), d, _pool(claim)))

    def unplaceable(self, claim: Obj, d: Decision) -> tuple[str, ...]:
        """``claim`` needs a node and no live one may hold it; returns the Services told."""
        return self._emit(claim, no_live_node_event(_ip(claim), d, _pool(claim)))

    def _emit(self, claim: Obj, event: ServiceEvent) -> tuple[str, ...]:
        keys = services_of(claim)
        for key in keys:
            cached = self.services.get(key)
            if cached is None:
                log.debug("service.not_cached", service=key, reason=event.reason)
            self.recorder.emit(service_ref(key, cached), event.type, event.reason, event.message)
        return keys


def _ip(claim: Obj) -> str:
    return str((claim.get("spec") or {}).get("ip") or "")


def _pool(claim: Obj) -> str | None:
    return labels_of(claim).get(LABEL_POOL) or None
