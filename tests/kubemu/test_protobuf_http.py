"""Protobuf over HTTP: requests decoded for the handlers, answers encoded when asked first."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from kubemu import ApiServer
from kubemu.protobuf import PROTOBUF, decode_object, encode_object
from kubemu.protobuf_wire import wrap

BOTH = f"{PROTOBUF},application/json"


async def send(
    srv: ApiServer, method: str, path: str, body: bytes | None = None, accept: str = BOTH
) -> tuple[int, str, Any]:
    """(status, content type, the answer decoded from protobuf or JSON)."""
    headers = {"Accept": accept, "Content-Type": PROTOBUF}
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.request(method, path, data=body, headers=headers) as r,
    ):
        raw = await r.read()
        doc = decode_object(raw) if r.content_type == PROTOBUF else json.loads(raw)
        return r.status, r.content_type, doc


def pb(obj: dict[str, Any]) -> bytes:
    return encode_object(obj)


def pruned(obj: Any) -> Any:
    """The object without empty maps (`status: {loadBalancer: {}}`): protobuf cannot tell
    an empty message from a missing one, and decoding leaves it out, as Go's omitempty."""
    if isinstance(obj, dict):
        kept = {k: pruned(v) for k, v in obj.items()}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(obj, list):
        return [pruned(v) for v in obj]
    return obj


async def test_create_and_get_in_protobuf(apiserver: ApiServer) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pb", "labels": {"a": "b"}}}
    code, ctype, doc = await send(apiserver, "POST", "/api/v1/namespaces", pb(ns))
    assert (code, ctype) == (201, PROTOBUF)
    assert doc == apiserver.store.get("", "namespaces", "pb")
    assert doc["metadata"]["uid"] and doc["status"] == {"phase": "Active"}

    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80, "targetPort": "http"}], "externalIPs": ["192.0.2.1"]},
    }
    code, ctype, doc = await send(apiserver, "POST", "/api/v1/namespaces/pb/services", pb(svc))
    assert (code, ctype) == (201, PROTOBUF)
    stored = pruned(apiserver.store.get("", "services", "web", "pb"))
    assert doc == stored and stored["spec"]["clusterIP"] and stored["spec"]["type"] == "ClusterIP"
    assert stored["spec"]["ports"][0]["targetPort"] == "http"

    code, ctype, doc = await send(apiserver, "GET", "/api/v1/namespaces/pb/services/web")
    assert (code, ctype, doc) == (200, PROTOBUF, stored)
    code, ctype, doc = await send(apiserver, "GET", "/api/v1/namespaces/pb/services")
    item = {k: v for k, v in stored.items() if k not in ("apiVersion", "kind")}
    assert (code, ctype, doc["kind"], doc["items"]) == (200, PROTOBUF, "ServiceList", [item])
    code, ctype, doc = await send(apiserver, "GET", "/api/v1/namespaces/pb/services/web", None, "")
    assert (code, ctype) == (200, "application/json") and pruned(doc) == stored


async def test_update_in_protobuf(apiserver: ApiServer) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    assert (await send(apiserver, "POST", "/api/v1/namespaces/default/configmaps", pb(cm)))[
        0
    ] == 201
    cm = apiserver.store.get("", "configmaps", "c", "default")
    cm["data"] = {"a": "2"}
    cm["binaryData"] = {"b": "AAE="}
    code, _, doc = await send(apiserver, "PUT", "/api/v1/namespaces/default/configmaps/c", pb(cm))
    assert code == 200 and doc["data"] == {"a": "2"} and doc["binaryData"] == {"b": "AAE="}
    stale = {**cm, "metadata": {**cm["metadata"], "resourceVersion": "1"}}
    code, _, doc = await send(
        apiserver, "PUT", "/api/v1/namespaces/default/configmaps/c", pb(stale)
    )
    assert (code, doc["kind"], doc["reason"]) == (409, "Status", "Conflict")


async def test_delete_options_in_protobuf(apiserver: ApiServer) -> None:
    apiserver.store.create("", "configmaps", {"metadata": {"name": "d"}}, namespace="default")
    path = "/api/v1/namespaces/default/configmaps/d"
    for api_version in ("v1", "meta.k8s.io/v1"):
        wrong = {"apiVersion": api_version, "kind": "DeleteOptions", "preconditions": {"uid": "x"}}
        code, _, doc = await send(apiserver, "DELETE", path, pb(wrong))
        assert (code, doc["reason"]) == (409, "Conflict")
    uid = apiserver.store.get("", "configmaps", "d", "default")["metadata"]["uid"]
    right = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
    assert (await send(apiserver, "DELETE", path, pb(right)))[0] == 200
    assert apiserver.store.find("", "configmaps", "d", "default") is None
    apiserver.store.create("", "configmaps", {"metadata": {"name": "d"}}, namespace="default")
    assert (await send(apiserver, "DELETE", path))[0] == 200  # no options at all


async def test_errors_are_statuses(apiserver: ApiServer) -> None:
    for body in (b"garbage", b"k8s\x00\x0a\x7f", b"k8s\x00\x0b"):
        code, ctype, doc = await send(apiserver, "POST", "/api/v1/namespaces", body)
        assert (code, ctype, doc["kind"], doc["reason"]) == (400, PROTOBUF, "Status", "BadRequest")
        assert "protobuf body could not be decoded" in doc["message"]
        code, ctype, doc = await send(apiserver, "POST", "/api/v1/namespaces", body, "")
        assert (code, ctype, doc["code"]) == (400, "application/json", 400)

    code, ctype, doc = await send(apiserver, "GET", "/api/v1/namespaces/missing")
    assert (code, ctype, doc["reason"], doc["code"]) == (404, PROTOBUF, "NotFound", 404)

    claim = wrap("eipctl.io/v1alpha1", "IpClaim", b"")
    code, _, doc = await send(apiserver, "POST", "/apis/eipctl.io/v1alpha1/ipclaims", claim)
    assert (code, doc["reason"]) == (415, "UnsupportedMediaType")

    ns = pb({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
    code, _, doc = await send(apiserver, "POST", "/api/v1/namespaces/default/configmaps", ns)
    assert (code, doc["reason"]) == (400, "BadRequest") and "kind" in doc["message"]


async def test_what_the_tables_cannot_say_is_answered_in_json(apiserver: ApiServer) -> None:
    code, ctype, doc = await send(apiserver, "GET", "/api/v1/nodes")
    assert (code, ctype, doc["kind"]) == (200, "application/json", "NodeList")
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "v"}]},
    }
    apiserver.store.create("", "pods", pod, namespace="default")
    code, ctype, doc = await send(apiserver, "GET", "/api/v1/namespaces/default/pods/p")
    assert (code, ctype, doc["spec"]["volumes"]) == (200, "application/json", [{"name": "v"}])
