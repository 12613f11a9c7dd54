"""Fault injection: errors, latency, pause, restart, and the admin endpoint that is exempt."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from kubemu import ApiServer
from polling import within


async def test_error_rate_answers_injected_codes(apiserver: ApiServer) -> None:
    apiserver.faults.error_rate = 1.0
    apiserver.faults.error_codes = (503,)
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.get("/api/v1/namespaces") as r:
            assert r.status == 503
            assert (await r.json())["reason"] == "ServiceUnavailable"
        async with http.get("/_emulator/faults") as r:  # admin path is exempt
            assert r.status == 200 and (await r.json())["error_rate"] == 1.0
        async with http.post("/_emulator/faults", json={"reset": True}) as r:
            assert r.status == 200
        async with http.get("/api/v1/namespaces") as r:
            assert r.status == 200


async def test_admin_endpoint_sets_latency_and_429(apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.post("/_emulator/faults", json={"latency": 0.2}) as r:
            assert r.status == 200
        start = time.monotonic()
        async with http.get("/api/v1/namespaces/default") as r:
            assert r.status == 200
        assert time.monotonic() - start >= 0.2
        await http.post(
            "/_emulator/faults", json={"latency": 0, "error_rate": 1, "error_codes": [429]}
        )
        async with http.get("/api/v1/namespaces/default") as r:
            assert r.status == 429 and r.headers["Retry-After"] == "1"


async def test_pause_holds_requests(apiserver: ApiServer, api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    done = apiserver.faults.pause(0.3)
    start = time.monotonic()
    ns = await core.read_namespace("default")
    assert ns.metadata.name == "default"
    assert time.monotonic() - start >= 0.25
    await done
    assert not apiserver.faults.paused


async def test_restart_keeps_data_and_drops_connections(
    apiserver: ApiServer, api_client: Any
) -> None:
    core = client.CoreV1Api(api_client)
    await core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
    rv = apiserver.store.revision
    port = apiserver.port
    await apiserver.restart()
    assert apiserver.port == port and apiserver.store.revision == rv
    cm = await core.read_namespaced_config_map("keep", "default")
    assert cm.metadata.name == "keep"


async def test_restart_through_admin_endpoint(apiserver: ApiServer) -> None:
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.post("/_emulator/restart") as r,
    ):
        assert r.status == 200
    async with within(5, "/version answering after the restart"):
        while True:
            try:
                async with aiohttp.ClientSession(apiserver.url) as http, http.get("/version") as r:
                    if r.status == 200:
                        break
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)


async def test_bearer_token_is_required_when_set(tmp_path: Any) -> None:
    srv = ApiServer(token="s3cret", bookmark_interval=0)
    await srv.start()
    try:
        from kubernetes_asyncio import config

        path = srv.write_kubeconfig(tmp_path / "kc")
        async with await config.new_client_from_config(config_file=str(path)) as api:
            ns = await client.CoreV1Api(api).read_namespace("default")
            assert ns.metadata.name == "default"
        async with aiohttp.ClientSession(srv.url) as http, http.get("/api/v1/namespaces") as r:
            assert r.status == 401
    finally:
        await srv.stop()


async def test_missing_object_and_wrong_method(apiserver: ApiServer) -> None:
    async with aiohttp.ClientSession(apiserver.url) as http:
        async with http.get("/api/v1/namespaces/default/configmaps/nope") as r:
            assert r.status == 404 and (await r.json())["reason"] == "NotFound"
        async with http.post("/api/v1/namespaces/default/configmaps/nope", json={}) as r:
            assert r.status == 405 and (await r.json())["reason"] == "MethodNotAllowed"
        async with http.post("/api/v1/namespaces/default/configmaps", data=b"{not json") as r:
            assert r.status == 400 and (await r.json())["reason"] == "BadRequest"
        async with http.get("/apis/nope.io/v1/things") as r:
            assert r.status == 404


async def test_https_with_token(tmp_path: Any) -> None:
    srv = ApiServer(token="s3cret", tls=True, bookmark_interval=0)
    await srv.start()
    try:
        from kubernetes_asyncio import config

        assert srv.url.startswith("https://127.0.0.1:")
        path = srv.write_kubeconfig(tmp_path / "kc")
        async with await config.new_client_from_config(config_file=str(path)) as api:
            ns = await client.CoreV1Api(api).read_namespace("default")
            assert ns.metadata.name == "default"
    finally:
        await srv.stop()


async def test_pause_also_holds_open_watches(apiserver: ApiServer) -> None:
    params = {
        "watch": "true",
        "resourceVersion": str(apiserver.store.revision),
        "timeoutSeconds": "5",
    }
    async with (
        aiohttp.ClientSession(apiserver.url) as http,
        http.get("/api/v1/namespaces/default/configmaps", params=params) as r,
    ):
        done = apiserver.faults.pause(0.4)
        apiserver.store.create("", "configmaps", {"metadata": {"name": "held"}}, "default")
        start = time.monotonic()
        line = await asyncio.wait_for(r.content.readline(), 5)
        assert b'"held"' in line
        assert time.monotonic() - start >= 0.3
        await done
