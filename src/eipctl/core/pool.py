"""IP pool math: parse an IpClaimPool spec, test membership, hand out the lowest free IP.

Pure: values in, values out, stdlib `ipaddress` only. The allocator process rebuilds a
`PoolAllocator` from the existing IpClaims (``reserve``) before serving, then calls
``allocate``; the IpClaim create is the real reservation, this is the in-memory picture.

Allocatable space (decisions the design leaves open, made here):

- ``spec.ranges`` given: exactly those ``[first, last]`` ranges (inclusive, inside the cidr,
  overlaps merged). Ranges are taken at their word, even if they include the network or
  broadcast address; use ``spec.exclude`` to carve those out.
- no ranges (None or empty): the whole cidr minus the addresses a host must not hold:
  IPv4 network and broadcast; IPv6 the subnet-router anycast address (all host bits zero,
  RFC 4291 2.6.1; Linux routers answer it). IPv6 has no broadcast, so the last address is
  usable. Point-to-point prefixes keep every address: /31 (RFC 3021), /127 (RFC 6164),
  and /32 or /128 is a single-address pool.
- ``spec.exclude`` (IPs or CIDRs) is then removed. An entry must share some address with the
  cidr; one wholly outside is almost surely a typo and is rejected.

The space is a sorted list of integer intervals (`core.intervals`), so a /64 is never
enumerated: allocation is a bisect over the sorted in-use list.
"""

from __future__ import annotations

import ipaddress
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from eipctl.core import intervals
from eipctl.core.intervals import Interval, Span

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network
IpLike = str | IPv4Address | IPv6Address
"""What callers may pass where an address is expected: text from a CR, or a parsed address."""

__all__ = [
    "IPAddress",
    "IPNetwork",
    "IpLike",
    "Overlap",
    "Pool",
    "PoolAllocator",
    "PoolError",
    "find_overlaps",
]


class PoolError(ValueError):
    """A pool spec or an address that cannot be used; the message names the field.

    ``field`` is the spec path (``spec.cidr``, ``spec.ranges[1]``, ``spec.exclude[0]``) or
    ``ip``, so the allocator can put the reason straight into the pool's Ready condition.
    """

    def __init__(self, pool: str, field: str, reason: str) -> None:
        super().__init__(f"pool {pool!r}: {field}: {reason}")
        self.pool = pool
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Pool:
    """An immutable, validated pool: its cidr and the allocatable addresses as intervals."""

    name: str
    network: IPNetwork
    span: Span
    """Allocatable addresses as sorted, disjoint, inclusive integer intervals."""

    @classmethod
    def parse(
        cls,
        name: str,
        cidr: str,
        ranges: Sequence[Sequence[str]] | None = None,
        exclude: Sequence[str] | None = None,
    ) -> Pool:
        """Validate an IpClaimPool spec; raise `PoolError` naming the first bad field."""
        network = _parse_network(name, "spec.cidr", cidr, None)
        for field, value in (("spec.ranges", ranges), ("spec.exclude", exclude)):
            if isinstance(value, str):  # a str is a Sequence too: would split into characters
                raise PoolError(name, field, f"expected a list, got {value!r}")
        if ranges:
            base = intervals.normalize(
                _parse_range(name, f"spec.ranges[{i}]", item, network)
                for i, item in enumerate(ranges)
            )
        else:
            base = _default_span(network)
        cut = intervals.normalize(
            _parse_exclude(name, f"spec.exclude[{i}]", item, network)
            for i, item in enumerate(exclude or ())
        )
        return cls(name=name, network=network, span=intervals.subtract(base, cut))

    @property
    def version(self) -> int:
        """4 or 6."""
        return self.network.version

    @cached_property
    def size(self) -> int:
        """How many addresses the pool can hand out (after ranges and exclusions)."""
        return intervals.total(self.span)

    @property
    def ranges(self) -> tuple[tuple[IPAddress, IPAddress], ...]:
        """The allocatable space as address pairs, for status and logs."""
        return tuple((self.address(first), self.address(last)) for first, last in self.span)

    def contains(self, ip: IpLike) -> bool:
        """Tell whether the pool may hand out ``ip`` (False for the other family)."""
        address = _parse_ip(self.name, ip)
        return address.version == self.version and intervals.member(self.span, int(address))

    def __contains__(self, ip: object) -> bool:
        return isinstance(ip, str | IPv4Address | IPv6Address) and self.contains(ip)

    def address(self, value: int) -> IPAddress:
        """Turn an integer of this pool's family back into an address.

        ``ipaddress.ip_address(5)`` would guess IPv4, so the family comes from the pool.
        """
        if self.version == 4:
            return IPv4Address(value)
        return IPv6Address(value)


class PoolAllocator:
    """The in-use addresses of one pool; hands out the lowest free one.

    Mutable on purpose (one per pool, owned by the allocator loop); it copies what it is
    given and never mutates its inputs. In-use addresses are a sorted list of ints, so
    ``allocate`` is O(log n) per interval of the pool it has to look at.
    """

    def __init__(self, pool: Pool, used: Iterable[IpLike] = ()) -> None:
        """Start from ``used`` (e.g. the IPs of existing IpClaims); each must be in the pool.

        Sorted once, not inserted one by one: a rebuild from 100k claims stays O(n log n).
        Duplicates are tolerated, as in `reserve`.
        """
        self.pool = pool
        self._used: list[int] = sorted({self._checked(ip) for ip in used})

    @property
    def used(self) -> int:
        """Addresses currently taken."""
        return len(self._used)

    @property
    def free(self) -> int:
        """Addresses still available; ``used + free == pool.size``."""
        return self.pool.size - len(self._used)

    def allocate(self) -> IPAddress | None:
        """Take and return the lowest free address, or None when the pool is full."""
        value = intervals.lowest_free(self.pool.span, self._used)
        if value is None:
            return None
        insort(self._used, value)
        return self.pool.address(value)

    def reserve(self, ip: IpLike) -> bool:
        """Take a specific address (a literal request, or a claim seen at start).

        Returns False if it was already taken (idempotent, so replayed events are harmless);
        raises `PoolError` if the pool may not hand it out (other family, outside, excluded).
        """
        value = self._checked(ip)
        i = bisect_left(self._used, value)
        if i < len(self._used) and self._used[i] == value:
            return False
        self._used.insert(i, value)
        return True

    def release(self, ip: IpLike) -> bool:
        """Give an address back; False if it was not taken (or not this pool's)."""
        address = _parse_ip(self.pool.name, ip)
        if address.version != self.pool.version:
            return False
        value = int(address)
        i = bisect_left(self._used, value)
        if i < len(self._used) and self._used[i] == value:
            del self._used[i]
            return True
        return False

    def is_used(self, ip: IpLike) -> bool:
        """Tell whether ``ip`` is currently taken in this pool."""
        address = _parse_ip(self.pool.name, ip)
        if address.version != self.pool.version:
            return False
        i = bisect_left(self._used, int(address))
        return i < len(self._used) and self._used[i] == int(address)

    def used_addresses(self) -> Iterator[IPAddress]:
        """The taken addresses in ascending order (a snapshot)."""
        return (self.pool.address(value) for value in tuple(self._used))

    def _checked(self, ip: IpLike) -> int:
        address = _parse_ip(self.pool.name, ip)
        if address.version != self.pool.version:
            raise PoolError(self.pool.name, "ip", f"{address} is not IPv{self.pool.version}")
        if not intervals.member(self.pool.span, int(address)):
            raise PoolError(
                self.pool.name, "ip", f"{address} is outside the pool or excluded from it"
            )
        return int(address)


@dataclass(frozen=True)
class Overlap:
    """Two pools that could hand out the same address; ``sample`` is the lowest such."""

    first: str
    second: str
    sample: IPAddress


def find_overlaps(pools: Iterable[Pool]) -> list[Overlap]:
    """Report every pair of pools whose allocatable addresses intersect.

    Compares allocatable space, not cidrs: two pools may split one /24 with disjoint ranges.
    Pairs come in input order (``first`` precedes ``second``). Pairwise two-pointer walks:
    O(P^2 * intervals), fine for the tens of pools a cluster has.
    """
    listed = tuple(pools)
    found: list[Overlap] = []
    for i, a in enumerate(listed):
        for b in listed[i + 1 :]:
            if a.version != b.version:
                continue
            common = intervals.intersect(a.span, b.span)
            if common:
                found.append(Overlap(a.name, b.name, a.address(common[0][0])))
    return found


def _parse_ip(pool: str, ip: IpLike, field: str = "ip") -> IPAddress:
    if isinstance(ip, IPv4Address | IPv6Address):
        return ip
    if not isinstance(ip, str):
        raise PoolError(pool, field, f"expected an IP address string, got {ip!r}")
    try:
        return ipaddress.ip_address(ip)
    except ValueError:
        raise PoolError(pool, field, f"malformed IP address {ip!r}") from None


def _parse_network(pool: str, field: str, text: object, within: IPNetwork | None) -> IPNetwork:
    if not isinstance(text, str):
        raise PoolError(pool, field, f"expected a CIDR string, got {text!r}")
    try:
        network = ipaddress.ip_network(text)
    except ValueError:
        raise PoolError(pool, field, _network_problem(text)) from None
    if within is not None and network.version != within.version:
        raise PoolError(pool, field, f"{text} is IPv{network.version}, cidr is IPv{within.version}")
    return network


def _network_problem(text: str) -> str:
    """Say why ``ip_network(text)`` refused: host bits are worth a hint, the rest is malformed."""
    try:
        loose = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return f"malformed CIDR {text!r}"
    return f"{text} has host bits set (did you mean {loose}?)"


def _parse_range(pool: str, field: str, item: object, network: IPNetwork) -> Interval:
    if isinstance(item, str) or not isinstance(item, Sequence) or len(item) != 2:
        raise PoolError(pool, field, f"expected [first, last], got {item!r}")
    first, last = (_in_network(pool, field, _parse_ip(pool, ip, field), network) for ip in item)
    if first > last:
        raise PoolError(pool, field, f"first {item[0]} is above last {item[1]}")
    return first, last


def _in_network(pool: str, field: str, address: IPAddress, network: IPNetwork) -> int:
    if address.version != network.version:
        raise PoolError(
            pool, field, f"{address} is IPv{address.version}, cidr is IPv{network.version}"
        )
    if address not in network:
        raise PoolError(pool, field, f"{address} is outside cidr {network}")
    return int(address)


def _parse_exclude(pool: str, field: str, item: object, network: IPNetwork) -> Interval:
    excluded = _parse_network(pool, field, item, network)
    first = max(int(excluded.network_address), int(network.network_address))
    last = min(int(excluded.broadcast_address), int(network.broadcast_address))
    if first > last:
        raise PoolError(pool, field, f"{item} is outside cidr {network}")
    return first, last


def _default_span(network: IPNetwork) -> Span:
    """Whole cidr minus network/broadcast (v4) or subnet-router anycast (v6); see module doc."""
    first, last = int(network.network_address), int(network.broadcast_address)
    host_bits = network.max_prefixlen - network.prefixlen
    if host_bits <= 1:
        return ((first, last),)
    if network.version == 4:
        return ((first + 1, last - 1),)
    return ((first + 1, last),)
