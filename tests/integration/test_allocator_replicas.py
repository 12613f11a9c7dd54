"""Story: two allocator replicas start together and the Lease keeps changing hands while
500 Services are being served; no IP is ever handed to two Services."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_allocator_support import (
    IPCLAIMPOOLS,
    SERVICES,
    check_consistent,
    claims,
    create,
    eventually,
    pool,
    service,
    settings,
)

from eipctl.allocator.process import run
from eipctl.kube.client import LEASES, KubeApi
from eipctl.kube.errors import NotFound
from eipctl.runtime.health import Health

SERVICES_N = 500


class Replica:
    def __init__(self, kubeconfig: Path, identity: str, *, leader_elect: bool = True) -> None:
        self.identity = identity
        self.stop = asyncio.Event()
        cfg = settings(kubeconfig, identity=identity, leader_elect=leader_elect)
        self.task = asyncio.create_task(run(cfg, health=Health(), stop=self.stop))

    async def halt(self) -> None:
        self.stop.set()
        async with asyncio.timeout(15):
            await self.task


async def test_two_replicas_with_leader_handovers_never_duplicate_an_ip(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "198.51.100.0/23"))
    replicas = {name: Replica(kubeconfig_path, name) for name in ("r0", "r1")}
    generation = 2
    handovers = 0
    try:
        creating = asyncio.create_task(_create_services(api))
        while True:
            await asyncio.sleep(0.6)
            count = len(await claims(api))
            await _no_ip_on_two_services(api)
            if creating.done() and count >= SERVICES_N:
                break
            holder = await _holder(api)
            if holder in replicas and handovers < 8:
                await replicas.pop(holder).halt()  # clean stop: the Lease is released
                name = f"r{generation}"
                generation += 1
                replicas[name] = Replica(kubeconfig_path, name)
                handovers += 1
        await creating
        await eventually(lambda: _consistent(api), timeout=60, step=0.25)
    finally:
        for replica in replicas.values():
            await replica.halt()
    assert handovers >= 2, f"only {handovers} handovers happened"
    await check_consistent(api, SERVICES_N)


async def test_two_replicas_acting_at_once_without_a_lease_still_never_duplicate(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    """The worst case a Lease exists to prevent: both act. Claim names still make it safe."""
    await create(api, IPCLAIMPOOLS, pool("p", "198.51.100.0/23"))
    replicas = [Replica(kubeconfig_path, name, leader_elect=False) for name in ("both-a", "both-b")]
    try:
        creating = asyncio.create_task(_create_services(api))
        while not creating.done():
            await asyncio.sleep(0.3)
            await _no_ip_on_two_services(api)
        await creating
        await eventually(lambda: _consistent(api), timeout=60, step=0.25)
    finally:
        for replica in replicas:
            await replica.halt()
    await check_consistent(api, SERVICES_N)


async def _no_ip_on_two_services(api: KubeApi) -> None:
    seen: dict[str, str] = {}
    for svc in (await api.list(SERVICES)).items:
        name = svc["metadata"]["name"]
        for ip in svc["spec"].get("externalIPs") or []:
            assert ip not in seen, f"{ip} on {seen[ip]} and {name}"
            seen[ip] = name


async def _create_services(api: KubeApi) -> None:
    for i in range(SERVICES_N):
        await create(api, SERVICES, service(f"s{i:03d}"))
        if i % 50 == 0:
            await asyncio.sleep(0.05)


async def _holder(api: KubeApi) -> str:
    try:
        lease = await api.get(LEASES, "eipctl-allocator", "default")
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def _consistent(api: KubeApi) -> bool:
    try:
        await check_consistent(api, SERVICES_N)
    except AssertionError:
        return False
    return True
