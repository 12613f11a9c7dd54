"""What lists and watches accept, as a real apiserver judges it.

- fieldSelector: only metadata.name, metadata.namespace and each kind's own labels (Event
  involvedObject.*, Pod spec.nodeName, Node spec.unschedulable, Secret type, ...); custom
  resources only their CRD version's selectableFields. Anything else is 400 BadRequest,
  worded by the kind's conversion function.
- resourceVersionMatch without resourceVersion, sendInitialEvents without
  resourceVersionMatch=NotOlderThan, sendInitialEvents on a list: 422 on ListOptions.
- core/v1 Events are the events.k8s.io/v1 Events (regarding = involvedObject, note = message).
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import aiohttp
import pytest
from widget_crd import GROUP, PLURAL, VERSION, WIDGET_CRD

from kubemu import ApiServer

CORE_EVENTS = "/api/v1/namespaces/default/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/default/events"


async def get(srv: ApiServer, path: str, **query: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.get(path, params=query) as r,
    ):
        return r.status, await r.json()


def names(listing: dict[str, Any]) -> list[str]:
    return [o["metadata"]["name"] for o in listing["items"]]


def core_event(name: str, pod: str, reason: str = "Started") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod, "apiVersion": "v1"},
        "reason": reason,
        "message": f"{pod} {reason}",
        "type": "Normal",
        "source": {"component": "kubelet"},
        "reportingComponent": "kubelet",
        "count": 2,
    }


# ---- field selectors ----------------------------------------------------------------------


async def test_event_field_selectors(apiserver: ApiServer) -> None:
    apiserver.store.create("", "events", core_event("e1", "web"), "default")
    apiserver.store.create("", "events", core_event("e2", "db", "Killing"), "default")
    code, out = await get(apiserver, CORE_EVENTS, fieldSelector="involvedObject.name=web")
    assert code == 200 and names(out) == ["e1"]
    code, out = await get(apiserver, CORE_EVENTS, fieldSelector="reason!=Started,source=kubelet")
    assert names(out) == ["e2"]
    code, out = await get(apiserver, CORE_EVENTS, fieldSelector="message=web Started")
    assert code == 400
    assert out["reason"] == "BadRequest"
    assert out["message"] == "field label not supported: message"


@pytest.mark.parametrize(
    ("path", "label", "message"),
    [
        ("/api/v1/namespaces/default/configmaps", "data.k", None),
        ("/api/v1/nodes", "metadata.namespace", "field label not supported: metadata.namespace"),
        ("/api/v1/namespaces", "spec.finalizers", "field label not supported: spec.finalizers"),
        ("/api/v1/namespaces/default/pods", "spec.containers", None),
        ("/apis/coordination.k8s.io/v1/leases", "spec.holderIdentity", None),
    ],
)
async def test_unknown_field_labels_are_refused(
    apiserver: ApiServer, path: str, label: str, message: str | None
) -> None:
    code, out = await get(apiserver, path, fieldSelector=f"{label}=x")
    assert code == 400
    if message is None and path.endswith("pods"):
        message = f"field label not supported: {label}"
    if message is None:
        message = (
            f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'
        )
    assert out["message"] == message


async def test_refused_on_watch_too(apiserver: ApiServer) -> None:
    code, out = await get(
        apiserver, "/api/v1/namespaces/default/services", watch="true", fieldSelector="spec.ports=1"
    )
    assert code == 400 and out["message"] == "field label not supported: spec.ports"


async def test_kind_specific_labels_select(apiserver: ApiServer) -> None:
    st = apiserver.store
    st.create("", "nodes", {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}})
    st.create("", "nodes", {"metadata": {"name": "n2"}})
    _, out = await get(apiserver, "/api/v1/nodes", fieldSelector="spec.unschedulable=false")
    assert names(out) == ["n2"]
    st.create("", "secrets", {"metadata": {"name": "s1"}, "type": "Opaque"}, "default")
    st.create("", "secrets", {"metadata": {"name": "s2"}, "type": "kubernetes.io/tls"}, "default")
    _, out = await get(apiserver, "/api/v1/secrets", fieldSelector="type=kubernetes.io/tls")
    assert names(out) == ["s2"]
    st.create("", "pods", {"metadata": {"name": "p1"}, "spec": {"nodeName": "n1"}}, "default")
    st.create("", "pods", {"metadata": {"name": "p2"}, "spec": {"nodeName": "n2"}}, "default")
    _, out = await get(apiserver, "/api/v1/pods", fieldSelector="spec.nodeName=n2")
    assert names(out) == ["p2"]
    _, out = await get(apiserver, "/api/v1/namespaces", fieldSelector="status.phase=Active")
    assert "default" in names(out)
    _, out = await get(apiserver, "/api/v1/configmaps", fieldSelector="metadata.namespace=nope")
    assert names(out) == []


def _selectable_crd(scope: str) -> dict[str, Any]:
    crd = copy.deepcopy(WIDGET_CRD)
    crd["spec"]["scope"] = scope
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.colour"}]
    return crd


async def test_custom_resources_select_on_selectable_fields_only(apiserver: ApiServer) -> None:
    apiserver.store.create(
        "apiextensions.k8s.io", "customresourcedefinitions", _selectable_crd("Cluster")
    )
    for name, colour in (("a", "red"), ("b", "blue")):
        apiserver.store.create(
            GROUP, PLURAL, {"metadata": {"name": name}, "spec": {"size": 1, "colour": colour}}
        )
    url = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
    code, out = await get(apiserver, url, fieldSelector="spec.colour=blue")
    assert code == 200 and names(out) == ["b"]
    code, out = await get(apiserver, url, fieldSelector="spec.size=1")
    assert code == 400 and out["message"] == "field label not supported: spec.size"
    # a cluster-scoped custom resource has no metadata.namespace label
    code, out = await get(apiserver, url, fieldSelector="metadata.namespace=")
    assert code == 400


async def test_custom_resources_without_selectable_fields(widgets: ApiServer) -> None:
    widgets.store.create(GROUP, PLURAL, {"metadata": {"name": "a"}, "spec": {"size": 1}})
    url = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
    code, out = await get(widgets, url, fieldSelector="metadata.name=a")
    assert code == 200 and names(out) == ["a"]
    code, out = await get(widgets, url, fieldSelector="spec.colour=red")
    assert code == 400 and out["message"] == "field label not supported: spec.colour"


async def test_deletecollection_refuses_unknown_labels(apiserver: ApiServer) -> None:
    apiserver.store.create("", "configmaps", {"metadata": {"name": "c"}}, "default")
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.delete(
            "/api/v1/namespaces/default/configmaps", params={"fieldSelector": "data.x=1"}
        ) as r,
    ):
        assert r.status == 400
    assert apiserver.store.find("", "configmaps", "c", "default") is not None


# ---- list and watch options ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field", "detail"),
    [
        (
            {"resourceVersionMatch": "NotOlderThan"},
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            {"resourceVersionMatch": "Exact", "resourceVersion": "0"},
            "resourceVersionMatch",
            'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
        (
            {"resourceVersionMatch": "Newest", "resourceVersion": "5"},
            "resourceVersionMatch",
            'Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
        ),
        (
            {"sendInitialEvents": "true"},
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            {"watch": "true", "sendInitialEvents": "true"},
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            {"watch": "true", "resourceVersionMatch": "NotOlderThan"},
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents "
            "is provided",
        ),
    ],
)
async def test_invalid_list_options(
    apiserver: ApiServer, query: dict[str, str], field: str, detail: str
) -> None:
    code, out = await get(apiserver, "/api/v1/namespaces", **query)
    assert code == 422
    assert out["reason"] == "Invalid"
    assert out["details"]["kind"] == "ListOptions"
    assert out["details"]["group"] == "meta.k8s.io"
    assert out["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert {"field": field, "message": detail} in [
        {"field": c["field"], "message": c["message"]} for c in out["details"]["causes"]
    ]


async def test_valid_list_options_still_list(apiserver: ApiServer) -> None:
    code, out = await get(
        apiserver, "/api/v1/namespaces", resourceVersionMatch="NotOlderThan", resourceVersion="1"
    )
    assert code == 200 and "default" in names(out)


# ---- events.k8s.io/v1 is a view of core/v1 Events -----------------------------------------


async def test_core_events_are_listed_as_events_k8s_io(apiserver: ApiServer) -> None:
    apiserver.store.create("", "events", core_event("e1", "web"), "default")
    code, out = await get(apiserver, EVENTS_V1)
    assert code == 200 and out["apiVersion"] == "events.k8s.io/v1"
    (ev,) = out["items"]
    assert ev["apiVersion"] == "events.k8s.io/v1"
    assert ev["regarding"]["name"] == "web"
    assert ev["note"] == "web Started"
    assert ev["deprecatedSource"] == {"component": "kubelet"}
    assert ev["deprecatedCount"] == 2
    assert ev["reportingController"] == "kubelet"
    assert "involvedObject" not in ev and "message" not in ev
    code, one = await get(apiserver, f"{EVENTS_V1}/e1")
    assert code == 200 and one["regarding"]["kind"] == "Pod"
    _, out = await get(apiserver, EVENTS_V1, fieldSelector="regarding.name=web")
    assert names(out) == ["e1"]
    code, out = await get(apiserver, EVENTS_V1, fieldSelector="involvedObject.name=web")
    assert code == 400


async def test_events_k8s_io_writes_are_core_events(apiserver: ApiServer) -> None:
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e2"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "eipctl.io/allocator",
        "reportingInstance": "allocator-0",
        "action": "Allocate",
        "reason": "Allocated",
        "note": "203.0.113.7",
        "type": "Normal",
        "regarding": {"kind": "Service", "namespace": "default", "name": "web"},
    }
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.post(EVENTS_V1, json=body) as r,
    ):
        assert r.status == 201
        created = await r.json()
    assert created["note"] == "203.0.113.7"
    stored = apiserver.store.get("", "events", "e2", "default")
    assert stored["apiVersion"] == "v1"
    assert stored["involvedObject"]["name"] == "web"
    assert stored["message"] == "203.0.113.7"
    assert stored["reportingComponent"] == "eipctl.io/allocator"


async def test_events_k8s_io_watch_sees_core_events(apiserver: ApiServer) -> None:
    params = {"watch": "true", "timeoutSeconds": "5"}
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.get(EVENTS_V1, params=params) as r,
    ):
        await asyncio.sleep(0.1)
        apiserver.store.create("", "events", core_event("e3", "web"), "default")
        line = await asyncio.wait_for(r.content.readline(), 5)
    ev = json.loads(line)
    assert ev["type"] == "ADDED"
    assert ev["object"]["apiVersion"] == "events.k8s.io/v1"
    assert ev["object"]["regarding"]["name"] == "web"


async def test_events_k8s_io_patch_changes_the_core_event(apiserver: ApiServer) -> None:
    apiserver.store.create("", "events", core_event("e4", "web"), "default")
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.patch(
            f"{EVENTS_V1}/e4",
            json={"note": "changed", "deprecatedCount": 3},
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r,
    ):
        assert r.status == 200
        out = await r.json()
    assert out["note"] == "changed" and out["apiVersion"] == "events.k8s.io/v1"
    stored = apiserver.store.get("", "events", "e4", "default")
    assert stored["message"] == "changed" and stored["count"] == 3
    assert "note" not in stored
