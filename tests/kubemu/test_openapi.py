"""/openapi/v3 and /openapi/v2 carry the kinds' schemas, as a real apiserver's do: each kind's
schema names its group-version-kind (``x-kubernetes-group-version-kind``, which kubectl
explain looks for) and every definition it refers to is in the same document; CRDs
publish their openAPIV3Schema under the reversed-group name with ObjectMeta as metadata."""

from __future__ import annotations

from typing import Any

import aiohttp
from widget_crd import GROUP, VERSION

from kubemu import ApiServer


async def get(srv: ApiServer, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession(srv.url) as http, http.get(path) as r:
        return r.status, await r.json()


def _dangling(doc: Any, names: set[str], prefix: str) -> set[str]:
    missing: set[str] = set()
    if isinstance(doc, dict):
        ref = doc.get("$ref")
        if isinstance(ref, str) and ref.removeprefix(prefix) not in names:
            missing.add(ref)
        for v in doc.values():
            missing |= _dangling(v, names, prefix)
    elif isinstance(doc, list):
        for v in doc:
            missing |= _dangling(v, names, prefix)
    return missing


async def test_v3_core_document_has_service_schema(apiserver: ApiServer) -> None:
    code, root = await get(apiserver, "/openapi/v3")
    assert code == 200
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    code, doc = await get(apiserver, url)
    assert code == 200
    schemas = doc["components"]["schemas"]
    svc = schemas["io.k8s.api.core.v1.Service"]
    assert svc["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Service", "version": "v1"}
    ]
    port = schemas["io.k8s.api.core.v1.ServicePort"]["properties"]["port"]
    assert port["type"] == "integer" and port["format"] == "int32"
    assert not _dangling(doc, set(schemas), "#/components/schemas/")
    assert any(p.endswith("/services/{name}") for p in doc["paths"])


async def test_v3_crd_document_has_the_crd_schema(widgets: ApiServer) -> None:
    code, doc = await get(widgets, f"/openapi/v3/apis/{GROUP}/{VERSION}")
    assert code == 200
    schemas = doc["components"]["schemas"]
    name = ".".join([*reversed(GROUP.split(".")), VERSION, "Widget"])
    widget = schemas[name]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": GROUP, "version": VERSION, "kind": "Widget"}
    ]
    assert widget["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in schemas
    assert not _dangling(doc, set(schemas), "#/components/schemas/")


async def test_v2_serves_the_definitions(widgets: ApiServer) -> None:
    code, doc = await get(widgets, "/openapi/v2")
    assert code == 200 and doc["swagger"] == "2.0"
    defs = doc["definitions"]
    assert "io.k8s.api.coordination.v1.Lease" in defs
    assert "io.k8s.api.core.v1.ConfigMap" in defs
    assert any(d.endswith(".Widget") for d in defs)
    assert not _dangling(doc, set(defs), "#/definitions/")
