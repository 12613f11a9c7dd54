"""LinkReconciler with pools announced by BGP: host routes on the BGP link, no probe, no ARP."""

from __future__ import annotations

import pytest
from test_link_reconciler import NODE, Harness

from eipctl.controller.link_reconciler import LinkReconciler
from eipctl.controller.settings import AddressSettings
from eipctl.controller.status import StatusReporter
from eipctl.core.fence import Fence
from eipctl.core.naming import LABEL_POOL

BGP_LINK = "eipctl-bgp"


class Pools:
    """`PoolModes` with modes set by the test."""

    def __init__(self) -> None:
        self.modes: dict[str, str] = {}
        self.has_synced = True

    def announce_of(self, pool: str) -> str:
        return self.modes.get(pool, "l2")


class BgpHarness(Harness):
    def __init__(self) -> None:
        super().__init__()
        self.pools = Pools()
        self.status = StatusReporter(self.writer, self.events, NODE)
        self.reconciler = LinkReconciler(
            NODE,
            "eth0",
            AddressSettings(lifetime=2.5, resync_interval=30.0),
            bgp_link=BGP_LINK,
            backend=self.backend,
            claims=self.claims,
            fence=Fence(1.0, self.clock),
            status=self.status,
            announcer=self.announce,
            prober=self.probe,
            claim_lookup=self.claims.lookup,
            pools=self.pools,
        )
        self.fence = self.reconciler._fence

    def place_in(self, pool: str, ip: str, **spec: object) -> None:
        self.claims.place(ip, **spec)
        self.claims.items[-1]["metadata"]["labels"] = {LABEL_POOL: pool}


@pytest.fixture
def h() -> BgpHarness:
    return BgpHarness()


async def test_a_bgp_pool_ip_is_a_host_route_on_the_bgp_link_without_probe_or_arp(
    h: BgpHarness,
) -> None:
    h.pools.modes["routed"] = "bgp"
    h.place_in("routed", "203.0.113.7", prefixLength=24)
    h.place_in("routed", "2001:db8::7", prefixLength=64)
    h.place_in("flat", "203.0.113.8")
    await h.reconciler.reconcile()
    await h.reconciler.close()
    await h.status.drain()
    assert await h.backend.link_exists(BGP_LINK)  # created when first needed
    assert set(await h.managed(BGP_LINK)) == {"203.0.113.7/32", "2001:db8::7/128"}
    assert set(await h.managed("eth0")) == {"203.0.113.8/32"}
    assert h.probed == ["203.0.113.8"]
    assert h.announced == ["203.0.113.8"]
    assert len(h.writer.updates) == 3  # every claim reported Bound


async def test_no_bgp_link_is_made_while_no_claim_needs_one(h: BgpHarness) -> None:
    h.place_in("flat", "203.0.113.8")
    await h.reconciler.reconcile()
    assert not await h.backend.link_exists(BGP_LINK)


async def test_a_pool_switched_to_bgp_moves_its_address_to_the_bgp_link_add_first(
    h: BgpHarness,
) -> None:
    h.place_in("p", "203.0.113.7")
    await h.reconciler.reconcile()
    assert set(await h.managed("eth0")) == {"203.0.113.7/32"}
    order: list[str] = []
    add, remove = h.backend.add, h.backend.remove

    async def add_logged(link: str, ip: object, prefixlen: int, lft: int) -> None:
        order.append(f"add {link}")
        await add(link, ip, prefixlen, lft)  # type: ignore[arg-type]

    async def remove_logged(link: str, ip: object, prefixlen: int) -> bool:
        order.append(f"remove {link}")
        return await remove(link, ip, prefixlen)  # type: ignore[arg-type]

    h.backend.add = add_logged  # type: ignore[method-assign]
    h.backend.remove = remove_logged  # type: ignore[method-assign]
    h.pools.modes["p"] = "bgp"
    await h.reconciler.reconcile()
    assert await h.managed("eth0") == {}
    assert set(await h.managed(BGP_LINK)) == {"203.0.113.7/32"}
    assert order == [f"add {BGP_LINK}", "remove eth0"]
    h.pools.modes["p"] = "l2"  # and back: probed and announced on the link again
    await h.reconciler.reconcile()
    await h.reconciler.close()
    assert await h.managed(BGP_LINK) == {}
    assert set(await h.managed("eth0")) == {"203.0.113.7/32"}
    assert h.probed == ["203.0.113.7", "203.0.113.7"]


async def test_nothing_moves_between_modes_before_the_pools_are_listed(h: BgpHarness) -> None:
    h.place_in("p", "203.0.113.7")
    h.pools.has_synced = False
    await h.reconciler.reconcile()
    assert await h.managed("eth0") == {}
    assert not await h.backend.link_exists(BGP_LINK)


async def test_fenced_removes_the_routes_too(h: BgpHarness) -> None:
    h.pools.modes["p"] = "bgp"
    h.place_in("p", "203.0.113.7")
    await h.reconciler.reconcile()
    assert set(await h.managed(BGP_LINK)) == {"203.0.113.7/32"}
    await h.reconciler.release_all()
    assert await h.managed(BGP_LINK) == {}


async def test_the_bgp_link_mac_is_not_published(h: BgpHarness) -> None:
    h.pools.modes["p"] = "bgp"
    h.place_in("p", "203.0.113.7")
    await h.reconciler.reconcile()
    await h.status.drain()
    macs = {m for p in h.writer.patches for m in p["status"]["macs"]}
    assert macs == {h.backend.mac_of("eth0").hex(":")}


async def test_a_fenced_pass_removes_even_before_the_pools_are_known(h: BgpHarness) -> None:
    """Not knowing the pools' modes holds back adds and moves, never a fence's removals."""
    h.place_in("flat", "203.0.113.8")
    await h.reconciler.reconcile()
    assert set(await h.managed("eth0")) == {"203.0.113.8/32"}
    h.pools.has_synced = False
    await h.reconciler.reconcile()
    assert set(await h.managed("eth0")) == {"203.0.113.8/32"}  # unsynced: no purge
    h.fence.lose()
    await h.reconciler.reconcile()
    assert set(await h.managed("eth0")) == set()


async def test_release_all_removes_even_before_the_pools_are_known(h: BgpHarness) -> None:
    h.place_in("flat", "203.0.113.8")
    await h.reconciler.reconcile()
    h.pools.has_synced = False
    await h.reconciler.release_all()
    assert set(await h.managed("eth0")) == set()


async def test_a_fenced_pass_prepares_no_announce_mode(h: BgpHarness) -> None:
    """While fenced a pass only removes: the BGP link a placed claim would need is not made."""
    h.pools.modes["routed"] = "bgp"
    h.place_in("routed", "203.0.113.7")
    h.fence.lose()
    await h.reconciler.reconcile()
    assert not await h.backend.link_exists(BGP_LINK)
    h.fence.succeeded()
    await h.reconciler.reconcile()
    assert set(await h.managed(BGP_LINK)) == {"203.0.113.7/32"}
