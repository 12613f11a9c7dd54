"""An in-memory `LinkBackend` with the kernel's rules, for unit tests and simulated nodes.

Same semantics as `netlink.NetlinkLinkBackend`: idempotent add that renews the lifetime,
remove that only touches managed addresses, lifetimes that end on their own. Time comes from
an injectable clock so tests can jump forward instead of sleeping.

Links may join a `Segment`, a simulated L2 domain with one router: `probe` finds other
members holding an address, and `announce` updates the router's neighbour table the way
Linux does with arp_accept=0 (existing entries only). That is enough for the sandbox to
show a failover moving an IP from one simulated node's MAC to another's.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from eipctl.core.link_choice import HostLinks, LinkFacts
from eipctl.net.errors import ForeignAddressError, LinkNotFoundError, SocketError
from eipctl.net.link import IPAddress, LinkAddress, ManagedAddress, ProbeConflict, parse_ip


@dataclass(slots=True)
class _Entry:
    ip: IPAddress
    prefixlen: int
    managed: bool
    expires_at: float | None  # None = forever (admin addresses)


class Segment:
    """A simulated L2 domain: member links and one router's neighbour table."""

    def __init__(self) -> None:
        self.members: list[tuple[MemoryLinkBackend, str]] = []
        self.router_neighbours: dict[IPAddress, bytes] = {}
        self.announcements: list[tuple[IPAddress, bytes]] = []

    def holders(self, ip: IPAddress) -> list[tuple[MemoryLinkBackend, str, bytes]]:
        """Members whose link currently carries `ip` (expired addresses excluded)."""
        out = []
        for backend, ifname in self.members:
            if backend.has_address(ifname, ip):
                out.append((backend, ifname, backend.mac_of(ifname)))
        return out

    def resolve(self, ip: str | IPAddress) -> bytes | None:
        """The router ARPs for `ip`: the first holder answers and the entry is created."""
        addr = parse_ip(ip)
        found = self.holders(addr)
        if found:
            self.router_neighbours[addr] = found[0][2]
        return self.router_neighbours.get(addr)

    def announced(self, ip: IPAddress, mac: bytes) -> None:
        self.announcements.append((ip, mac))
        if ip in self.router_neighbours:  # arp_accept=0: update, never create
            self.router_neighbours[ip] = mac


class MemoryLinkBackend:
    """Links are created with `create_link`; admins add addresses with `add_foreign`.

    `fail_next` lets a test make the next call raise a chosen `NetError`.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._links: dict[str, tuple[bytes, list[_Entry]]] = {}
        self._segments: dict[str, Segment] = {}
        self._down: set[str] = set()
        self.default_route_links: list[str] = []
        """`host_links`: where the default routes go, IPv4 ones first (a test sets it)."""
        self.fail_next: Exception | None = None
        self.closed = False

    # -- test/simulation helpers -------------------------------------------------------
    def create_link(
        self, ifname: str, mac: bytes | None = None, *, segment: Segment | None = None
    ) -> None:
        """Create an empty link, optionally on a `Segment`. Without `mac`, a random locally
        administered one (simulated nodes often share link names)."""
        if mac is None:
            mac = bytes([0x02, 0xE1, *random.randbytes(4)])
        self._links.setdefault(ifname, (mac, []))
        if segment is not None:
            self._segments[ifname] = segment
            segment.members.append((self, ifname))

    def delete_link(self, ifname: str) -> None:
        self._links.pop(ifname, None)
        self._down.discard(ifname)

    def set_link_up(self, ifname: str, up: bool) -> None:
        """Links are created up; `host_links` reports a link set down as down."""
        if up:
            self._down.discard(ifname)
        else:
            self._down.add(ifname)

    def has_address(self, ifname: str, ip: IPAddress) -> bool:
        if ifname not in self._links:
            return False
        return any(e.ip == ip for e in self._entries(ifname, inject=False))

    def mac_of(self, ifname: str) -> bytes:
        return self._links[ifname][0]

    def add_foreign(self, ifname: str, ip: str | IPAddress, prefixlen: int) -> None:
        """An address an administrator added (no marker, no lifetime)."""
        self._entries(ifname).append(_Entry(parse_ip(ip), prefixlen, False, None))

    # -- LinkBackend -----------------------------------------------------------------
    def _entries(self, ifname: str, *, inject: bool = True) -> list[_Entry]:
        if inject and self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        if ifname not in self._links:
            raise LinkNotFoundError(f"link {ifname}: no such link")
        entries = self._links[ifname][1]
        now = self._clock()
        entries[:] = [e for e in entries if e.expires_at is None or e.expires_at > now]
        return entries

    def _remaining(self, e: _Entry) -> float | None:
        return None if e.expires_at is None else max(0.0, e.expires_at - self._clock())

    async def add(self, ifname: str, ip: str | IPAddress, prefixlen: int, valid_lft: int) -> None:
        addr = parse_ip(ip)
        if valid_lft <= 0:
            raise ValueError(f"valid_lft must be a finite positive number, got {valid_lft}")
        entries = self._entries(ifname)
        for e in entries:
            if e.ip == addr and not e.managed:
                raise ForeignAddressError(f"{addr} on {ifname} was not added by eipctl")
        entries[:] = [e for e in entries if e.ip != addr]
        entries.append(_Entry(addr, prefixlen, True, self._clock() + valid_lft))

    async def remove(self, ifname: str, ip: str | IPAddress, prefixlen: int) -> bool:
        addr = parse_ip(ip)
        entries = self._entries(ifname)
        for e in entries:
            if e.ip == addr and e.prefixlen == prefixlen:
                if not e.managed:
                    raise ForeignAddressError(
                        f"{addr}/{prefixlen} on {ifname} was not added by eipctl"
                    )
                entries.remove(e)
                return True
        return False

    async def list_managed(self, ifname: str) -> set[ManagedAddress]:
        return {
            ManagedAddress(e.ip, e.prefixlen, self._remaining(e))
            for e in self._entries(ifname)
            if e.managed
        }

    async def list_all(self, ifname: str) -> list[LinkAddress]:
        return [
            LinkAddress(e.ip, e.prefixlen, e.managed, self._remaining(e))
            for e in self._entries(ifname)
        ]

    async def link_mac(self, ifname: str) -> bytes:
        self._entries(ifname)
        return self._links[ifname][0]

    async def ensure_dummy(self, ifname: str) -> bool:
        created = ifname not in self._links
        if created:
            self.create_link(ifname)
        self.set_link_up(ifname, True)
        return created

    async def link_exists(self, ifname: str) -> bool:
        return ifname in self._links

    async def host_links(self) -> HostLinks:
        """`inventory.LinkInventory`: the links, in creation order, with every address."""
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        return HostLinks(
            links=tuple(
                LinkFacts(name, name not in self._down, frozenset(e.ip for e in entries))
                for name in self._links
                for entries in [self._entries(name, inject=False)]
            ),
            default_route_links=tuple(self.default_route_links),
        )

    async def close(self) -> None:
        self.closed = True

    # -- Announcer / Prober --------------------------------------------------------------
    async def announce(
        self,
        ifname: str,
        ip: str | IPAddress,
        /,
        *,
        count: int = 3,
        interval: float = 0.0,
        still_ours: Callable[[], bool] | None = None,
        on_round: Callable[[], None] | None = None,
    ) -> int:
        """Like `announce.announce`: the address must be on the link; returns frames sent."""
        addr = parse_ip(ip)
        if not self.has_address(ifname, addr):
            raise SocketError(f"{addr} is not on {ifname}")
        segment = self._segments.get(ifname)
        rounds = 0
        for n in range(count):
            if n and interval:
                await asyncio.sleep(interval)
            if still_ours is not None and not still_ours():
                break
            if segment is not None:
                segment.announced(addr, self.mac_of(ifname))
            rounds += 1
            if on_round is not None:
                on_round()
        return rounds * (2 if addr.version == 4 else 1)

    async def probe(self, ifname: str, ip: str | IPAddress, /) -> ProbeConflict | None:
        """Like `probe.probe`: another member of the segment holding `ip` is a conflict."""
        addr = parse_ip(ip)
        self._entries(ifname)
        segment = self._segments.get(ifname)
        own = self.mac_of(ifname)
        for backend, other_if, mac in segment.holders(addr) if segment else []:
            if (backend, other_if) != (self, ifname) and mac != own:
                return ProbeConflict(addr, mac, 0.0)
        return None
