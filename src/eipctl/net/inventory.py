"""What the controller needs to find its link: every host link, its addresses, whether it
is up, and where the default routes go (`core.link_choice.HostLinks`).

`LinkInventory` is the protocol; `netlink.NetlinkLinkBackend` and `memory.MemoryLinkBackend`
implement it. The pyroute2 messages are turned into facts here, by functions of plain
messages, so the reading rules are tested without a kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from socket import AF_INET6
from typing import Any, Protocol

from eipctl.core.link_choice import HostLinks, LinkFacts
from eipctl.net.link import IPAddress, parse_ip

IFF_UP = 0x1
"""The administrative state (``ip link set up``): carrier may come and go under it."""
RT_TABLE_MAIN = 254
RTN_UNICAST = 1


class LinkInventory(Protocol):
    async def host_links(self) -> HostLinks:
        """Every link of this network namespace; failures raise `NetError` subclasses."""
        ...


def _default_oif(route: Mapping[str, Any]) -> int | None:
    """The output link of a default route in the main table, or None for any other route
    (a multipath route goes by its first hop)."""
    if route.get("dst_len") != 0 or route.get("type") != RTN_UNICAST:
        return None
    if route.get("table") != RT_TABLE_MAIN:
        return None
    oif = route.get("oif")
    if oif is None:
        hops = route.get("multipath") or []
        oif = hops[0].get("oif") if hops else None
    return int(oif) if oif is not None else None


def host_links_of(
    links: Iterable[Mapping[str, Any]],
    addresses: Iterable[Mapping[str, Any]],
    routes: Iterable[Mapping[str, Any]],
) -> HostLinks:
    """`HostLinks` from RTM_NEWLINK, RTM_NEWADDR and RTM_NEWROUTE dumps; default routes
    IPv4 before IPv6, by metric within a family."""
    names: dict[int, str] = {}
    up: dict[int, bool] = {}
    for msg in links:
        name = msg.get("ifname")
        if name:
            names[int(msg["index"])] = str(name)
            up[int(msg["index"])] = bool(int(msg.get("flags") or 0) & IFF_UP)
    held: dict[int, set[IPAddress]] = {}
    for msg in addresses:
        raw = msg.get("local") or msg.get("address")
        if raw is not None:
            held.setdefault(int(msg["index"]), set()).add(parse_ip(str(raw)))
    defaults: list[tuple[int, int, int]] = []  # (IPv6?, metric, oif)
    for msg in routes:
        oif = _default_oif(msg)
        if oif is not None and oif in names:
            family = 1 if msg.get("family") == AF_INET6 else 0
            defaults.append((family, int(msg.get("priority") or 0), oif))
    defaults.sort(key=lambda d: (d[0], d[1]))  # stable: the kernel's order among equals
    return HostLinks(
        links=tuple(LinkFacts(names[i], up[i], frozenset(held.get(i, ()))) for i in sorted(names)),
        default_route_links=tuple(dict.fromkeys(names[oif] for _, _, oif in defaults)),
    )
