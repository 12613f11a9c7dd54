"""Story: a node IP reaches the real node controller's link (no fake binder here).

`eipctl controller` needs nothing new for node IPs: it holds every claim whose
``spec.nodeName`` is its node (watched through the ``eipctl.io/node`` label), node-bound or
not. Here the real `NodeController` (in-memory link) holds what nodeips made, reports it
Bound, and nodeips then labels the Node and lifts its startup taint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_nodeips_support import (
    IPCLAIMPOOLS,
    NODES,
    eventually,
    get,
    node,
    node_ip,
    nodeips,
    pool,
)

from eipctl.controller.node import NodeController, NodeSettings
from eipctl.controller.settings import AddressSettings, ApiSettings, FencingSettings
from eipctl.core.naming import TAINT_NOT_ATTACHED
from eipctl.kube.client import KubeApi
from eipctl.net.memory import MemoryLinkBackend, Segment

SETTINGS = NodeSettings(
    node="n1",
    link="eth0",
    api=ApiSettings(heartbeat_interval=0.05),
    fencing=FencingSettings(fence_timeout=0.4),
    addresses=AddressSettings(lifetime=2.0, resync_interval=0.5),
)


async def test_node_ip_lands_on_the_link_of_its_node(api: KubeApi, kubeconfig_path: Path) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(NODES, node("n1", tainted=True))
    backend = MemoryLinkBackend()
    backend.create_link("eth0", segment=Segment())
    controller = NodeController(
        SETTINGS,
        api=api,
        heartbeat_api=api,
        backend=backend,
        announcer=lambda link, address, /: backend.announce(link, address, count=1),
        prober=lambda link, address, /: backend.probe(link, address),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        async with nodeips(kubeconfig_path):
            await eventually(lambda: _on_link(backend, "192.0.2.1"), timeout=20)
            assert await eventually(lambda: node_ip(api, "n1"), timeout=20) == "192.0.2.1"
            n1 = await get(api, NODES, "n1")
            await eventually(lambda: _untainted(api), timeout=20)
            assert n1 is not None
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def _on_link(backend: MemoryLinkBackend, ip: str) -> bool:
    return any(str(a.ip) == ip for a in await backend.list_managed("eth0"))


async def _untainted(api: KubeApi) -> bool:
    n1 = await get(api, NODES, "n1")
    taints = ((n1 or {}).get("spec") or {}).get("taints") or []
    return not any(t.get("key") == TAINT_NOT_ATTACHED for t in taints)
