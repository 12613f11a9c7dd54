"""What the plugin read from the API, as plain objects, and the lookups its reasoning needs.

Pure: a `Snapshot` is built by `plugin.main` from lists the API returned (or by a test from
literals); nothing here does I/O. Events are read the way `kubectl describe` shows them: the
latest one of an object, by its last time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eipctl.core.claims import is_per_node_copy
from eipctl.core.fields import Obj, ResourceError, meta_of, name_of, parse_time

SCHEDULER: str = "eipctl-scheduler"
ALLOCATOR: str = "eipctl-allocator"


@dataclass(frozen=True)
class Snapshot:
    """Services, IpClaims, IpClaimPools, IpNodes, Events, EndpointSlices and Namespace labels."""

    services: Sequence[Obj] = ()
    claims: Sequence[Obj] = ()
    pools: Sequence[Obj] = ()
    nodes: Sequence[Obj] = ()
    events: Sequence[Obj] = ()
    slices: Sequence[Obj] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def service(self, namespace: str, name: str) -> Obj | None:
        return next(
            (
                s
                for s in self.services
                if name_of(s) == name and meta_of(s).get("namespace") == namespace
            ),
            None,
        )

    def claim(self, name: str) -> Obj | None:
        return next((c for c in self.claims if name_of(c) == name), None)

    def main_claims(self) -> list[Obj]:
        """The claims that are the record of an IP (per-node copies of policy `all` left out)."""
        return [c for c in self.claims if not is_per_node_copy(c)]

    def pool(self, name: str) -> Obj | None:
        return next((p for p in self.pools if name_of(p) == name), None)

    def events_about(self, kind: str, name: str, namespace: str = "") -> list[Obj]:
        """Events whose involved object is ``kind``/``name`` (in ``namespace``), oldest first."""
        found = [
            e
            for e in self.events
            if (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name
            and (not namespace or (e.get("involvedObject") or {}).get("namespace") == namespace)
        ]
        return sorted(found, key=lambda e: (event_time(e) or datetime.min.astimezone(), name_of(e)))


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an Event last happened: lastTimestamp, else eventTime, else firstTimestamp."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if value:
            try:
                return parse_time(value, key)
            except ResourceError:
                continue
    created = meta_of(event).get("creationTimestamp")
    try:
        return parse_time(created, "creationTimestamp") if created else None
    except ResourceError:
        return None


def source_of(event: Mapping[str, Any]) -> str:
    return str(
        (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
    )


def latest(
    events: Iterable[Mapping[str, Any]], reasons: Iterable[str] = ()
) -> Mapping[str, Any] | None:
    """The last of ``events`` (of one of ``reasons``, when given)."""
    wanted = set(reasons)
    found = [e for e in events if not wanted or e.get("reason") in wanted]
    return found[-1] if found else None


def age(then: datetime | None, now: datetime) -> str:
    """kubectl's short age: ``45s``, ``12m``, ``3h``, ``2d``; ``-`` when unknown."""
    if then is None:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
