"""Make before break: an address whose claim moved to another node stays until that node
reports it Bound, so a move (or this controller's restart) never leaves a gap in which nobody
answers.

The address is held for at most one --address-lifetime from when the move was first seen,
and its netlink lifetime is renewed to what is left of that hold (`remaining`): a slow new
holder still finds it here, and one that never binds cannot keep it here for long, even if
this controller dies meanwhile. Fencing and releases never wait for this.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import structlog

from eipctl.core.claims import is_bound_on, node_of
from eipctl.core.link_plan import Address
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import Obj

from .metrics import HANDOVER_SECONDS, HANDOVERS

log = structlog.get_logger(__name__)

ClaimLookup = Callable[[str], Awaitable[Obj | None]]
"""A fresh read of one claim by name (None if it does not exist)."""


class Handover:
    def __init__(
        self,
        node: str,
        lookup: ClaimLookup | None,
        max_hold: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node = node
        self._lookup = lookup
        self._max_hold = max_hold
        self._clock = clock
        self._since: dict[Address, float] = {}

    def remaining(self, addr: Address) -> float:
        """Seconds left of `addr`'s hold (0 when it is not held)."""
        since = self._since.get(addr)
        return 0.0 if since is None else max(0.0, self._max_hold - (self._clock() - since))

    async def waiting(self, addr: Address) -> bool:
        """True while `addr` must stay on the link for its claim's new node to bind it."""
        if self._lookup is None:
            return False
        now = self._clock()
        first = addr not in self._since
        since = self._since.setdefault(addr, now)
        if now - since >= self._max_hold:
            self._end(addr, "expired")
            log.warning("address.handover.expired", address=str(addr), held=self._max_hold)
            return False
        try:
            obj = await self._lookup(claim_name_for(addr.ip))
        except Exception as exc:  # cannot tell: do not hold on a guess
            log.info("handover.lookup.failed", address=str(addr), error=repr(exc))
            self._end(addr, "unknown")
            return False
        new_node = node_of(obj or {})
        if obj is None or not new_node or new_node == self._node:
            # gone, unplaced, or back here: nobody to wait for (a hold only if one began)
            self._end(addr, "released" if not first else "")
            return False
        if is_bound_on(obj, new_node):
            HANDOVER_SECONDS.observe(now - since)
            self._end(addr, "bound")
            return False
        log.info("address.handover.waiting", address=str(addr), new_node=new_node)
        return True

    def _end(self, addr: Address, result: str) -> None:
        """The hold of `addr` is over; counted by `result` ("" counts nothing: a claim
        released before any hold began)."""
        if self._since.pop(addr, None) is not None and result:
            HANDOVERS.labels(result).inc()
