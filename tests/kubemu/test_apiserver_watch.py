"""List and watch through kubernetes_asyncio: order, bookmarks, 410, selectors, dropped streams."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException
from widget_crd import GROUP, PLURAL, VERSION, widget

from kubemu import ApiServer
from polling import within

MERGE = "application/merge-patch+json"


async def collect(
    api: Any, n: int, rv: str, timeout: float = 5.0, **kw: Any
) -> list[dict[str, Any]]:
    """The first n events of a watch from rv (bookmarks included if asked for)."""
    co = client.CustomObjectsApi(api)
    out: list[dict[str, Any]] = []
    w = watch.Watch()
    async with asyncio.timeout(timeout):
        async with w.stream(
            co.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            resource_version=rv,
            timeout_seconds=int(timeout) + 1,
            **kw,
        ) as s:
            async for ev in s:
                out.append(ev)
                if len(out) == n:
                    break
    return out


async def test_watch_from_list_rv_sees_every_change_in_order(
    widgets: ApiServer, api_client: Any
) -> None:
    co = client.CustomObjectsApi(api_client)
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("before", 1))
    lst = await co.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    rv = lst["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in lst["items"]] == ["before"]
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 1))
    for size in (2, 3, 4):
        await co.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, "a", {"spec": {"size": size}}, _content_type=MERGE
        )
    await co.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "before")
    events = await collect(api_client, 5, rv)
    seen = [
        (e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]["size"]) for e in events
    ]
    assert seen == [
        ("ADDED", "a", 1),
        ("MODIFIED", "a", 2),
        ("MODIFIED", "a", 3),
        ("MODIFIED", "a", 4),
        ("DELETED", "before", 1),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_live_events_arrive(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    rv = (await co.list_cluster_custom_object(GROUP, VERSION, PLURAL))["metadata"][
        "resourceVersion"
    ]
    task = asyncio.create_task(collect(api_client, 2, rv))
    await asyncio.sleep(0)
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("x", 1))
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("y", 1))
    events = await task
    assert [e["object"]["metadata"]["name"] for e in events] == ["x", "y"]
    async with within(
        5, "the watcher forgotten"
    ):  # the client went away: the server forgets the watcher
        while widgets.store.watchers():
            await asyncio.sleep(0.02)


async def test_watch_without_rv_starts_with_current_state(
    widgets: ApiServer, api_client: Any
) -> None:
    co = client.CustomObjectsApi(api_client)
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("a", 1))
    await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, widget("b", 1))
    events = await collect(api_client, 2, "0")
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in events) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


async def test_watch_from_compacted_rv_is_gone(api_client: Any) -> None:
    from kubemu import ApiServer as Srv

    srv = Srv(history_window=5, bookmark_interval=0)
    await srv.start()
    try:
        from widget_crd import WIDGET_CRD

        srv.store.create("apiextensions.k8s.io", "customresourcedefinitions", WIDGET_CRD)
        old_rv = str(srv.store.revision)
        for i in range(10):
            srv.store.create(GROUP, PLURAL, widget(f"w{i}", 1))
        kc_client = await _client_for(srv)
        async with kc_client:
            with pytest.raises(ApiException) as exc:
                await collect(kc_client, 1, old_rv)
            assert exc.value.status == 410
            fresh = str(srv.store.revision - 2)
            events = await collect(kc_client, 2, fresh)
            assert [e["object"]["metadata"]["name"] for e in events] == ["w8", "w9"]
    finally:
        await srv.stop()


async def _client_for(srv: ApiServer) -> Any:
    cfg = client.Configuration(host=srv.url)
    return client.ApiClient(cfg)


async def test_bookmarks_arrive(widgets: ApiServer, api_client: Any) -> None:
    rv = str(widgets.store.revision)
    events = await collect(api_client, 1, rv, allow_watch_bookmarks=True)
    assert events[0]["type"] == "BOOKMARK"
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) >= int(rv)


async def test_label_selector_filters_list_and_watch(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    for name, node in (("a", "n1"), ("b", "n2"), ("c", "n1")):
        body = widget(name, 1)
        body["metadata"]["labels"] = {"eipctl.io/node": node}
        await co.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    lst = await co.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector="eipctl.io/node=n1"
    )
    assert [i["metadata"]["name"] for i in lst["items"]] == ["a", "c"]
    lst = await co.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector="eipctl.io/node notin (n1)"
    )
    assert [i["metadata"]["name"] for i in lst["items"]] == ["b"]
    lst = await co.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, field_selector="metadata.name=b"
    )
    assert [i["metadata"]["name"] for i in lst["items"]] == ["b"]
    rv = lst["metadata"]["resourceVersion"]
    # b moves to n1 (ADDED for this watcher), a moves away (DELETED), c changes (MODIFIED)
    for name, labels in (
        ("b", {"eipctl.io/node": "n1"}),
        ("a", {"eipctl.io/node": "n2"}),
        ("c", {"x": "y"}),
    ):
        await co.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, name, {"metadata": {"labels": labels}}, _content_type=MERGE
        )
    events = await collect(api_client, 3, rv, label_selector="eipctl.io/node=n1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
        ("MODIFIED", "c"),
    ]


async def test_drop_watches_and_forced_gone(widgets: ApiServer, api_client: Any) -> None:
    co = client.CustomObjectsApi(api_client)
    rv = str(widgets.store.revision)
    w = watch.Watch()
    ended = asyncio.Event()

    async def run() -> None:
        async with w.stream(
            co.list_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            resource_version=rv,
            timeout_seconds=30,
        ) as s:
            async for _ in s:
                pass
        ended.set()

    task = asyncio.create_task(run())
    async with within(5, "a watcher registered"):
        while not widgets.store.watchers():
            await asyncio.sleep(0.01)
    assert widgets.faults.drop_watches() == 1
    async with asyncio.timeout(5):
        await ended.wait()
    await task
    widgets.faults.force_gone(1)
    with pytest.raises(ApiException) as exc:
        await collect(api_client, 1, rv)
    assert exc.value.status == 410


async def test_send_initial_events_ends_with_marked_bookmark(widgets: ApiServer) -> None:
    widgets.store.create(GROUP, PLURAL, widget("a", 1))
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": "2",
    }
    lines: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession(widgets.url) as http,
        http.get(f"/apis/{GROUP}/{VERSION}/{PLURAL}", params=params) as r,
    ):
        async for raw in r.content:
            lines.append(json.loads(raw))
            if len(lines) == 2:
                break
    assert [e["type"] for e in lines] == ["ADDED", "BOOKMARK"]
    annotations = lines[1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}
    assert lines[1]["object"]["metadata"]["resourceVersion"] == str(widgets.store.revision)


async def test_watch_as_table_for_kubectl_get_w(widgets: ApiServer) -> None:
    rv = str(widgets.store.revision)
    widgets.store.create(GROUP, PLURAL, widget("a", 4))
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "2"}
    async with (
        aiohttp.ClientSession(widgets.url) as http,
        http.get(f"/apis/{GROUP}/{VERSION}/{PLURAL}", params=params, headers=headers) as r,
    ):
        ev = json.loads(await r.content.readline())
    assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Table"
    assert ev["object"]["rows"][0]["cells"][:2] == ["a", 4]


async def test_watch_timeout_seconds_ends_the_stream(widgets: ApiServer) -> None:
    params = {"watch": "1", "resourceVersion": str(widgets.store.revision), "timeoutSeconds": "1"}
    async with asyncio.timeout(5), aiohttp.ClientSession(widgets.url) as http:
        start = asyncio.get_running_loop().time()
        async with http.get(f"/apis/{GROUP}/{VERSION}/{PLURAL}", params=params) as r:
            assert r.status == 200
            assert await r.read() == b""
        assert 0.9 <= asyncio.get_running_loop().time() - start < 4
    assert widgets.store.watchers() == []
