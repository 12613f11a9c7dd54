"""Who sends a request and what it asks to do: the attributes an authorizer decides on.

Apart from rbac.py so that the Engine (which holds the authorizer that SelfSubjectAccessReviews
ask) and admission can name them without importing RBAC, which reads its rules from the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

Obj = dict[str, Any]


@dataclass(frozen=True)
class UserInfo:
    """Who sent a request, as an authenticator reports it (and admission sees it)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> Obj:
        return {
            "username": self.username,
            "uid": self.uid,
            "groups": list(self.groups),
            "extra": {k: list(v) for k, v in self.extra.items()},
        }


CURRENT_USER: ContextVar[UserInfo | None] = ContextVar("eipctl_emulator_user", default=None)
"""The authenticated user of the request being served (None: a direct store call)."""


@dataclass(frozen=True)
class RequestAttributes:
    """What a request asks to do, parsed from its method, path and query like Kubernetes'
    RequestInfoFactory does."""

    verb: str
    resource_request: bool
    path: str
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> RequestAttributes:
    """Parse /api/v1/... and /apis/<group>/<version>/... into RBAC attributes."""
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestAttributes(verb=verb, resource_request=False, path=path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    watch = query.get("watch", "") in ("true", "1", "True")
    verb = {
        "get": "watch" if watch else ("get" if name else "list"),
        "head": "get",
        "post": "create",
        "put": "update",
        "patch": "patch",
        "delete": "delete" if name else "deletecollection",
    }.get(verb, verb)
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return RequestAttributes(
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=sub,
        namespace=namespace,
        name=name,
    )


def _name_from_field_selector(selector: str) -> str:
    """A list or watch of one object by name is authorized against that name, as in
    Kubernetes (`kubectl get lease x -w` sends fieldSelector=metadata.name=x)."""
    for term in selector.split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.strip()
    return ""


class Authorizer(Protocol):
    """What decides a request (rbac.Rbac, when the emulator runs with rbac=True)."""

    def allowed(self, user: UserInfo, attrs: RequestAttributes) -> bool: ...
