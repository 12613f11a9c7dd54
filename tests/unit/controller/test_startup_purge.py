"""The start-up purge removes only eipctl's addresses, never an administrator's /32 or /128.

Guarantee (docs/controller.md step 3, docs/networking.md "Marker"): when the controller
starts, its first pass removes the managed addresses (those carrying eipctl's marker) whose
claims are not placed on this node. An address without the marker is the administrator's,
whatever its prefix length: it is never removed, and no removal of it is even attempted.

Mutant killed: classifying every host-length address on the link (/32 or /128) as managed,
marker or not. eipctl's own addresses are mostly /32 and /128, so the shortcut looks
harmless, and it passed every earlier test because every admin address in them was a /24
or a /64. Here the link also holds an admin /32 and an admin /128 when the controller starts.

The node controller runs against the API emulator, with the in-memory link backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from eipctl.controller.node import NodeController, NodeSettings
from eipctl.controller.settings import AddressSettings, ApiSettings, FencingSettings
from eipctl.core.naming import LABEL_NODE, claim_name_for
from eipctl.kube.client import IPCLAIMS, KubeApi
from eipctl.net.memory import MemoryLinkBackend, Segment
from kubemu import ApiServer
from polling import eventually

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
NODE = "node-a"
SETTINGS = NodeSettings(
    node=NODE,
    link="eth0",
    api=ApiSettings(heartbeat_interval=0.05),
    fencing=FencingSettings(fence_timeout=0.4),
    addresses=AddressSettings(lifetime=2.0, resync_interval=0.5),
)
ADMIN = {"198.51.100.250/32", "2001:db8:ffff::250/128", "192.0.2.10/24"}
"""The administrator's: no marker, no lifetime."""
STALE = {"203.0.113.9/32", "2001:db8::9/128"}
"""Managed, left by an earlier process; their claims were released while it was down."""
KEPT = "203.0.113.7/32"
"""Managed, and its claim is still placed here."""


def split(address: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    ip, _, prefixlen = address.partition("/")
    return ipaddress.ip_address(ip), int(prefixlen)


class Link(MemoryLinkBackend):
    """The node's link; remembers every removal the controller asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.removals: list[str] = []

    async def remove(self, ifname: str, ip: Any, prefixlen: int) -> bool:
        self.removals.append(f"{ip}/{prefixlen}")
        return await super().remove(ifname, ip, prefixlen)

    async def holds(self) -> dict[str, bool]:
        """address -> whether it is managed, for every address on eth0."""
        return {f"{a.ip}/{a.prefixlen}": a.managed for a in await self.list_all("eth0")}


@pytest_asyncio.fixture
async def api(apiserver: ApiServer, api_client: Any) -> KubeApi:
    await apiserver.load_crds_from_dir(CRDS)
    return KubeApi(api_client)


@pytest_asyncio.fixture
async def link() -> Link:
    backend = Link()
    backend.create_link("eth0", segment=Segment())
    return backend


@contextlib.asynccontextmanager
async def running(api: KubeApi, link: Link) -> AsyncIterator[NodeController]:
    async def announce(
        ifname: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        return await link.announce(ifname, ip, count=1, still_ours=still_ours, on_round=on_round)

    controller = NodeController(
        SETTINGS,
        api=api,
        heartbeat_api=api,
        backend=link,
        announcer=announce,
        prober=link.probe,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        yield controller
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def place(api: KubeApi, address: str, node: str) -> None:
    """An IpClaim for `address`, placed on `node`."""
    ip, prefixlen = split(address)
    body = {
        "metadata": {"name": claim_name_for(str(ip)), "labels": {LABEL_NODE: node}},
        "spec": {"ip": str(ip), "prefixLength": prefixlen, "nodeName": node},
    }
    await api.create(IPCLAIMS, body)


async def test_startup_purge_removes_stale_managed_addresses_and_keeps_admin_host_addresses(
    api: KubeApi, link: Link
) -> None:
    """Before the controller starts, the link holds the admin's /32, /128 and /24, two
    managed addresses whose claims are gone, and one whose claim is still placed here.
    After its first passes the stale managed ones are gone, the placed one is kept, and
    the admin's addresses are all there, still unmanaged, never asked to be removed."""
    for address in ADMIN:
        link.add_foreign("eth0", *split(address))
    for address in [*STALE, KEPT]:
        await link.add("eth0", *split(address), 30)
    await place(api, KEPT, NODE)
    assert set(await link.holds()) == ADMIN | STALE | {KEPT}

    async with running(api, link) as controller:
        await eventually(controller.ready)
        await eventually(lambda: controller.passes >= 3)  # the purge, and passes after it

    holds = await link.holds()
    assert not STALE & set(holds), "the stale managed addresses are purged"
    assert holds.get(KEPT) is True, "the address placed here is kept"
    assert {a: holds.get(a) for a in ADMIN} == dict.fromkeys(ADMIN, False), (
        "the admin's addresses are still there, and still not eipctl's"
    )
    assert sorted(link.removals) == sorted(STALE), "only the stale ones were ever removed"
