"""Helpers for the nodeips stories: run `NodeIps` on the emulator, make Nodes, wait.

Holds no tests (named to sit with the stories that import it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import polling
from eipctl.cloud.provider import AddressProvider
from eipctl.core.naming import (
    ANNOTATION_SLOT,
    LABEL_AUTO_ASSIGN,
    LABEL_EXTERNAL_IP,
    LABEL_NODE_POOL,
    LABEL_ORIGIN,
    ORIGIN_NODE,
    TAINT_NOT_ATTACHED,
)
from eipctl.kube.client import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    NODES,
    KubeApi,
    Obj,
    ObjectList,
    ResourceRef,
    WatchEvent,
    connect,
)
from eipctl.kube.errors import Conflict, NotFound
from eipctl.nodeips.process import PODS, NodeIps
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.values import parse_bind_address


def settings(kubeconfig: Path, identity: str = "nodeips-0", **kw: Any) -> NodeIpsSettings:
    off = parse_bind_address("0")
    values: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "identity": identity,
        "lease_namespace": "default",
        "metrics_bind_address": off,
        "health_probe_bind_address": off,
        "leader_elect": False,
        "default_node_pool": "nodes",
        "node_reconciliation_requeue_interval": 5.0,
    }
    values.update(kw)
    return NodeIpsSettings(**values)


class LaggingWatch:
    """A ListWatchApi whose watch events arrive ``lag`` seconds late: a stale cache."""

    def __init__(self, api: KubeApi, lag: float) -> None:
        self.api = api
        self.lag = lag

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> ObjectList:
        return await self.api.list(ref, namespace, **kw)

    async def watch(
        self, ref: ResourceRef, namespace: str | None = None, **kw: Any
    ) -> AsyncGenerator[WatchEvent, None]:
        """Each event is held until ``lag`` after it arrived (pipelined, order kept)."""
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[tuple[float, WatchEvent | BaseException | None]] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for event in self.api.watch(ref, namespace, **kw):
                    inbox.put_nowait((loop.time() + self.lag, event))
                inbox.put_nowait((loop.time() + self.lag, None))
            except Exception as exc:
                inbox.put_nowait((loop.time() + self.lag, exc))

        task = asyncio.create_task(pump())
        try:
            while True:
                due, item = await inbox.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def nodeips(
    kubeconfig: Path,
    *,
    lag: float = 0.0,
    providers: Mapping[str, AddressProvider] | None = None,
    **kw: Any,
) -> AsyncIterator[NodeIps]:
    """Run one `NodeIps` replica in this loop; stops it on exit."""
    s = settings(kubeconfig, **kw)
    api = await connect(str(kubeconfig))
    watch_api = LaggingWatch(api, lag) if lag else None
    node_ips = NodeIps(api, s, providers=providers, watch_api=watch_api)
    stop = asyncio.Event()
    task = asyncio.create_task(node_ips.run(stop=stop))
    try:
        yield node_ips
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task
        await api.close()


def pool(name: str, cidr: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"cidr": cidr, "autoAssign": False, **spec}}


def node(
    name: str,
    *,
    auto: bool = True,
    pool_name: str | None = None,
    tainted: bool = False,
    cordoned: bool = False,
    provider_id: str = "",
) -> Obj:
    labels = {"kubernetes.io/hostname": name}
    if auto:
        labels[LABEL_AUTO_ASSIGN] = "true"
    if pool_name:
        labels[LABEL_NODE_POOL] = pool_name
    spec: Obj = {}
    if tainted:
        spec["taints"] = [{"key": TAINT_NOT_ATTACHED, "effect": "NoSchedule"}]
    if cordoned:
        spec["unschedulable"] = True
    if provider_id:
        spec["providerID"] = provider_id
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def pod(name: str, ip: str, node_name: str = "", namespace: str = "default") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {LABEL_EXTERNAL_IP: ip}},
        "spec": spec,
    }


async def get(api: KubeApi, ref: Any, name: str, namespace: str | None = None) -> Obj | None:
    try:
        return await api.get(ref, name, namespace)
    except NotFound:
        return None


async def update(api: KubeApi, ref: Any, name: str, fn: Callable[[Obj], None]) -> Obj:
    """Read-modify-write as a user would (retrying on conflict)."""
    for _ in range(50):
        obj = await api.get(ref, name)
        fn(obj)
        try:
            return await api.replace(ref, obj)
        except Conflict:
            await asyncio.sleep(0.01)
    raise AssertionError(f"could not update {name}")


eventually = partial(polling.eventually, timeout=15.0, step=0.05)
"""API checks poll gently: every call is a request to the emulator."""


async def node_claims(api: KubeApi) -> list[Obj]:
    items = (await api.list(IPCLAIMS)).items
    return [
        c for c in items if (c["metadata"].get("labels") or {}).get(LABEL_ORIGIN) == ORIGIN_NODE
    ]


async def claims_by_node(api: KubeApi) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in await node_claims(api):
        out.setdefault(c["spec"].get("nodeName", ""), []).append(c["spec"]["ip"])
    return out


async def node_ip(api: KubeApi, name: str) -> str:
    """The node's ``eipctl.io/external-ip`` label ("" when absent)."""
    obj = await get(api, NODES, name)
    return str(((obj or {}).get("metadata") or {}).get("labels", {}).get(LABEL_EXTERNAL_IP, ""))


async def slot(api: KubeApi, name: str) -> str:
    obj = await get(api, NODES, name)
    return str(((obj or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_SLOT, ""))


async def bind_like_controller(api: KubeApi, stop: asyncio.Event) -> None:
    """Play every node's controller: mark bare-metal claims placed on a node Bound there."""
    while not stop.is_set():
        for c in (await api.list(IPCLAIMS)).items:
            spec, status = c.get("spec") or {}, c.get("status") or {}
            labels = c["metadata"].get("labels") or {}
            node_name = spec.get("nodeName", "")
            if not node_name or labels.get("eipctl.io/provider"):
                continue
            if status.get("phase") == "Bound" and status.get("boundNode") == node_name:
                continue
            c["status"] = {**status, "phase": "Bound", "boundNode": node_name}
            with contextlib.suppress(Conflict, NotFound):
                await api.replace(IPCLAIMS, c, status=True)
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def controllers(api: KubeApi) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(bind_like_controller(api, stop))
    try:
        yield
    finally:
        stop.set()
        await task


__all__ = ["IPCLAIMPOOLS", "IPCLAIMS", "NODES", "PODS"]
