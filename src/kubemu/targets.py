"""What a resource URL names: /api/v1/... or /apis/g/v/... split into type, namespace, name and
subresource, and the view between the version a client asked for and the stored objects.

Kept apart from the verbs (handlers.py): reading a path is one idea, serving a verb another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import events_view
from .errors import ApiError
from .resources import ResourceType
from .store import Store

Obj = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """What a resource URL names."""

    rt: ResourceType
    namespace: str
    name: str
    sub: str


@dataclass(frozen=True)
class View:
    """The type a client asked for and the type its objects are stored as: the same, except
    events.k8s.io/v1 Events, which are the core Events converted."""

    rt: ResourceType
    stored: ResourceType

    @property
    def converted(self) -> bool:
        return self.rt is not self.stored

    def out(self, obj: Obj) -> Obj:
        """A stored object as the client sees it."""
        if self.converted:
            return events_view.to_events_v1(obj)
        return _with_version(self.rt, obj)

    def into(self, obj: Obj) -> Obj:
        """A client's object as it is stored."""
        return events_view.to_core(obj) if self.converted else obj


def parse_target(store: Store, path: str) -> Target | None:
    """Split /api/v1/... or /apis/g/v/... into type, namespace, name, subresource."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    rt = store.registry.lookup(group, version, rest[0])
    if namespace and not rt.namespaced:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not (sub == "status" and rt.has_status):
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    return Target(rt, namespace, name, sub)


def _with_version(rt: ResourceType, obj: Obj) -> Obj:
    """The object as seen at the requested version (stored once per group/plural)."""
    if obj.get("apiVersion") == rt.group_version:
        return obj
    return {**obj, "apiVersion": rt.group_version}
