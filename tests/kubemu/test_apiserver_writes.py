"""Writes through kubernetes_asyncio: create, replace, patch, status, finalizers, delete."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from widget_crd import GROUP, PLURAL, VERSION, widget

from kubemu import ApiServer

MERGE = "application/merge-patch+json"


def reason(exc: ApiException) -> tuple[int, str]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status"
    return exc.status, body["reason"]


async def test_create_sets_server_fields_and_refuses_duplicates(
    widgets: ApiServer, api_client: Any
) -> None:
    co = client.CustomObjectsApi(api_client)
    obj = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 3))
    meta = obj["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) == widgets.store.revision
    assert meta["generation"] == 1
    assert obj["spec"]["colour"] == "red"  # schema default applied
    with pytest.raises(ApiException) as exc:
        await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 3))
    assert reason(exc.value) == (409, "AlreadyExists")


async def test_generate_name(api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    cm = await core.create_namespaced_config_map(
        "default", {"metadata": {"generateName": "cfg-"}, "data": {"k": "v"}}
    )
    assert cm.metadata.name.startswith("cfg-") and len(cm.metadata.name) == 9


async def test_stale_replace_conflicts_and_fresh_replace_bumps_generation(
    widgets: ApiServer, api_client: Any
) -> None:
    co = client.CustomObjectsApi(api_client)
    first = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 1))
    first["spec"]["size"] = 2
    second = await co.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", first)
    assert second["metadata"]["generation"] == 2
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    first["spec"]["size"] = 5  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        await co.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", first)
    assert reason(exc.value) == (409, "Conflict")
    assert widgets.store.get(GROUP, PLURAL, "a")["spec"]["size"] == 2


async def test_noop_update_keeps_resource_version(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    obj = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 1))
    same = await co.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", obj)
    assert same["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


async def test_merge_and_json_patches(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    await co.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, widget("a", 1, colour="blue", note="x")
    )
    out = await co.patch_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        "a",
        {"spec": {"size": 4, "note": None}, "metadata": {"labels": {"l": "1"}}},
        _content_type=MERGE,
    )
    assert out["spec"]["size"] == 4 and "note" not in out["spec"]
    assert out["metadata"]["labels"] == {"l": "1"}
    out = await co.patch_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        "a",
        [
            {"op": "replace", "path": "/spec/size", "value": 6},
            {"op": "add", "path": "/metadata/labels/m", "value": "2"},
        ],
    )
    assert out["spec"]["size"] == 6 and out["metadata"]["labels"] == {"l": "1", "m": "2"}
    with pytest.raises(ApiException) as exc:
        await co.patch_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            "a",
            {"metadata": {"resourceVersion": "1"}, "spec": {"size": 2}},
            _content_type=MERGE,
        )
    assert reason(exc.value) == (409, "Conflict")


async def test_status_subresource_is_separate(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    obj = await co.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, {**widget("a", 1), "status": {"phase": "x"}}
    )
    assert "status" not in obj  # create drops status for kinds with the subresource
    obj["status"] = {"phase": "ignored"}
    obj["spec"]["size"] = 2
    obj = await co.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", obj)
    assert "status" not in obj and obj["spec"]["size"] == 2
    gen = obj["metadata"]["generation"]
    out = await co.patch_cluster_custom_object_status(
        GROUP,
        VERSION,
        PLURAL,
        "a",
        {"status": {"phase": "Ready"}, "spec": {"size": 9}},
        _content_type=MERGE,
    )
    assert out["status"] == {"phase": "Ready"} and out["spec"]["size"] == 2
    assert out["metadata"]["generation"] == gen  # status writes never bump generation
    out["status"]["phase"] = "Done"
    out = await co.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, "a", out)
    assert widgets.store.get(GROUP, PLURAL, "a")["status"] == {"phase": "Done"}


async def test_service_status_ignored_on_main_endpoint(api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    svc = {"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}
    await core.create_namespaced_service("default", svc)
    lb = {"status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}}
    out = await core.patch_namespaced_service("web", "default", lb)
    assert out.status.load_balancer.ingress is None
    out = await core.patch_namespaced_service_status("web", "default", lb)
    assert out.status.load_balancer.ingress[0].ip == "203.0.113.7"
    assert out.status.load_balancer.ingress[0].ip_mode == "VIP"  # defaulted (service_status.py)
    out = await core.patch_namespaced_service(
        "web",
        "default",
        {
            "metadata": {"annotations": {"external-ip": "auto"}},
            "spec": {"externalIPs": ["203.0.113.7"]},
        },
    )
    assert out.spec.external_ips == ["203.0.113.7"] and out.spec.cluster_ip.startswith("10.96.")


async def test_finalizers_delay_deletion(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    body = widget("a", 1)
    body["metadata"]["finalizers"] = ["eipctl.io/release"]
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    out = await co.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    assert out["metadata"]["deletionTimestamp"]
    still = await co.get_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    assert still["metadata"]["finalizers"] == ["eipctl.io/release"]
    await co.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, "a", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )
    with pytest.raises(ApiException) as exc:
        await co.get_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    assert reason(exc.value) == (404, "NotFound")
    with pytest.raises(ApiException) as exc:
        await co.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    assert reason(exc.value) == (404, "NotFound")


async def test_leases_and_namespaces(api_client: Any) -> None:
    coord = client.CoordinationV1Api(api_client)
    lease = {
        "metadata": {"name": "eipctl-allocator"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    await coord.create_namespaced_lease("default", lease)
    got = await coord.read_namespaced_lease("eipctl-allocator", "default")
    assert got.spec.holder_identity == "a"
    with pytest.raises(ApiException) as exc:
        await coord.create_namespaced_lease("nope", lease)
    assert reason(exc.value) == (404, "NotFound")


async def test_custom_resource_needs_resource_version_on_put(
    widgets: ApiServer, api_client: Any
) -> None:
    co = client.CustomObjectsApi(api_client)
    obj = await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 1))
    del obj["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as exc:
        await co.replace_cluster_custom_object(GROUP, VERSION, PLURAL, "a", obj)
    assert reason(exc.value) == (422, "Invalid")


async def test_no_new_finalizers_once_deleting(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    body = widget("a", 1)
    body["metadata"]["finalizers"] = ["one/f"]
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    await co.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "a")
    with pytest.raises(ApiException) as exc:
        await co.patch_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            "a",
            {"metadata": {"finalizers": ["one/f", "two/f"]}},
            _content_type=MERGE,
        )
    assert reason(exc.value) == (422, "Invalid")


async def test_paging_and_delete_collection(api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    for i in range(5):
        await core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"cm-{i}", "labels": {"set": "a" if i < 3 else "b"}}}
        )
    page = await core.list_namespaced_config_map("default", limit=2)
    names = [c.metadata.name for c in page.items]
    for _ in range(5):  # bounded: a token that never ends fails below
        if not page.metadata._continue:
            break
        page = await core.list_namespaced_config_map(
            "default", limit=2, _continue=page.metadata._continue
        )
        names += [c.metadata.name for c in page.items]
    assert not page.metadata._continue, "still a continue token after 5 pages of 2"
    assert names == [f"cm-{i}" for i in range(5)]
    await core.delete_collection_namespaced_config_map("default", label_selector="set=a")
    left = await core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in left.items] == ["cm-3", "cm-4"]


async def test_paged_list_is_one_snapshot(api_client: Any) -> None:
    """Pages after the first come from the first page's instant, like etcd's paged reads."""
    core = client.CoreV1Api(api_client)
    for name in ("b", "d", "f"):
        await core.create_namespaced_config_map("default", {"metadata": {"name": name}})
    first = await core.list_namespaced_config_map("default", limit=1)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    await core.delete_namespaced_config_map("f", "default")
    names = [c.metadata.name for c in first.items]
    page = first
    for _ in range(5):  # bounded: a token that never ends fails below
        if not page.metadata._continue:
            break
        page = await core.list_namespaced_config_map(
            "default", limit=1, _continue=page.metadata._continue
        )
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [c.metadata.name for c in page.items]
    assert not page.metadata._continue, "still a continue token after 5 pages of 1"
    assert names == ["b", "d", "f"]
    with pytest.raises(ApiException) as exc:
        await core.list_namespaced_config_map(
            "default", limit=1, _continue=first.metadata._continue
        )
    assert exc.value.status == 410


async def test_deleting_a_namespace_deletes_its_objects(
    apiserver: ApiServer, api_client: Any
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": "team"}})
    await core.create_namespaced_config_map("team", {"metadata": {"name": "cfg"}})
    await core.delete_namespace("team")
    assert apiserver.store.find("", "configmaps", "cfg", "team") is None
    assert apiserver.store.find("", "namespaces", "team") is None


async def test_store_python_api(widgets: ApiServer) -> None:
    store = widgets.store
    created = store.create(GROUP, PLURAL, widget("a", 1))
    created["spec"]["size"] = 99  # a copy: the store is untouched
    assert store.get(GROUP, PLURAL, "a")["spec"]["size"] == 1
    out = store.patch(GROUP, PLURAL, "a", {"status": {"phase": "Ready"}}, status=True)
    assert out["status"] == {"phase": "Ready"}
    out = store.patch(GROUP, PLURAL, "a", {"spec": {"size": 3}})
    assert out["spec"]["size"] == 3 and out["metadata"]["generation"] == 2
    assert [o["metadata"]["name"] for o in store.list(GROUP, PLURAL)] == ["a"]
    store.create(GROUP, PLURAL, widget("b", 2))
    stored = store.scan(GROUP, PLURAL)  # the stored objects themselves, for reading
    assert [o["metadata"]["name"] for o in stored] == ["a", "b"]
    assert stored[0] is store.scan(GROUP, PLURAL)[0]
    assert stored[0] is not store.list(GROUP, PLURAL)[0]
    store.delete(GROUP, PLURAL, "a")
    assert store.find(GROUP, PLURAL, "a") is None
