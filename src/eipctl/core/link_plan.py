"""What the controller must do to a node's links: a pure plan, no I/O.

`plan()`: the claims placed on this node (desired) against the addresses on its links
(observed) give the actions: addresses to add (then announce), to keep (renew their
lifetime only; never removed and re-added, never probed again), and to remove. Only
addresses eipctl added are ever removed; an administrator's address is never touched, and
a claim for an IP an administrator holds is reported as blocked instead.

The start-up purge is the same function run once, after the claim cache has synced:
whatever is managed but not placed here goes, whatever is placed here stays. While the node
is fenced (`core.fence`), `plan(..., fenced=True)` removes every managed address and adds
none.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_sort_key(ip: IPAddress) -> tuple[int, int]:
    """Orders IPv4 before IPv6 (Python refuses to compare them directly)."""
    return (ip.version, int(ip))


@dataclass(frozen=True, slots=True)
class Address:
    """One address on one link: equality is (link, ip, prefixlen)."""

    link: str
    ip: IPAddress
    prefixlen: int

    def sort_key(self) -> tuple[str, int, int, int]:
        return (self.link, self.ip.version, int(self.ip), self.prefixlen)

    def __str__(self) -> str:
        return f"{self.ip}/{self.prefixlen}@{self.link}"


@dataclass(frozen=True, slots=True)
class PlacedClaim:
    """A claim whose spec.nodeName is this node, resolved to the address it wants.

    `shared`: added without a probe (`core.claims.skips_probe`): other holders are expected.
    `mode`: the name of the announce mode that put the address where it is (``l2``, ``bgp``:
    `controller/announcing/`); `probe`: whether that mode probes before an add (a BGP host
    route is on no segment where another node could answer for it).
    """

    name: str
    address: Address
    shared: bool = False
    mode: str = "l2"
    probe: bool = True


@dataclass(frozen=True, slots=True)
class LinkView:
    """What one link holds now: eipctl's addresses and everyone else's IPs."""

    managed: frozenset[tuple[IPAddress, int]] = frozenset()
    foreign: frozenset[IPAddress] = frozenset()


class BlockReason(enum.StrEnum):
    ADMIN_ADDRESS = "AdminAddress"  # the IP is on the link, put there by someone else
    LINK_MISSING = "LinkMissing"  # the claim's link does not exist on this node
    DUPLICATE_IP = "DuplicateIP"  # another claim placed here wants the same IP


@dataclass(frozen=True, slots=True)
class Blocked:
    claim: PlacedClaim
    reason: BlockReason


@dataclass(frozen=True, slots=True)
class LinkPlan:
    """Actions for one pass. Apply `add` first, then `remove` (a claim that moved between
    links is held on the new link before it leaves the old one); `keep` only renews.

    An `add` whose IP is managed on the same link with another prefix length replaces it
    (LinkBackend.add does so), so that old entry is not listed in `remove`.
    """

    add: tuple[PlacedClaim, ...] = ()
    keep: tuple[PlacedClaim, ...] = ()
    remove: tuple[Address, ...] = ()
    blocked: tuple[Blocked, ...] = ()
    merged: tuple[PlacedClaim, ...] = ()
    """Claims whose IP another claim of the same IP (the claim or its per-node copy) holds
    here: nothing to do, nothing to report."""

    @property
    def empty(self) -> bool:
        return not (self.add or self.remove or self.blocked)


def _base_name(claim: PlacedClaim) -> str:
    """The IP's own claim name: a per-node copy is ``<claim>.<node>`` (`core.naming`)."""
    return claim.name.split(".", 1)[0]


def _winners(
    desired: Iterable[PlacedClaim],
) -> tuple[list[PlacedClaim], list[Blocked], list[PlacedClaim]]:
    """One claim per IP: the smallest name wins, deterministically; the rest are blocked,
    except a claim and its own per-node copy: while a pool's placement switches to or from
    ``all`` both name this node for a moment, and that is one IP held once, no conflict."""
    by_ip: dict[IPAddress, list[PlacedClaim]] = {}
    for claim in desired:
        by_ip.setdefault(claim.address.ip, []).append(claim)
    winners: list[PlacedClaim] = []
    blocked: list[Blocked] = []
    merged: list[PlacedClaim] = []
    for claims in by_ip.values():
        ordered = sorted(claims, key=lambda c: c.name)
        winner = ordered[0]
        winners.append(winner)
        for other in ordered[1:]:
            if _base_name(other) == _base_name(winner):
                merged.append(other)
            else:
                blocked.append(Blocked(other, BlockReason.DUPLICATE_IP))
    return winners, blocked, merged


def plan(
    desired: Iterable[PlacedClaim],
    observed: Mapping[str, LinkView],
    *,
    fenced: bool = False,
) -> LinkPlan:
    """Compare the claims placed here with the links and return the actions.

    `observed` has one entry per link that exists (a link absent from it is missing). When
    `fenced`, nothing is desired: every managed address is removed.
    """
    add: list[PlacedClaim] = []
    keep: list[PlacedClaim] = []
    blocked: list[Blocked] = []
    merged: list[PlacedClaim] = []
    wanted: set[tuple[str, IPAddress]] = set()
    if not fenced:
        winners, blocked, merged = _winners(desired)
        for claim in winners:
            addr = claim.address
            view = observed.get(addr.link)
            if view is None:
                blocked.append(Blocked(claim, BlockReason.LINK_MISSING))
                continue
            if addr.ip in view.foreign:
                blocked.append(Blocked(claim, BlockReason.ADMIN_ADDRESS))
                continue
            wanted.add((addr.link, addr.ip))
            if (addr.ip, addr.prefixlen) in view.managed:
                keep.append(claim)
            else:
                add.append(claim)
    remove = [
        Address(link, ip, prefixlen)
        for link, view in observed.items()
        for ip, prefixlen in view.managed
        if (link, ip) not in wanted and ip not in view.foreign
    ]
    return LinkPlan(
        add=tuple(sorted(add, key=_by_claim)),
        keep=tuple(sorted(keep, key=_by_claim)),
        remove=tuple(sorted(remove, key=Address.sort_key)),
        blocked=tuple(sorted(blocked, key=lambda b: _by_claim(b.claim))),
        merged=tuple(sorted(merged, key=_by_claim)),
    )


def _by_claim(claim: PlacedClaim) -> tuple[tuple[str, int, int, int], str]:
    return (claim.address.sort_key(), claim.name)


def links_to_inspect(
    default_link: str, desired: Iterable[PlacedClaim], remembered: Iterable[str] = ()
) -> frozenset[str]:
    """The links a pass looks at: the default, every claim's link, and links this process
    put addresses on before. A managed address left on another link by an earlier process
    is not seen, but it carries a finite lifetime and expires on its own."""
    return frozenset({default_link, *(c.address.link for c in desired), *remembered})
