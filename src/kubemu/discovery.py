"""Discovery documents and OpenAPI v2/v3, generated from the live registry.

kubectl asks for aggregated discovery first; these handlers always answer the legacy
(application/json) forms, which kubectl and client-go accept as a fallback. The OpenAPI v3
documents carry the PATCH operations that accept `fieldValidation` (so kubectl sees that the
server validates fields itself and `kubectl apply` works without `--validate=false`) and the
kinds' schemas (openapi.py), for `kubectl explain`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from . import openapi, reviews
from .resources import VERBS, Registry, ResourceType

KUBE_VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-eipctl-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
    "emulationMajor": "1",
    "emulationMinor": "37",
}

Obj = dict[str, Any]


def api_versions(server_address: str) -> Obj:
    """GET /api."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(name: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


# The self reviews (reviews.py): create-only, stored nowhere, so not in the registry.
_REVIEWS: dict[tuple[str, str], Obj] = {
    (group, "v1"): {
        "name": plural,
        "singularName": kind.lower(),
        "namespaced": False,
        "kind": kind,
        "verbs": ["create"],
    }
    for group, plural, kind in (reviews.SSAR, reviews.SSR)
}


def _groups(registry: Registry) -> dict[str, list[str]]:
    groups = registry.groups()
    for group, version in _REVIEWS:
        versions = groups.setdefault(group, [])
        if version not in versions:
            versions.append(version)
    return groups


def api_group_list(registry: Registry) -> Obj:
    """GET /apis."""
    groups = [_group_entry(g, vs) for g, vs in sorted(_groups(registry).items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    """GET /apis/<group>, None when no such group is served."""
    versions = _groups(registry).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _entry(rt: ResourceType) -> list[Obj]:
    main: Obj = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    if rt.has_status:
        out.append(
            {
                "name": f"{rt.plural}/status",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    return out


def _types_at(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return sorted(
        (t for t in registry.all() if t.group == group and t.version == version),
        key=lambda t: t.plural,
    )


def api_resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    """GET /api/v1 or /apis/<group>/<version>."""
    types = _types_at(registry, group, version)
    review = _REVIEWS.get((group, version))
    if not types and review is None:
        return None
    gv = f"{group}/{version}" if group else version
    resources = [e for t in types for e in _entry(t)] + ([dict(review)] if review else [])
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_gv(registry: Registry, group: str, version: str) -> Obj | None:
    """A per-group-version OpenAPI v3 document: PATCH operations that accept fieldValidation."""
    types = _types_at(registry, group, version)
    if not types:
        return None
    paths: Obj = {}
    for t in types:
        base = "/" + _gv_path(group, version)
        ns = "/namespaces/{namespace}" if t.namespaced else ""
        patch = {
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": t.kind},
            "x-kubernetes-action": "patch",
            "operationId": f"patch{t.kind}",
            "parameters": [
                {
                    "name": "fieldValidation",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
                {
                    "name": "dryRun",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
                {
                    "name": "fieldManager",
                    "in": "query",
                    "schema": {"type": "string", "uniqueItems": True},
                },
            ],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{base}{ns}/{t.plural}/{{name}}"] = {"patch": patch}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": openapi.schemas(tuple(types), "#/components/schemas/")},
    }


def openapi_v2(registry: Registry) -> Obj:
    """GET /openapi/v2 (JSON): the definitions of every served kind (openapi.py)."""
    types = sorted(registry.all(), key=lambda t: (t.group, t.version, t.plural))
    return openapi.swagger(tuple(types), KUBE_VERSION["gitVersion"])


_DIGESTS: dict[tuple[int, ...], tuple[list[ResourceType], str]] = {}


def _digest(registry: Registry, group: str, version: str) -> str:
    """The hash of a group-version document, computed once per set of served types."""
    types = _types_at(registry, group, version)
    key = tuple(id(t) for t in types)
    hit = _DIGESTS.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], types, strict=True)):
        return hit[1]
    doc = openapi_v3_gv(registry, group, version)
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
    if len(_DIGESTS) >= 256:
        _DIGESTS.pop(next(iter(_DIGESTS)))
    _DIGESTS[key] = (types, digest)
    return digest


def openapi_v3_root(registry: Registry) -> Obj:
    """GET /openapi/v3: where each group-version document lives (hash busts kubectl's cache)."""
    paths: Obj = {}
    for g, vs in registry.groups().items():
        for v in vs:
            digest = _digest(registry, g, v)
            paths[_gv_path(g, v)] = {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={digest}"
            }
    return {"paths": paths}
