"""Discovery documents and a minimal OpenAPI v3, generated from the live registry.

kubectl asks for aggregated discovery first; these handlers always answer the legacy
(application/json) forms, which kubectl and client-go accept as a fallback. The OpenAPI v3
documents carry just enough for kubectl to see that the server validates fields itself
(`fieldValidation` on PATCH), so `kubectl apply` works without `--validate=false`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

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


def api_group_list(registry: Registry) -> Obj:
    """GET /apis."""
    groups = [_group_entry(g, vs) for g, vs in sorted(registry.groups().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    """GET /apis/<group>, None when no such group is served."""
    versions = registry.groups().get(group)
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
    if not types:
        return None
    gv = f"{group}/{version}" if group else version
    resources = [e for t in types for e in _entry(t)]
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
        "components": {"schemas": {}},
    }


def openapi_v3_root(registry: Registry) -> Obj:
    """GET /openapi/v3: where each group-version document lives (hash busts kubectl's cache)."""
    paths: Obj = {}
    for g, vs in registry.groups().items():
        for v in vs:
            doc = openapi_v3_gv(registry, g, v)
            digest = (
                hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
            )
            paths[_gv_path(g, v)] = {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(g, v)}?hash={digest}"
            }
    return {"paths": paths}
