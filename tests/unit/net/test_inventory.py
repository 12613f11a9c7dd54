"""`net.inventory`: netlink dumps read into `HostLinks`, and the in-memory counterpart.

The dumps are plain mappings shaped like pyroute2's messages (``msg.get("ifname")`` and
friends); the real kernel's answer is checked in tests/e2e/test_controller_link_discovery.py.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from eipctl.core.link_choice import HostLinks, LinkFacts, choose_link
from eipctl.net.errors import NetlinkError
from eipctl.net.inventory import IFF_UP, RT_TABLE_MAIN, RTN_UNICAST, host_links_of
from eipctl.net.memory import MemoryLinkBackend

AF_INET, AF_INET6 = 2, 10


def link(index: int, name: str | None, *, up: bool = True) -> dict[str, Any]:
    return {"index": index, "ifname": name, "flags": IFF_UP if up else 0}


def addr(index: int, ip: str, *, v6: bool = False) -> dict[str, Any]:
    return {"index": index, ("address" if v6 else "local"): ip}


def route(oif: int | None, **kw: Any) -> dict[str, Any]:
    msg = {"family": AF_INET, "dst_len": 0, "table": RT_TABLE_MAIN, "type": RTN_UNICAST}
    msg.update(kw)
    if oif is not None:
        msg["oif"] = oif
    return msg


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def test_links_with_their_addresses_and_state() -> None:
    host = host_links_of(
        [link(1, "lo"), link(2, "eth0"), link(3, "eth1", up=False), link(4, None)],
        [addr(1, "127.0.0.1"), addr(2, "192.0.2.2"), addr(2, "2001:db8::2", v6=True)],
        [],
    )
    assert host.links == (
        LinkFacts("lo", True, frozenset({ip("127.0.0.1")})),
        LinkFacts("eth0", True, frozenset({ip("192.0.2.2"), ip("2001:db8::2")})),
        LinkFacts("eth1", False, frozenset()),
    )
    assert host.default_route_links == ()


def test_default_routes_ipv4_first_then_by_metric() -> None:
    links = [link(2, "eth0"), link(3, "eth1"), link(4, "eth2")]
    routes = [
        route(4, family=AF_INET6),
        route(3, priority=200),
        route(2, priority=100),
        route(3, priority=50, dst_len=24),  # not a default route
        route(4, table=255),  # local table
        route(4, type=2),  # a local route, not unicast
        route(9),  # a link that is gone
    ]
    assert host_links_of(links, [], routes).default_route_links == ("eth0", "eth1", "eth2")


def test_a_multipath_default_route_goes_by_its_first_hop() -> None:
    routes = [route(None, multipath=[{"oif": 3}, {"oif": 2}])]
    host = host_links_of([link(2, "eth0"), link(3, "eth1")], [], routes)
    assert host.default_route_links == ("eth1",)


async def test_the_memory_backend_shows_its_links() -> None:
    backend = MemoryLinkBackend()
    backend.create_link("eth0")
    backend.create_link("eth1")
    backend.add_foreign("eth0", "192.0.2.2", 24)
    await backend.add("eth0", "203.0.113.7", 32, 30)
    backend.set_link_up("eth1", False)
    backend.default_route_links = ["eth1", "eth0"]
    host = await backend.host_links()
    assert host == HostLinks(
        (
            LinkFacts("eth0", True, frozenset({ip("192.0.2.2"), ip("203.0.113.7")})),
            LinkFacts("eth1", False, frozenset()),
        ),
        ("eth1", "eth0"),
    )
    # the choice made on it: the node's IP on eth0; without it, the first up default route
    assert choose_link("auto", None, [ip("192.0.2.2")], host).link == "eth0"
    assert choose_link("auto", None, [], host).link == "eth0"

    backend.delete_link("eth1")
    backend.create_link("eth1")  # a new link is up
    assert (await backend.host_links()).get("eth1") == LinkFacts("eth1", True)


async def test_the_memory_backend_fails_when_told() -> None:
    backend = MemoryLinkBackend()
    backend.fail_next = NetlinkError("dump links: boom")
    with pytest.raises(NetlinkError):
        await backend.host_links()
    assert await backend.host_links() == HostLinks()
