"""Where each claim's ``externalTrafficPolicy: Local`` Services are answered, from the
scheduler's Service and EndpointSlice caches (no API read): the ``local`` of
`core.placement.ClaimPlacement`.

A claim lists its Services (``spec.services``); those with policy Local each add the nodes
with their endpoints (`core.local_endpoints`), and an IP shared by several is answered only
where all of them are. A claim with no Local Service gets None: any node will do.

Cost: the EndpointSlice informer holds every slice of the cluster (the API cannot select
slices by their Service's policy); `relevant` keeps slice churn of Cluster Services from
starting placement passes. docs/scheduler.md, "Local Services".
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import ip_address
from typing import Protocol

from eipctl.core.fields import Obj
from eipctl.core.local_endpoints import (
    EndpointNodes,
    endpoint_nodes,
    is_local,
    service_key_of_slice,
)
from eipctl.scheduler.service_events import services_of

LOCALITY_KEPT = 65536
"""Services whose traffic policy is remembered at most (then forgotten all at once)."""
SERVICE_INDEX = "service"
"""The EndpointSlice informer's index: "namespace/name" of the owning Service."""


def slice_service(obj: Obj) -> Iterable[str]:
    """`SERVICE_INDEX`'s function."""
    key = service_key_of_slice(obj)
    return () if key is None else (f"{key[0]}/{key[1]}",)


class ServiceCache(Protocol):
    def get(self, key: str) -> Obj | None: ...


class SliceCache(Protocol):
    def by_index(self, index: str, value: str) -> list[Obj]: ...


def _family(claim: Obj) -> int | None:
    ip = (claim.get("spec") or {}).get("ip")
    try:
        return ip_address(str(ip)).version
    except ValueError:
        return None


class LocalTraffic:
    def __init__(self, services: ServiceCache, slices: SliceCache) -> None:
        self._services = services
        self._slices = slices
        self._locality: dict[str, tuple[object, bool]] = {}
        """Service key -> (its resourceVersion, `is_local`): a pass asks for every claim's
        Services, and at 10,000 claims reading each policy again was a sixth of a pass."""

    def _is_local(self, key: str, service: Obj) -> bool:
        version = (service.get("metadata") or {}).get("resourceVersion")
        known = self._locality.get(key)
        if version is not None and known is not None and known[0] == version:
            return known[1]
        local = is_local(service)
        if version is not None:
            if len(self._locality) >= LOCALITY_KEPT:  # a cache: Services come and go
                self._locality.clear()
            self._locality[key] = (version, local)
        return local

    def of(self, claim: Obj, services: Iterable[str] | None = None) -> EndpointNodes | None:
        """The nodes answering for every Local Service of ``claim``; None if it has none.

        ``services``: its `services_of`, when the caller has read them already."""
        family: int | None = None  # parsed only for a claim with a Local Service ([scale])
        found: EndpointNodes | None = None
        for key in services_of(claim) if services is None else services:
            service = self._services.get(key)
            if service is None or not self._is_local(key, service):
                continue
            family = family or _family(claim)
            if family is None:
                return None  # no IP to answer for
            nodes = endpoint_nodes(self._slices.by_index(SERVICE_INDEX, key), family)
            found = nodes if found is None else found & nodes
        return found

    def relevant(self, old: Obj | None, new: Obj | None) -> bool:
        """Whether a slice change can move a claim: its Service is Local (or unknown yet)."""
        for obj in (old, new):
            for key in slice_service(obj or {}):
                service = self._services.get(key)
                if service is None or is_local(service):
                    return True
        return False
