"""BGP: the address as a host route on a dummy link, which the node's FRR redistributes.

eipctl never speaks BGP: what FRR is told (peers, pools, passwords) is `controller/bgp.py`'s
FrrConfigWriter. No probe (nothing on a segment answers for a host route) and no ARP / NA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import structlog

from eipctl.core.link_plan import Address
from eipctl.core.resources import IpClaim
from eipctl.net.errors import NetError
from eipctl.net.link import IPAddress, LinkBackend

log = structlog.get_logger(__name__)


class ReportFailure(Protocol):
    def __call__(self, op: str, exc: NetError, **fields: str) -> None: ...


class BgpRoutes:
    """The mode of pools with ``spec.announce: bgp`` (needs --bgp-link)."""

    name = "bgp"
    probes = False

    def __init__(
        self,
        link: str,
        backend: LinkBackend,
        node: str,
        report_failure: ReportFailure,
    ) -> None:
        """`report_failure(op, error, link=...)`: a link operation failed (counted, retried)."""
        self.link = link
        self._backend = backend
        self._node = node
        self._report_failure = report_failure

    def address_for(self, claim: IpClaim, ip: IPAddress, default_link: str) -> Address:
        # a host route: the pool's prefixLength and the claim's link do not apply
        return Address(self.link, ip, ip.max_prefixlen)

    def has_mac(self, link: str) -> bool:
        return link != self.link

    async def prepare(self) -> None:
        """The BGP link exists and is up (a dummy link: no neighbours, no ARP), so its
        addresses become connected routes the node's FRR redistributes."""
        try:
            if await self._backend.ensure_dummy(self.link):
                log.info("bgp.link_created", link=self.link, node=self._node)
        except NetError as exc:
            self._report_failure("create-link", exc, link=self.link)

    def added(self, addr: Address, claim: str, bound: Callable[[], None]) -> None:
        bound()  # announced by FRR from the kernel's route as soon as it is there

    def seen_again(self, addr: Address, claim: str) -> None:
        return None  # the route was never anywhere else's to announce

    def withdrawn(self, addr: Address) -> None:
        return None  # FRR withdraws the route when the address goes

    async def close(self) -> None:
        return None
