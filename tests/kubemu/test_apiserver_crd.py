"""CRDs: registration makes resources servable, schema validation, pruning, tables, removal."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from widget_crd import GROUP, PLURAL, VERSION, WIDGET_CRD, widget

from kubemu import ApiServer

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def invalid_causes(api: Any, body: dict[str, Any]) -> list[dict[str, str]]:
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as exc:
        await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    status = json.loads(exc.value.body)
    assert (exc.value.status, status["reason"]) == (422, "Invalid")
    causes: list[dict[str, str]] = status["details"]["causes"]
    return causes


async def invalid_fields(api: Any, body: dict[str, Any]) -> list[str]:
    """The fields named, without the "<nil>" cause that says CEL rules were skipped."""
    causes = await invalid_causes(api, body)
    return sorted(c["field"] for c in causes if c["field"] != "<nil>")


async def test_validation_names_the_field(widgets: ApiServer, api_client: Any) -> None:
    assert await invalid_fields(api_client, widget("a", 11)) == ["spec.size"]
    assert await invalid_fields(api_client, widget("a", "3")) == ["spec.size"]  # type: ignore[arg-type]
    assert await invalid_fields(api_client, widget("a", 1, colour="green")) == ["spec.colour"]
    assert await invalid_fields(api_client, widget("a", 1, name="A1")) == ["spec.name"]
    assert await invalid_fields(api_client, widget("a", 1, cidr="10.0.0.0/33")) == ["spec.cidr"]
    assert await invalid_fields(api_client, widget("a", 1, port=1.5)) == ["spec.port"]
    assert await invalid_fields(api_client, widget("a", 1, extra={"k": 1})) == ["spec.extra.k"]
    assert await invalid_fields(api_client, widget("a", 1, ports=[{"port": "x"}])) == [
        "spec.ports[0].port"
    ]
    body = widget("a", 1)
    del body["spec"]["size"]
    assert await invalid_fields(api_client, body) == ["spec.size"]


async def test_accepted_values_and_pruning(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    body = widget(
        "a", 1, port="http", note=None, unknown=1, free={"any": {"thing": 1}}, extra={"k": "v"}
    )
    out = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    assert "unknown" not in out["spec"]
    assert out["spec"]["free"] == {"any": {"thing": 1}}
    assert out["spec"]["port"] == "http" and out["spec"]["note"] is None


async def test_discovery_follows_crds(apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.get(f"/apis/{GROUP}/{VERSION}") as r:
            assert r.status == 404
        apiserver.store.create("apiextensions.k8s.io", "customresourcedefinitions", WIDGET_CRD)
        async with http.get("/apis") as r:
            groups = [g["name"] for g in (await r.json())["groups"]]
        assert GROUP in groups and "coordination.k8s.io" in groups
        async with http.get(f"/apis/{GROUP}/{VERSION}") as r:
            res = (await r.json())["resources"]
        assert {x["name"] for x in res} == {PLURAL, f"{PLURAL}/status"}
        apiserver.store.create(GROUP, PLURAL, widget("a", 1))
        apiserver.store.delete(
            "apiextensions.k8s.io", "customresourcedefinitions", f"{PLURAL}.{GROUP}"
        )
        async with http.get(f"/apis/{GROUP}/{VERSION}/{PLURAL}") as r:
            assert r.status == 404
        async with http.get("/version") as r:
            assert (await r.json())["major"] == "1"


async def test_table_uses_printer_columns(widgets: ApiServer) -> None:
    body = widget("a", 3, colour="blue", ports=[{"port": 80}, {"port": 443}])
    body["metadata"]["labels"] = {"eipctl.io/pool": "p1"}
    widgets.store.create(GROUP, PLURAL, body)
    url = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
    async with (
        aiohttp.ClientSession(widgets.url) as http,
        http.get(url, headers={"Accept": TABLE}) as r,
    ):
        table = await r.json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Size",
        "Colour",
        "First-Port",
        "Ports",
        "Pool",
        "Age",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[:6] == ["a", 3, "blue", 80, "80,443", "p1"]
    assert cells[6].endswith("s")
    assert table["rows"][0]["object"]["metadata"]["name"] == "a"


async def test_crd_with_bad_scope_is_invalid(apiserver: ApiServer, api_client: Any) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    bad = json.loads(json.dumps(WIDGET_CRD))
    bad["spec"]["scope"] = "Clusterr"
    with pytest.raises(ApiException) as exc:
        await ext.create_custom_resource_definition(bad)
    assert exc.value.status == 422
    assert "spec.scope" in exc.value.body


async def test_immutable_field_rule(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    await co.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, widget("a", 1, cidr="192.0.2.0/24")
    )
    await co.patch_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        "a",
        {"spec": {"size": 2}},
        _content_type="application/merge-patch+json",
    )
    with pytest.raises(ApiException) as exc:
        await co.patch_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            "a",
            {"spec": {"cidr": "198.51.100.0/24"}},
            _content_type="application/merge-patch+json",
        )
    status = json.loads(exc.value.body)
    assert exc.value.status == 422
    assert status["details"]["causes"][0]["field"] == "spec.cidr"
    assert "cidr is immutable" in status["details"]["causes"][0]["message"]


async def test_strict_field_validation_refuses_unknown_fields(widgets: ApiServer) -> None:
    body = widget("a", 1, bogus=1)
    async with (
        aiohttp.ClientSession(widgets.url) as http,
        http.post(
            f"/apis/{GROUP}/{VERSION}/{PLURAL}", json=body, params={"fieldValidation": "Strict"}
        ) as r,
    ):
        status = await r.json()
    assert r.status == 400 and 'unknown field "spec.bogus"' in status["message"]


async def test_crd_created_through_the_typed_client_is_established(api_client: Any) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    crd = await ext.create_custom_resource_definition(json.loads(json.dumps(WIDGET_CRD)))
    conds = {c.type: c for c in crd.status.conditions}
    assert conds["Established"].status == "True" and conds["Established"].last_transition_time
    co = client.CustomObjectsApi(api_client)
    out = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("w", 2))
    assert out["spec"]["size"] == 2
