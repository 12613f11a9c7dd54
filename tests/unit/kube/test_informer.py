"""Informer against the in-memory fake: cache equals server, handlers see final states."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator
from typing import Any

from eipctl.kube.client import IPCLAIMS, Obj, WatchEvent, object_key
from eipctl.kube.errors import TransportError
from eipctl.kube.informer import Informer, index_by_label
from eipctl.kube.metrics import WATCH_RELISTS
from polling import eventually

from .kube_fakes import FakeApi


class Recorder:
    """Handler that tracks what it believes the world is."""

    def __init__(self) -> None:
        self.state: dict[str, Obj] = {}
        self.deletes: list[str] = []

    def on_add(self, obj: Obj) -> None:
        self.state[object_key(obj)] = obj

    def on_update(self, old: Obj, new: Obj) -> None:
        assert object_key(old) in self.state
        self.state[object_key(new)] = new

    def on_delete(self, obj: Obj) -> None:
        self.state.pop(object_key(obj))
        self.deletes.append(object_key(obj))


def claim(name: str, node: str = "", n: int = 0) -> Obj:
    labels = {"eipctl.io/node": node} if node else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"n": n}}


def server_state(api: FakeApi) -> dict[str, Any]:
    return {k: o["metadata"]["resourceVersion"] for (p, k), o in api.objects.items()}


def cache_state(inf: Informer) -> dict[str, Any]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in inf.objects()}


async def test_list_then_watch_and_indexes() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim("a", "n1"))
    inf = Informer(api, IPCLAIMS, indexers={"node": index_by_label("eipctl.io/node")})
    rec = Recorder()
    inf.add_handler(rec)
    inf.start()
    try:
        async with asyncio.timeout(2):
            await inf.wait_synced()
        assert inf.has_synced
        api.put(IPCLAIMS, claim("b", "n1"))
        api.put(IPCLAIMS, claim("a", "n2"))
        await eventually(lambda: inf.index_keys("node", "n2") == ["a"])
        assert inf.index_keys("node", "n1") == ["b"]
        api.remove(IPCLAIMS, "b")
        await eventually(lambda: inf.get("b") is None)
        assert inf.by_index("node", "n1") == []
        assert rec.state.keys() == {"a"}
    finally:
        await inf.stop()


async def test_relist_after_gone_emits_only_the_difference() -> None:
    api = FakeApi(history=5)
    for i in range(10):
        api.put(IPCLAIMS, claim(f"c{i}"))
    inf = Informer(api, IPCLAIMS)
    rec = Recorder()
    inf.add_handler(rec)
    inf.start()
    relists0 = WATCH_RELISTS.labels("ipclaims")._value.get()
    try:
        async with asyncio.timeout(2):
            await inf.wait_synced()
        await eventually(lambda: cache_state(inf) == server_state(api))
        await inf.stop()  # offline while many things change: history runs out
        api.remove(IPCLAIMS, "c0")
        for i in range(1, 4):
            api.put(IPCLAIMS, claim(f"c{i}", n=1))
        for i in range(20):
            api.put(IPCLAIMS, claim("c9", n=i))
        api.gone_before = api.rv
        adds_before = len(rec.state)
        inf.start()
        await eventually(lambda: cache_state(inf) == server_state(api))
        assert rec.deletes == ["c0"]
        assert len(rec.state) == adds_before - 1
        assert rec.state["c9"]["spec"]["n"] == 19
        assert WATCH_RELISTS.labels("ipclaims")._value.get() > relists0
    finally:
        await inf.stop()


async def test_drops_and_gones_under_churn_converge() -> None:
    api = FakeApi(history=200)
    inf = Informer(api, IPCLAIMS, backoff_initial=0.001)
    rec = Recorder()
    inf.add_handler(rec)
    inf.start()
    rnd = random.Random(7)
    try:
        for step in range(2000):
            name = f"c{rnd.randrange(300)}"
            if ("ipclaims", name) in api.objects and rnd.random() < 0.2:
                api.remove(IPCLAIMS, name)
            else:
                api.put(IPCLAIMS, claim(name, n=step))
            if step % 200 == 0:
                await api.kick()
            if step % 500 == 250:
                api.gone_before = api.rv
            if step % 10 == 0:
                await asyncio.sleep(0)
        await eventually(lambda: cache_state(inf) == server_state(api))
        assert {k: o["metadata"]["resourceVersion"] for k, o in rec.state.items()} == (
            server_state(api)
        )
    finally:
        await inf.stop()


async def test_transport_errors_back_off_and_recover() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim("a"))
    api.faults = [TransportError("refused")] * 3
    inf = Informer(api, IPCLAIMS, backoff_initial=0.001)
    inf.start()
    try:
        async with asyncio.timeout(2):
            await inf.wait_synced()
        assert inf.keys() == ["a"]
    finally:
        await inf.stop()


async def test_bookmarks_advance_rv_and_late_handlers_get_the_cache() -> None:
    class BookmarkApi(FakeApi):
        async def watch(
            self, ref: Any, namespace: Any = None, **kw: Any
        ) -> AsyncGenerator[WatchEvent, None]:
            yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "999"}})
            await asyncio.sleep(60)

    api = BookmarkApi()
    api.put(IPCLAIMS, claim("a"))
    inf = Informer(api, IPCLAIMS)
    inf.start()
    try:
        await eventually(lambda: inf.resource_version == "999")
        rec = Recorder()
        inf.add_handler(rec)
        assert rec.state.keys() == {"a"}
    finally:
        await inf.stop()


async def test_a_transform_shapes_what_is_cached_and_handed_out_listed_or_watched() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim("a", "n1", n=1))

    def slim(obj: Obj) -> Obj:
        return {"metadata": obj["metadata"]}  # the spec dropped

    inf = Informer(api, IPCLAIMS, transform=slim)
    rec = Recorder()
    inf.add_handler(rec)
    inf.start()
    try:
        async with asyncio.timeout(2):
            await inf.wait_synced()
        api.put(IPCLAIMS, claim("b", "n2", n=2))
        api.put(IPCLAIMS, claim("a", "n3", n=3))
        await eventually(
            lambda: (
                (inf.get("a") or {}).get("metadata", {}).get("labels") == {"eipctl.io/node": "n3"}
            )
        )
        await eventually(lambda: inf.get("b") is not None)
        assert all("spec" not in o for o in inf.objects())
        assert all("spec" not in o for o in rec.state.values())
    finally:
        await inf.stop()
