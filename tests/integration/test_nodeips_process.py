"""Story: two `eipctl nodeips` replicas (the `run` entry point) share the Lease
``eipctl-nodeips``; one serves, the other takes over when it stops."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_nodeips_support import (
    IPCLAIMPOOLS,
    NODES,
    claims_by_node,
    eventually,
    node,
    pool,
    settings,
)

from eipctl.kube.client import LEASES, KubeApi
from eipctl.kube.errors import NotFound
from eipctl.nodeips.process import LEASE_NAME, run
from eipctl.runtime.health import Health


class Replica:
    def __init__(self, kubeconfig: Path, identity: str) -> None:
        self.identity = identity
        self.stop = asyncio.Event()
        cfg = settings(kubeconfig, identity=identity, leader_elect=True)
        self.task = asyncio.create_task(run(cfg, health=Health(), stop=self.stop))

    async def halt(self) -> None:
        self.stop.set()
        async with asyncio.timeout(15):
            await self.task


async def _holder(api: KubeApi) -> str:
    try:
        lease = await api.get(LEASES, LEASE_NAME, "default")
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _has_claim(api: KubeApi, name: str) -> bool:
    return len((await claims_by_node(api)).get(name, [])) == 1


async def test_leader_serves_and_standby_takes_over(api: KubeApi, kubeconfig_path: Path) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(NODES, node("n1"))
    replicas = {r: Replica(kubeconfig_path, r) for r in ("a", "b")}
    try:
        leader = await eventually(lambda: _holder(api), timeout=20)
        await eventually(lambda: _has_claim(api, "n1"), timeout=20)
        await replicas.pop(leader).halt()
        (standby,) = replicas
        await eventually(lambda: _holder_is(api, standby), timeout=20)
        await api.create(NODES, node("n2"))
        await eventually(lambda: _has_claim(api, "n2"), timeout=20)
        assert await claims_by_node(api) == {"n1": ["192.0.2.1"], "n2": ["192.0.2.2"]}
    finally:
        for replica in replicas.values():
            await replica.halt()


async def _holder_is(api: KubeApi, identity: str) -> bool:
    return await _holder(api) == identity
