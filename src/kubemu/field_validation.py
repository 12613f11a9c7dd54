"""The ``fieldValidation`` query parameter, as a real apiserver honours it on create, update
and patch: unknown fields (those decoding drops) are a ``Warning: 299 - "unknown field
\\"spec.x\\""`` response header each under ``Warn`` (the default), a 400 BadRequest under
``Strict``, and silently dropped under ``Ignore``. Built-ins are judged by their Kubernetes
schemas (builtin_schema.py), custom resources by their CRD's (schema.py)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import builtin_schema, errors, schema
from .resources import ResourceType

WARNINGS_KEY = web.RequestKey("eipctl.warnings", list[str])


def unknown(rt: ResourceType, body: dict[str, Any]) -> list[str]:
    """The body's fields that the server would drop."""
    if rt.from_crd:
        return schema.unknown_fields(rt.schema, body)
    return builtin_schema.unknown_fields(rt.group, rt.version, rt.kind, body)


def check(directive: str | None, rt: ResourceType, body: dict[str, Any]) -> list[str]:
    """Raise under Strict; otherwise the warnings to send (none under Ignore)."""
    if directive == "Ignore":
        return []
    found = unknown(rt, body)
    if not found:
        return []
    detail = ", ".join(f'unknown field "{u}"' for u in found)
    if directive == "Strict":
        message = f"strict decoding error: {detail}"
        if not rt.from_crd:
            raise builtin_schema.undecodable(rt.kind, rt.version, message)
        raise errors.bad_request(message)
    return [f'unknown field "{u}"' for u in found]


def remember(request: web.Request, rt: ResourceType, body: dict[str, Any]) -> None:
    """Judge the body by the request's fieldValidation; keep the warnings for the answer."""
    request[WARNINGS_KEY] = check(request.query.get("fieldValidation"), rt, body)


async def add_warnings(request: web.Request, resp: web.StreamResponse) -> None:
    """on_response_prepare: the remembered warnings, one Warning header each."""
    for text in request.get(WARNINGS_KEY) or ():
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        resp.headers.add("Warning", f'299 - "{escaped}"')
