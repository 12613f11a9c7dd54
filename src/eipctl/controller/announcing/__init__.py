"""How the network learns that this node answers for an address: one interface, one module
per mode.

After MetalLB's speaker, which gives each announcement mode the same small interface: the
link reconciler asks a claim's mode where its address goes (`address_for`), lets it make what
it needs first (`prepare`), and tells it what happened to the address (`added`, `seen_again`,
`withdrawn`); the mode does the announcing. Layer 2 (`layer2.Layer2`: gratuitous ARP / NA on
the address's link) and BGP (`bgp_routes.BgpRoutes`: a host route on a dummy link that the
node's FRR redistributes; FRR's configuration is `controller/bgp.py`'s) are equal
implementations. A third mode (a cloud API, EVPN) is a module here and a line in
`LinkReconciler`, not a branch in its pass.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import structlog

from eipctl.core.claims import skips_probe
from eipctl.core.fields import ResourceError, name_of
from eipctl.core.link_plan import Address, PlacedClaim
from eipctl.core.naming import LABEL_POOL
from eipctl.core.resources import IpClaim
from eipctl.kube.client import Obj
from eipctl.net.link import IPAddress

log = structlog.get_logger(__name__)

LAYER2 = "l2"
"""The mode of a claim whose pool names no other (or that has no pool)."""


class AnnounceMode(Protocol):
    """One way of announcing the addresses this node holds."""

    @property
    def name(self) -> str:
        """The pool's ``spec.announce`` value that selects this mode."""
        ...

    @property
    def probes(self) -> bool:
        """Whether an add probes first and applies the take-over rule: the address is on a
        segment where another node could be answering for it."""
        ...

    def address_for(self, claim: IpClaim, ip: IPAddress, default_link: str) -> Address:
        """Where the claim's address goes: link and prefix length."""
        ...

    def has_mac(self, link: str) -> bool:
        """Whether `link`'s MAC answers for the addresses on it (published on the IpNode)."""
        ...

    async def prepare(self) -> None:
        """Make what this mode's addresses need, before a pass adds or renews any."""
        ...

    def added(self, addr: Address, claim: str, bound: Callable[[], None]) -> None:
        """`addr` was put on its link; call `bound` once the network may know it."""
        ...

    def seen_again(self, addr: Address, claim: str) -> None:
        """`claim` is newly placed here and its address was on the link already (it may have
        been announced from another node meanwhile)."""
        ...

    def withdrawn(self, addr: Address) -> None:
        """`addr` is moving away or going: announce it no more."""
        ...

    async def close(self) -> None: ...


class PoolModes(Protocol):
    """The announce mode of each pool (``l2`` or ``bgp``), from a pool cache."""

    @property
    def has_synced(self) -> bool: ...
    def announce_of(self, pool: str) -> str: ...


class AnnounceModes:
    """The modes this controller runs, and which one each claim uses (its pool's)."""

    def __init__(self, modes: Sequence[AnnounceMode], pools: PoolModes | None = None) -> None:
        self._modes = {mode.name: mode for mode in modes}
        if LAYER2 not in self._modes:
            raise ValueError("the layer 2 mode is every claim's fallback: it must be there")
        self._pools = pools

    @property
    def has_synced(self) -> bool:
        """False while the pools (and so the modes of their claims) are not known yet."""
        return self._pools is None or self._pools.has_synced

    def of(self, claim: IpClaim) -> AnnounceMode:
        """The claim's pool's mode; layer 2 for a pool that names a mode not running here
        (BGP without --bgp-link) or none."""
        if self._pools is None:
            return self._modes[LAYER2]
        pool = (claim.metadata.get("labels") or {}).get(LABEL_POOL, "")
        return self._modes.get(self._pools.announce_of(pool), self._modes[LAYER2])

    def by_name(self, name: str) -> AnnounceMode:
        return self._modes[name]

    def has_mac(self, link: str) -> bool:
        return all(mode.has_mac(link) for mode in self._modes.values())

    def withdrawn(self, addr: Address) -> None:
        """Told to every mode: an address seen on a link carries no mode of its own."""
        for mode in self._modes.values():
            mode.withdrawn(addr)

    async def close(self) -> None:
        for mode in self._modes.values():
            await mode.close()

    def placed_claims(
        self, objects: Iterable[Obj], node: str, default_link: str
    ) -> tuple[list[PlacedClaim], dict[str, IpClaim]]:
        """The claims whose spec.nodeName is `node`, as addresses (where their mode puts
        them); and the parsed claims by name. A claim that does not parse is logged and
        skipped (it holds nothing here)."""
        placed: list[PlacedClaim] = []
        parsed: dict[str, IpClaim] = {}
        for obj in objects:
            try:
                claim = IpClaim.from_dict(obj)
            except (ResourceError, ValueError) as exc:
                log.warning("claim.unparsable", claim=name_of(obj), error=str(exc))
                continue
            if claim.spec.node_name != node:
                continue
            mode = self.of(claim)
            address = mode.address_for(claim, ipaddress.ip_address(claim.spec.ip), default_link)
            shared = skips_probe(claim.name, claim.spec.node_bound)
            placed.append(
                PlacedClaim(claim.name, address, shared, mode=mode.name, probe=mode.probes)
            )
            parsed[claim.name] = claim
        return placed, parsed
