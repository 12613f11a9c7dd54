"""The `LinkBackend` protocol: what the controller needs from a host link.

Two implementations: `netlink.NetlinkLinkBackend` (pyroute2, the real thing) and
`memory.MemoryLinkBackend` (unit tests and the sandbox's simulated nodes). Both keep the same
rules, so a test against the memory backend says something true about the real one:

- `add` is idempotent and renews the lifetime; it refuses an address someone else put there.
- `remove` is idempotent and only ever removes addresses eipctl added.
- Addresses eipctl adds carry a finite lifetime (seconds) that the kernel enforces, so a
  crashed controller's addresses disappear by themselves.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from eipctl.net.frames import mac_to_str

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_ip(value: str | IPAddress) -> IPAddress:
    """Accept an address as text or object; normalises IPv6 text to one form."""
    return value if not isinstance(value, str) else ipaddress.ip_address(value)


@dataclass(frozen=True, slots=True)
class ManagedAddress:
    """An address eipctl added. Equality is (ip, prefixlen) so sets compare desired vs actual.

    `valid_lft` is the remaining lifetime in seconds as last read (None = forever, which
    eipctl never sets); it is excluded from equality because it changes every second.
    """

    ip: IPAddress
    prefixlen: int
    valid_lft: float | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class LinkAddress:
    """Any address on a link, eipctl's or not (`managed` tells which)."""

    ip: IPAddress
    prefixlen: int
    managed: bool = field(compare=False)
    valid_lft: float | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ProbeConflict:
    """Another host answers for an address eipctl is about to add."""

    ip: IPAddress
    mac: bytes
    after: float  # seconds from the first probe to the answer

    @property
    def mac_str(self) -> str:
        return mac_to_str(self.mac)


class Announcer(Protocol):
    """Announce an address already on the link; returns the number of frames sent.

    Real: `eipctl.net.announce.announce`; simulated: `MemoryLinkBackend.announce`.
    """

    async def __call__(
        self,
        ifname: str,
        ip: str | IPAddress,
        /,
        *,
        still_ours: Callable[[], bool] | None = None,
        on_round: Callable[[], None] | None = None,
    ) -> int:
        """`still_ours()`, when given, is asked before every round; False ends the schedule.
        `on_round()`, when given, is called after each round is out."""
        ...


class Prober(Protocol):
    """Ask the link whether another MAC holds an address; None when it looks free.

    Real: `eipctl.net.probe.probe`; simulated: `MemoryLinkBackend.probe`.
    """

    async def __call__(self, ifname: str, ip: str | IPAddress, /) -> ProbeConflict | None: ...


class LinkBackend(Protocol):
    """Host link operations the controller uses.

    Failures raise `NetError` subclasses only; `ValueError` means a bad argument (a bug).
    """

    async def add(self, ifname: str, ip: str | IPAddress, prefixlen: int, valid_lft: int) -> None:
        """Ensure the address is on the link, managed, with `valid_lft` seconds to live.

        Re-adding renews the lifetime (this is the heartbeat of an address). A managed copy of
        the same IP with another prefix length is replaced. Raises `ForeignAddressError` if
        the IP is already there but not eipctl's.
        """
        ...

    async def remove(self, ifname: str, ip: str | IPAddress, prefixlen: int) -> bool:
        """Remove a managed address; True if it was there. Absent is not an error.

        Raises `ForeignAddressError` if the address is an admin's, or (IPv4) if deleting
        it would make the kernel drop admin addresses with it (see docs/networking.md).
        """
        ...

    async def list_managed(self, ifname: str) -> set[ManagedAddress]:
        """The addresses eipctl added to the link that are still alive."""
        ...

    async def list_all(self, ifname: str) -> list[LinkAddress]:
        """Every address on the link, for status reporting and conflict checks."""
        ...

    async def link_mac(self, ifname: str) -> bytes:
        """The link's 6-byte MAC address (announcements carry it)."""
        ...

    async def link_exists(self, ifname: str) -> bool:
        """Whether a link of that name exists."""
        ...

    async def ensure_dummy(self, ifname: str) -> bool:
        """A dummy link `ifname` exists and is up; True if this call created it. An existing
        link of another kind is left as it is (an administrator may have made it)."""
        ...

    async def close(self) -> None:
        """Release the backend's resources; idempotent."""
        ...
