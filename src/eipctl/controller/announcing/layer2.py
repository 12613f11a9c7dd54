"""Layer 2: the address on the node's link, told to the segment by gratuitous ARP / NA."""

from __future__ import annotations

from collections.abc import Callable

import structlog

from eipctl.core.link_plan import Address
from eipctl.core.resources import IpClaim
from eipctl.net.link import IPAddress

from ..announcements import Announcements

log = structlog.get_logger(__name__)


class Layer2:
    """Every claim's mode unless its pool says otherwise; probes before it adds."""

    name = "l2"
    probes = True

    def __init__(self, announcements: Announcements) -> None:
        self._announcements = announcements

    def address_for(self, claim: IpClaim, ip: IPAddress, default_link: str) -> Address:
        prefixlen = claim.spec.prefix_length or ip.max_prefixlen
        return Address(claim.spec.link or default_link, ip, prefixlen)

    def has_mac(self, link: str) -> bool:
        return True

    async def prepare(self) -> None:
        return None

    def added(self, addr: Address, claim: str, bound: Callable[[], None]) -> None:
        # Bound once the first round is out (`Announcements.start`)
        self._announcements.start(addr.link, addr.ip, claim, on_first=bound)

    def seen_again(self, addr: Address, claim: str) -> None:
        log.info("address.reannounced", claim=claim, address=str(addr))
        self._announcements.start(addr.link, addr.ip, claim)

    def withdrawn(self, addr: Address) -> None:
        self._announcements.stop(addr.link, addr.ip)

    async def close(self) -> None:
        await self._announcements.close()
