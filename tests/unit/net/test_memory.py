"""The in-memory backend keeps the kernel backend's rules; time is injected."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.net.announce import announce
from eipctl.net.errors import ForeignAddressError, LinkNotFoundError, NetlinkError, SocketError
from eipctl.net.link import Announcer, LinkAddress, LinkBackend, ManagedAddress, Prober
from eipctl.net.memory import MemoryLinkBackend, Segment
from eipctl.net.probe import probe


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def backend(clock: Clock) -> MemoryLinkBackend:
    b = MemoryLinkBackend(clock=clock)
    b.create_link("eth0")
    return b


def test_satisfies_protocols(backend: MemoryLinkBackend) -> None:
    """Checked by mypy: memory and real implementations fit the same protocols."""
    checked: LinkBackend = backend
    announcers: list[Announcer] = [backend.announce, announce]
    probers: list[Prober] = [backend.probe, probe]
    assert checked is backend
    assert len(announcers) == len(probers) == 2


async def test_add_is_idempotent_and_renews(backend: MemoryLinkBackend, clock: Clock) -> None:
    await backend.add("eth0", "203.0.113.7", 32, valid_lft=10)
    clock.now += 8
    await backend.add("eth0", "203.0.113.7", 32, valid_lft=10)
    clock.now += 8
    (addr,) = await backend.list_managed("eth0")
    assert addr == ManagedAddress(ip_address("203.0.113.7"), 32)
    assert addr.valid_lft == pytest.approx(2)


async def test_lifetime_expires(backend: MemoryLinkBackend, clock: Clock) -> None:
    await backend.add("eth0", "2001:db8::7", 128, valid_lft=5)
    clock.now += 5
    assert await backend.list_managed("eth0") == set()
    assert await backend.remove("eth0", "2001:db8::7", 128) is False


async def test_remove_is_idempotent(backend: MemoryLinkBackend) -> None:
    await backend.add("eth0", "198.51.100.7", 24, valid_lft=5)
    assert await backend.remove("eth0", "198.51.100.7", 24) is True
    assert await backend.remove("eth0", "198.51.100.7", 24) is False


async def test_prefix_change_replaces(backend: MemoryLinkBackend) -> None:
    await backend.add("eth0", "198.51.100.7", 32, valid_lft=5)
    await backend.add("eth0", "198.51.100.7", 24, valid_lft=5)
    assert {(a.ip, a.prefixlen) for a in await backend.list_managed("eth0")} == {
        (ip_address("198.51.100.7"), 24)
    }


async def test_admin_address_is_never_touched(backend: MemoryLinkBackend, clock: Clock) -> None:
    backend.add_foreign("eth0", "192.0.2.10", 24)
    with pytest.raises(ForeignAddressError):
        await backend.add("eth0", "192.0.2.10", 32, valid_lft=5)
    with pytest.raises(ForeignAddressError):
        await backend.remove("eth0", "192.0.2.10", 24)
    clock.now += 10**6
    assert await backend.list_managed("eth0") == set()
    assert await backend.list_all("eth0") == [
        LinkAddress(ip_address("192.0.2.10"), 24, managed=False)
    ]


async def test_missing_link_and_injected_failure(backend: MemoryLinkBackend) -> None:
    with pytest.raises(LinkNotFoundError):
        await backend.add("eth9", "192.0.2.1", 32, valid_lft=5)
    assert not await backend.link_exists("eth9")
    backend.fail_next = NetlinkError("boom", errno=105)
    with pytest.raises(NetlinkError):
        await backend.list_managed("eth0")
    assert await backend.list_managed("eth0") == set()


async def test_link_mac_default_and_custom(backend: MemoryLinkBackend) -> None:
    mac = await backend.link_mac("eth0")
    assert len(mac) == 6
    assert mac[0] & 0x02  # locally administered
    assert await backend.link_mac("eth0") == mac
    backend.create_link("eth1", mac=b"\x02\x00\x00\x00\x00\x01")
    assert await backend.link_mac("eth1") == b"\x02\x00\x00\x00\x00\x01"


async def test_rejects_non_finite_lifetime(backend: MemoryLinkBackend) -> None:
    with pytest.raises(ValueError, match="finite"):
        await backend.add("eth0", "192.0.2.1", 32, valid_lft=0)


async def test_close(backend: MemoryLinkBackend) -> None:
    await backend.close()
    assert backend.closed


async def test_segment_failover_story(clock: Clock) -> None:
    """Node 1 holds the IP, the router learns it; node 1 dies (lifetime ends), node 2
    probes (free), adds and announces; the router's entry follows to node 2."""
    seg = Segment()
    node1, node2 = MemoryLinkBackend(clock=clock), MemoryLinkBackend(clock=clock)
    node1.create_link("eth0", mac=b"\x02\x00\x00\x00\x00\x01", segment=seg)
    node2.create_link("eth0", mac=b"\x02\x00\x00\x00\x00\x02", segment=seg)
    await node1.add("eth0", "203.0.113.7", 32, valid_lft=10)
    assert seg.resolve("203.0.113.7") == b"\x02\x00\x00\x00\x00\x01"
    conflict = await node2.probe("eth0", "203.0.113.7")
    assert conflict is not None
    assert conflict.mac_str == "02:00:00:00:00:01"
    clock.now += 10
    assert await node2.probe("eth0", "203.0.113.7") is None
    await node2.add("eth0", "203.0.113.7", 32, valid_lft=10)
    assert await node2.announce("eth0", "203.0.113.7") == 6
    assert seg.router_neighbours[ip_address("203.0.113.7")] == b"\x02\x00\x00\x00\x00\x02"


async def test_announce_creates_no_router_entry_and_needs_the_address(
    backend: MemoryLinkBackend,
) -> None:
    seg = Segment()
    backend.create_link("eth1", segment=seg)
    with pytest.raises(SocketError):
        await backend.announce("eth1", "2001:db8::7")
    await backend.add("eth1", "2001:db8::7", 128, valid_lft=10)
    assert await backend.announce("eth1", "2001:db8::7", count=2) == 2
    assert seg.router_neighbours == {}
    assert len(seg.announcements) == 2
