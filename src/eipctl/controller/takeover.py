"""Before an add: probe for another holder, and apply the take-over rule to an answer.

`core.conflict.conflict_decision` is the rule; this module gathers what it needs, only after
a probe was answered: which eipctl node publishes the answering MAC (one IpNode list), and
whether the claim's previous holder is live. The holder is judged by `core.liveness.Liveness`,
the scheduler's judge, on our clock, from a fresh read of its IpNode each time (so with
``fresh_reads``: see that module for why the stale-view rule is off here). A holder that
announced a restart grace is live until the grace ends, as it is to the scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

import structlog

from eipctl.core.conflict import ConflictDecision, HolderState, conflict_decision
from eipctl.core.ipnode import IpNode
from eipctl.core.link_plan import PlacedClaim
from eipctl.core.liveness import Liveness
from eipctl.core.resources import IpClaim
from eipctl.net.errors import NetError
from eipctl.net.frames import mac_to_str
from eipctl.net.link import Prober

from .metrics import TAKEOVERS

log = structlog.get_logger(__name__)

HolderNode = Callable[[str], Awaitable[IpNode | None]]
"""Another node's IpNode, read fresh from the API, or None if it has none."""

MacOwner = Callable[[str], Awaitable[str | None]]
"""The eipctl node whose IpNode publishes this MAC (aa:bb:..), or None."""

ReportConflict = Callable[[IpClaim, str, str], None]
"""(claim, reason, message): Conflict=True on the claim, and a retry soon."""

ReportFailure = Callable[..., None]
"""(op, error, **fields): a failed link operation, counted, logged and retried soon."""


class Takeover:
    """Decides, for one claim about to be added here, whether to add it now."""

    def __init__(
        self,
        node: str,
        *,
        node_timeout: float,
        prober: Prober | None,
        mac_owner: MacOwner | None,
        holder_node: HolderNode | None,
        clock: Callable[[], float] = time.monotonic,
        report_conflict: ReportConflict,
        report_failure: ReportFailure,
    ) -> None:
        self._node = node
        self._prober = prober
        self._mac_owner = mac_owner
        self._holder_node = holder_node
        self._holders = Liveness(node_timeout, fresh_reads=True)
        self._clock = clock
        self._report_conflict = report_conflict
        self._report_failure = report_failure
        self._waiting: dict[str, str] = {}  # claim -> conflict message, while it waits

    def keep_only(self, claims: Iterable[str]) -> None:
        """Forget the conflicts of claims no longer placed here."""
        keep = set(claims)
        self._waiting = {k: v for k, v in self._waiting.items() if k in keep}

    async def decide(self, placed: PlacedClaim, claim: IpClaim) -> ConflictDecision:
        """Probe first (unless shared or probing is off) and apply the take-over rule."""
        addr = placed.address
        if placed.shared or self._prober is None:
            return ConflictDecision.ADD
        try:
            conflict = await self._prober(addr.link, addr.ip)
        except NetError as exc:  # cannot probe: the API says the IP is ours, so add
            self._report_failure("probe", exc, claim=claim.name, address=str(addr))
            return ConflictDecision.ADD
        mac = None if conflict is None else conflict.mac
        holder = claim.status.bound_node or None
        liveness: HolderState | None = None
        answered_by = None if mac is None else await self._owner_of(mac)
        if mac is not None and not answered_by and holder and holder != self._node:
            liveness = await self._holder_state(holder)
        decision = conflict_decision(
            answered=mac is not None,
            previous_holder=holder,
            own_node=self._node,
            holder_liveness=liveness,
            answered_by=answered_by,
        )
        if decision is ConflictDecision.TAKE_OVER:
            TAKEOVERS.inc()
            log.warning(
                "address.takeover",
                claim=claim.name,
                address=str(addr),
                mac=mac_to_str(mac or b""),
                previous_holder=holder,
                answered_by=answered_by,
            )
        elif decision is ConflictDecision.WAIT:
            who = (
                f"previous holder {holder} is live"
                if liveness is HolderState.LIVE
                else ("no previous holder is known")
            )
            message = f"{mac_to_str(mac or b'')} already answers for {addr.ip}; {who}"
            # one warning per new situation; the retries that find it unchanged are debug
            level = log.debug if self._waiting.get(claim.name) == message else log.warning
            self._waiting[claim.name] = message
            level(
                "address.conflict",
                claim=claim.name,
                address=str(addr),
                mac=mac_to_str(mac or b""),
                previous_holder=holder,
                holder_liveness=liveness.value if liveness else None,
            )
            self._report_conflict(claim, "AddressInUse", message)
        if decision is not ConflictDecision.WAIT:
            self._waiting.pop(claim.name, None)
        return decision

    async def _owner_of(self, mac: bytes) -> str | None:
        if self._mac_owner is None:
            return None
        try:
            return await self._mac_owner(mac_to_str(mac))
        except Exception as exc:  # unknown: fall back to the heartbeat rule
            log.info("mac.lookup.failed", mac=mac_to_str(mac), error=repr(exc))
            return None

    async def _holder_state(self, holder: str) -> HolderState | None:
        """The previous holder judged from a fresh read of its IpNode; None if unknown.

        An absent IpNode is dead (forgotten, so its return counts as first sight).
        """
        if self._holder_node is None:
            return None
        try:
            node = await self._holder_node(holder)
        except Exception as exc:  # unknown: do not take over on a guess
            log.info("holder.lookup.failed", holder=holder, error=repr(exc))
            return None
        if node is None:
            self._holders.forget(holder)
            return HolderState.DEAD
        now = self._clock()
        status = node.status
        self._holders.observe(holder, status.heartbeat, now, grace=status.restart_grace)
        return HolderState.LIVE if self._holders.is_live(holder, now) else HolderState.DEAD
