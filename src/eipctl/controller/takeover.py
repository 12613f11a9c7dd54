"""Before an add: probe for another holder, and apply the take-over rule to an answer.

`core.conflict` is the rule (`probe_first`, `conflict_decision`); this module gathers what
it needs: whether the claim's previous holder is live, and which eipctl node publishes the
answering MAC (one IpNode list, only after a probe was answered). We do not judge the holder
ourselves: the scheduler leader does, from its liveness probes, and publishes the verdict as
the holder IpNode's Live condition, which we read fresh (one GET) for every claim that had
another holder.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import structlog

from eipctl.core.claims import node_of
from eipctl.core.conditions import find_condition
from eipctl.core.conflict import ConflictDecision, HolderState, conflict_decision, probe_first
from eipctl.core.fields import Obj
from eipctl.core.ipnode import LIVE, IpNode
from eipctl.core.link_plan import PlacedClaim
from eipctl.core.resources import IpClaim
from eipctl.net.errors import NetError
from eipctl.net.frames import mac_to_str
from eipctl.net.link import Prober

from .metrics import PROBES_SKIPPED, TAKEOVERS

log = structlog.get_logger(__name__)

HolderNode = Callable[[str], Awaitable[IpNode | None]]
"""Another node's IpNode, read fresh from the API, or None if it has none."""

ClaimLookup = Callable[[str], Awaitable[Obj | None]]
"""An IpClaim read fresh from the API by name, or None if it is gone."""

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
        prober: Prober | None,
        mac_owner: MacOwner | None,
        holder_node: HolderNode | None,
        report_conflict: ReportConflict,
        report_failure: ReportFailure,
        claim_lookup: ClaimLookup | None = None,
    ) -> None:
        self._node = node
        self._claim_lookup = claim_lookup
        self._prober = prober
        self._mac_owner = mac_owner
        self._holder_node = holder_node
        self._report_conflict = report_conflict
        self._report_failure = report_failure
        self._waiting: dict[str, str] = {}  # claim -> conflict message, while it waits

    def keep_only(self, claims: Iterable[str]) -> None:
        """Forget the conflicts of claims no longer placed here."""
        keep = set(claims)
        self._waiting = {k: v for k, v in self._waiting.items() if k in keep}

    async def decide(self, placed: PlacedClaim, claim: IpClaim) -> ConflictDecision:
        """Probe first (unless shared, its mode does not probe (BGP), probing is off, or the
        previous holder is declared dead) and apply the take-over rule."""
        addr = placed.address
        if placed.shared or not placed.probe or self._prober is None:
            return ConflictDecision.ADD
        # bound elsewhere still, or moved off a node (the move's status write keeps it)
        holder = claim.status.bound_node or claim.status.previous_node or None
        liveness: HolderState | None = None
        if holder and holder != self._node:
            liveness = await self._holder_state(holder)
        if not probe_first(previous_holder=holder, own_node=self._node, holder_liveness=liveness):
            PROBES_SKIPPED.inc()
            log.info(
                "address.probe_skipped",
                claim=claim.name,
                address=str(addr),
                previous_holder=holder,
                reason="holder-dead",
            )
            self._waiting.pop(claim.name, None)
            return ConflictDecision.ADD
        try:
            conflict = await self._prober(addr.link, addr.ip)
        except NetError as exc:  # cannot probe: the API says the IP is ours, so add
            self._report_failure("probe", exc, claim=claim.name, address=str(addr))
            return ConflictDecision.ADD
        mac = None if conflict is None else conflict.mac
        answered_by = None if mac is None else await self._owner_of(mac)
        decision = conflict_decision(
            answered=mac is not None, own_node=self._node, answered_by=answered_by
        )
        if decision is ConflictDecision.TAKE_OVER and not await self._still_placed_here(claim):
            return ConflictDecision.WAIT  # our view is stale: no conflict to report, the
            # relist that follows decides again
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

    async def _still_placed_here(self, claim: IpClaim) -> bool:
        """The take-over rule assumes the scheduler moved the claim here; a controller that
        was frozen or starved may hold a stale cache (soak seed 1505: thawed after 3 s, it
        took back two IPs that had moved, by ARP, and the client followed). So read the claim
        fresh first: take over only if the API still places it here."""
        if self._claim_lookup is None:
            return True
        try:
            fresh = await self._claim_lookup(claim.name)
        except Exception as exc:  # unknown: do not take over on a guess
            log.info("takeover.lookup.failed", claim=claim.name, error=repr(exc))
            return False
        if fresh is not None and node_of(fresh) == self._node:
            return True
        log.info("takeover.skipped", claim=claim.name, reason="moved-away", node=self._node)
        return False

    async def _owner_of(self, mac: bytes) -> str | None:
        if self._mac_owner is None:
            return None
        try:
            return await self._mac_owner(mac_to_str(mac))
        except Exception as exc:  # unknown: fall back to the holder's Live condition
            log.info("mac.lookup.failed", mac=mac_to_str(mac), error=repr(exc))
            return None

    async def _holder_state(self, holder: str) -> HolderState | None:
        """The previous holder as the scheduler judged it (its IpNode's Live condition);
        None if unknown (no verdict yet, or the read failed). An absent IpNode is dead."""
        if self._holder_node is None:
            return None
        try:
            node = await self._holder_node(holder)
        except Exception as exc:  # unknown: do not take over on a guess
            log.info("holder.lookup.failed", holder=holder, error=repr(exc))
            return None
        if node is None:
            return HolderState.DEAD
        live = find_condition(node.status.conditions, LIVE)
        if live is None or live.status == "Unknown":
            return None
        return HolderState.LIVE if live.is_true else HolderState.DEAD
