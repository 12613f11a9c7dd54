"""The netlink backend, announcer and prober on real links between test namespaces.

Story: node namespace A and router namespace B share a veth (ea0 <-> eb0). eipctl runs in
A; B plays the router whose neighbour table must follow the address.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from ipaddress import ip_address
from typing import Any

import pytest
import pytest_asyncio
from pyroute2 import AsyncIPRoute

from eipctl.metrics import REGISTRY
from eipctl.net.announce import announce
from eipctl.net.errors import ForeignAddressError, LinkNotFoundError
from eipctl.net.frames import mac_to_str
from eipctl.net.link import ManagedAddress
from eipctl.net.netlink import EIPCTL_ADDR_PROTO, NetlinkLinkBackend
from eipctl.net.probe import probe
from eipctl.sandbox.namespaces import Namespace, NamespaceSet, run_in_netns, why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

STALE_MAC = "02:00:00:00:00:99"


def sample(family: str) -> float:
    value = REGISTRY.get_sample_value("eipctl_announcements_sent_total", {"family": family})
    return value or 0.0


Bed = tuple[Namespace, Namespace]


@pytest.fixture
def bed() -> Iterator[Bed]:
    with NamespaceSet() as tb:
        a, b = tb.namespace("a"), tb.namespace("b")
        tb.veth(a, "ea0", b, "eb0")
        b.ip("addr add 198.51.100.1/24 dev eb0")
        b.ip("addr add 2001:db8::1/64 dev eb0")
        yield a, b


@pytest_asyncio.fixture
async def backend(bed: Bed) -> AsyncIterator[NetlinkLinkBackend]:
    nb = NetlinkLinkBackend(netns=bed[0].name)
    try:
        yield nb
    finally:
        await nb.close()


async def neighbour_mac(ipr: Any, ifname: str, ip: str) -> str | None:
    """B's neighbour entry for `ip`, read with a netlink neighbour dump."""
    (index,) = await ipr.link_lookup(ifname=ifname)
    async for msg in await ipr.neigh("dump", ifindex=index):
        if msg.get("dst") == ip:
            return str(msg.get("lladdr"))
    return None


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], timeout: float, step: float = 0.02
) -> float:
    """Poll an async predicate; return seconds until it held, or fail after `timeout`."""
    start = time.monotonic()
    while not await predicate():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(step)
    return time.monotonic() - start


async def address_protos(ns: str, ifname: str) -> set[tuple[str, int | None]]:
    async with AsyncIPRoute(netns=ns, flags=0) as ipr:
        (index,) = await ipr.link_lookup(ifname=ifname)
        return {
            (m.get("address"), m.get("proto")) async for m in await ipr.addr("dump", index=index)
        }


def managed_set(addrs: set[ManagedAddress]) -> set[tuple[str, int]]:
    return {(str(a.ip), a.prefixlen) for a in addrs}


async def test_add_remove_idempotent(backend: NetlinkLinkBackend, bed: Bed) -> None:
    a, _ = bed
    for _ in range(2):
        await backend.add("ea0", "203.0.113.7", 32, valid_lft=60)
        await backend.add("ea0", "2001:db8::7", 128, valid_lft=60)
    assert managed_set(await backend.list_managed("ea0")) == {
        ("203.0.113.7", 32),
        ("2001:db8::7", 128),
    }
    assert await address_protos(a.name, "ea0") >= {
        ("203.0.113.7", EIPCTL_ADDR_PROTO),
        ("2001:db8::7", EIPCTL_ADDR_PROTO),
    }  # read with pyroute2 directly: iproute2 6.1 here does not print IFA_PROTO
    shown = a.ip("-d addr show dev ea0")
    assert "noprefixroute" in shown and "nodad" in shown
    assert "203.0.113" not in a.ip("-4 route show")  # only the local-table route exists
    for _ in range(2):
        await backend.remove("ea0", "203.0.113.7", 32)
        await backend.remove("ea0", "2001:db8::7", 128)
    assert await backend.list_managed("ea0") == set()


async def test_prefix_below_32_leaks_no_route(backend: NetlinkLinkBackend, bed: Bed) -> None:
    a, _ = bed
    await backend.add("ea0", "203.0.113.7", 24, valid_lft=60)
    await backend.add("ea0", "2001:db8:1::7", 64, valid_lft=60)
    assert "203.0.113.0/24" not in a.ip("-4 route show")
    assert "2001:db8:1::/64" not in a.ip("-6 route show")


async def test_admin_address_is_never_touched(backend: NetlinkLinkBackend, bed: Bed) -> None:
    a, _ = bed
    a.ip("addr add 192.0.2.10/24 dev ea0")
    a.ip("addr add 2001:db8:2::10/64 dev ea0")
    await backend.add("ea0", "192.0.2.11", 24, valid_lft=60)
    with pytest.raises(ForeignAddressError):
        await backend.add("ea0", "192.0.2.10", 24, valid_lft=60)
    with pytest.raises(ForeignAddressError):
        await backend.remove("ea0", "192.0.2.10", 24)
    with pytest.raises(ForeignAddressError):
        await backend.add("ea0", "2001:db8:2::10", 128, valid_lft=60)
    with pytest.raises(ForeignAddressError):
        await backend.remove("ea0", "2001:db8:2::10", 64)
    assert managed_set(await backend.list_managed("ea0")) == {("192.0.2.11", 24)}
    await backend.remove("ea0", "192.0.2.11", 24)  # ours is the secondary here
    shown = a.ip("addr show dev ea0")
    assert "192.0.2.10/24" in shown and "2001:db8:2::10/64" in shown
    assert "valid_lft forever" in shown


async def test_primary_removal_guard(backend: NetlinkLinkBackend, bed: Bed) -> None:
    """Deleting a primary IPv4 address would delete the admin's secondaries with it."""
    a, _ = bed
    await backend.add("ea0", "192.0.2.20", 24, valid_lft=60)  # primary
    a.ip("addr add 192.0.2.21/24 dev ea0")  # admin's, becomes secondary
    with pytest.raises(ForeignAddressError, match=r"192\.0\.2\.21"):
        await backend.remove("ea0", "192.0.2.20", 24)
    a.sysctl("net.ipv4.conf.ea0.promote_secondaries", 1)
    assert await backend.remove("ea0", "192.0.2.20", 24)
    assert "192.0.2.21/24" in a.ip("addr show dev ea0")


async def test_kernel_expires_and_renewal_extends(backend: NetlinkLinkBackend) -> None:
    start = time.monotonic()
    await backend.add("ea0", "203.0.113.30", 32, valid_lft=2)
    await backend.add("ea0", "2001:db8::30", 128, valid_lft=2)
    await backend.add("ea0", "203.0.113.31", 32, valid_lft=2)
    await asyncio.sleep(1.2)
    await backend.add("ea0", "203.0.113.31", 32, valid_lft=3)  # renewed

    async def v4_gone() -> bool:
        left = managed_set(await backend.list_managed("ea0"))
        return ("203.0.113.30", 32) not in left and ("2001:db8::30", 128) not in left

    await wait_for(v4_gone, timeout=6)
    expired_after = time.monotonic() - start
    assert ("203.0.113.31", 32) in managed_set(await backend.list_managed("ea0"))
    print(f"\nFIGURE lifetime 2s: kernel removed the address after {expired_after:.2f}s")
    assert 1.9 <= expired_after <= 4.0


async def test_errors_are_mapped(backend: NetlinkLinkBackend) -> None:
    with pytest.raises(LinkNotFoundError):
        await backend.add("nope0", "192.0.2.1", 32, valid_lft=5)
    assert not await backend.link_exists("nope0")
    assert await backend.link_exists("ea0")
    assert len(await backend.link_mac("ea0")) == 6
    missing = NetlinkLinkBackend(netns="eipt-0-does-not-exist")
    with pytest.raises(LinkNotFoundError):
        await missing.list_all("ea0")
    await missing.close()


@pytest.mark.parametrize(
    ("ip", "prefixlen", "family"),
    [("198.51.100.10", 32, "ipv4"), ("2001:db8::10", 128, "ipv6")],
)
async def test_announcement_updates_stale_neighbour(
    backend: NetlinkLinkBackend, bed: Bed, ip: str, prefixlen: int, family: str
) -> None:
    a, b = bed
    b.ip(f"neigh replace {ip} lladdr {STALE_MAC} dev eb0 nud stale")
    await backend.add("ea0", ip, prefixlen, valid_lft=60)
    want = mac_to_str(a.mac("ea0"))
    before = sample(family)
    async with AsyncIPRoute(netns=b.name, flags=0) as ipr_b:
        assert await neighbour_mac(ipr_b, "eb0", ip) == STALE_MAC
        task = asyncio.create_task(run_in_netns(a.name, announce, "ea0", ip, count=1))

        async def updated() -> bool:
            return await neighbour_mac(ipr_b, "eb0", ip) == want

        took = await wait_for(updated, timeout=3, step=0.002)
        sent = await task
    print(f"\nFIGURE {family}: B's entry changed {took * 1000:.1f} ms after starting the sender")
    assert sent == (2 if family == "ipv4" else 1)
    assert sample(family) == before + sent


async def test_announce_schedule_and_cancel(bed: Bed) -> None:
    a, _ = bed
    a.ip("addr add 198.51.100.40/32 dev ea0")

    async def timed() -> float:
        start = time.monotonic()
        await announce("ea0", "198.51.100.40", count=3, interval=0.2)
        return time.monotonic() - start

    took = await run_in_netns(a.name, timed)
    assert 0.4 <= took < 0.8

    async def cancelled() -> float:
        task = asyncio.create_task(announce("ea0", "198.51.100.40", count=10, interval=1.1))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start

    assert await run_in_netns(a.name, cancelled) < 0.05

    async def rounds() -> list[float]:
        """`on_round` runs as each round is out, not when the next one is due (the
        controller reports Bound on the first)."""
        start = time.monotonic()
        out: list[float] = []
        await announce(
            "ea0",
            "198.51.100.40",
            count=2,
            interval=0.5,
            on_round=lambda: out.append(time.monotonic() - start),
        )
        return out

    first, second = await run_in_netns(a.name, rounds)
    assert first < 0.25 <= 0.45 <= second


@pytest.mark.parametrize(
    ("held", "free", "holder_prefix"),
    [("203.0.113.5", "203.0.113.6", 24), ("2001:db8:5::5", "2001:db8:5::6", 64)],
)
async def test_probe_detects_holder_and_reports_free(
    bed: Bed, held: str, free: str, holder_prefix: int
) -> None:
    a, b = bed
    b.ip(
        f"addr add {held}/{holder_prefix} dev eb0 nodad"
        if ":" in held
        else f"addr add {held}/{holder_prefix} dev eb0"
    )
    conflict = await run_in_netns(a.name, probe, "ea0", held)
    assert conflict is not None
    assert conflict.mac == b.mac("eb0")
    assert conflict.ip == ip_address(held)
    print(f"\nFIGURE probe {held}: holder answered after {conflict.after * 1000:.1f} ms")

    start = time.monotonic()
    assert await run_in_netns(a.name, probe, "ea0", free) is None
    took = time.monotonic() - start
    print(f"FIGURE probe {free}: free, reported after {took * 1000:.0f} ms")
    assert 0.28 <= took < 0.6


async def test_probe_cancel_is_prompt(bed: Bed) -> None:
    a, _ = bed

    async def cancelled() -> float:
        task = asyncio.create_task(probe("ea0", "203.0.113.9", probes=10, interval=1.0))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start

    assert await run_in_netns(a.name, cancelled) < 0.1


UNPRIVILEGED = """
import asyncio, concurrent.futures.thread, os  # stdlib is unreadable after setuid
from eipctl.net.announce import announce
from eipctl.net.errors import NetPermissionError
from eipctl.net.netlink import NetlinkLinkBackend
os.setgroups([]); os.setgid(65534); os.setuid(65534)  # drops every capability
async def main():
    backend = NetlinkLinkBackend()
    for op in (backend.add("ea0", "192.0.2.99", 32, 5), announce("ea0", "192.0.2.99")):
        try:
            await op
        except NetPermissionError as exc:
            print("denied:", exc)
    await backend.close()
asyncio.run(main())
"""


def test_unprivileged_gets_permission_errors(bed: Bed) -> None:
    """Runs as `nobody` inside the test namespace, so even a wrong success stays in there."""
    a, _ = bed
    out = a.exec(sys.executable, "-c", UNPRIVILEGED)
    assert out.count("denied:") == 2, out
    assert "192.0.2.99" not in a.ip("addr show dev ea0")


async def test_bgp_link_is_made_once_up_and_holds_local_host_routes(
    backend: NetlinkLinkBackend, bed: Bed
) -> None:
    """The BGP link: a dummy link made on first need, up, whose host addresses become local
    routes (what the node's FRR redistributes); an existing link is left as it is."""
    a, _ = bed
    assert await backend.ensure_dummy("eipctl-bgp") is True
    assert await backend.ensure_dummy("eipctl-bgp") is False
    shown = a.ip("-d link show eipctl-bgp")
    assert ("dummy" in shown or "ifb" in shown) and ",UP" in shown and "NOARP" in shown
    await backend.add("eipctl-bgp", "203.0.113.77", 32, 5)
    assert "local 203.0.113.77 dev eipctl-bgp" in a.ip("route show table local")
    a.ip("link add eipctl-x type bridge")  # someone else's link of that name: not replaced
    assert await backend.ensure_dummy("eipctl-x") is False
    assert "bridge" in a.ip("-d link show eipctl-x")
