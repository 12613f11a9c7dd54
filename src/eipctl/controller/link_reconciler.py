"""One level-based pass over the node's links: make them hold exactly the claims placed here.

Every pass reads the whole desired state (the claim cache) and the whole actual state (the
links), asks `core.link_plan.plan` what differs and does it; there are no separate
create/update/delete paths, so a missed event, a restart or a hand-made change heals on the
next pass. Order inside a pass:

1. remove managed addresses no longer placed here (or all of them while fenced), except
   those still waiting for their new node to bind them (`handover`);
2. renew the lifetime of addresses already on the link (no probe: a restart never touches a
   working address); the first pass that finds a claim newly placed here with its address
   already on the link announces it: the claim may have been on another node meanwhile
   (moved away and back during a handover, or while this process was down), and clients
   would keep that node's MAC until their neighbour entry goes stale;
3. add the missing ones concurrently: probe and apply the take-over rule (`takeover`), add,
   announce in the background (`announcements`), then report Bound;
4. remove what was replaced by an add on another link (a claim that changed links);
5. report conflicts and the IpNode's real addresses.

Adds and renewals happen only while `Fence.may_hold()`; a fenced pass only removes.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog

from eipctl.core.conflict import ConflictDecision
from eipctl.core.fence import Fence
from eipctl.core.link_plan import (
    Address,
    Blocked,
    BlockReason,
    LinkView,
    PlacedClaim,
    ip_sort_key,
    links_to_inspect,
    plan,
)
from eipctl.core.resources import IpClaim
from eipctl.kube.client import Obj
from eipctl.net.errors import ForeignAddressError, NetError
from eipctl.net.frames import mac_to_str
from eipctl.net.link import Announcer, IPAddress, LinkBackend, Prober

from .announcements import Announcements
from .announcing import AnnounceMode, AnnounceModes, PoolModes
from .announcing.bgp_routes import BgpRoutes
from .announcing.layer2 import Layer2
from .handover import ClaimLookup, Handover
from .metrics import (
    ADDRESS_CHANGES,
    CLAIM_CONFLICTS,
    MANAGED_ADDRESSES,
    NET_ERRORS,
    PASS_SECONDS,
    TIME_TO_BOUND_SECONDS,
)
from .settings import AddressSettings
from .status import StatusReporter
from .takeover import HolderNode, MacOwner, Takeover

log = structlog.get_logger(__name__)

HANDOVER_RECHECK = 0.2
"""How soon to look again at an address held for a hand-over (seconds)."""


class ClaimSource(Protocol):
    @property
    def has_synced(self) -> bool: ...
    @property
    def generation(self) -> int:
        """Bumped when the cache is replaced (a relist after a restore): decisions a pass
        made from the old cache are void."""
        ...

    def objects(self) -> list[Obj]: ...


class LinkReconciler:
    def __init__(
        self,
        node: str,
        default_link: str,
        addresses: AddressSettings,
        *,
        bgp_link: str = "",
        conflict_retry: float = 0.5,
        error_retry: float = 1.0,
        backend: LinkBackend,
        claims: ClaimSource,
        fence: Fence,
        status: StatusReporter,
        announcer: Announcer,
        prober: Prober | None = None,
        holder_node: HolderNode | None = None,
        mac_owner: MacOwner | None = None,
        claim_lookup: ClaimLookup | None = None,
        pools: PoolModes | None = None,
        leader_agrees: Callable[[], bool] | None = None,
    ) -> None:
        """``bgp_link``: the dummy link for the IPs of pools announced by BGP (created when
        first needed); "" = no BGP mode: every claim is layer 2. ``conflict_retry``: probe a
        conflicting claim again after this long; ``error_retry``: run another pass this soon
        after a failed link operation."""
        self.node = node
        self.default_link = default_link
        self.addresses = addresses
        self._conflict_retry = conflict_retry
        self._error_retry = error_retry
        self._backend = backend
        self._claims = claims
        self._fence = fence
        self._status = status
        layer2 = Layer2(Announcements(announcer, fence.may_hold, leader_agrees))
        modes: list[AnnounceMode] = [layer2]  # a new mode is a module in announcing/ and a line
        if bgp_link:
            modes.append(BgpRoutes(bgp_link, backend, node, self._failed))
        self._modes = AnnounceModes(modes, pools)
        self._takeover = Takeover(
            node,
            prober=prober,
            mac_owner=mac_owner,
            holder_node=holder_node,
            report_conflict=self._conflict,
            report_failure=self._failed,
            claim_lookup=claim_lookup,
        )
        self._handover = Handover(node, claim_lookup, addresses.lifetime)
        self._macs: dict[str, str] = {}  # link -> its MAC, published on the IpNode
        self._links_used: set[str] = set()
        self._missing_links_reported: set[str] = set()
        self._retry: float | None = None
        self._generation = 0
        self._first_seen: dict[str, float | None] = {}
        """claim -> when first seen placed here (None once counted in time-to-bound)."""
        self._held: set[Address] = set()
        """Addresses this process put on a link and has not removed: one missing is drift."""

    # -- the pass ------------------------------------------------------------------------
    async def reconcile(self, *, release: bool = False) -> float | None:
        """One pass; returns how soon another pass is needed (None: no hurry).

        `release` removes every managed address (fencing, --cleanup-on-exit).
        """
        started = time.monotonic()
        self._retry = None
        self._generation = self._claims.generation
        fenced = release or self._fence.fenced
        if not fenced and not self._claims.has_synced:
            return None  # never purge from a cache that has not listed yet
        if not fenced and not self._modes.has_synced:
            return None  # nor move an address between announce modes on a guess
        desired: list[PlacedClaim] = []
        parsed: dict[str, IpClaim] = {}
        if not fenced:
            desired, parsed = self._modes.placed_claims(
                self._claims.objects(), self.node, self.default_link
            )
            for mode in sorted({c.mode for c in desired}):
                await self._modes.by_name(mode).prepare()
        self._takeover.keep_only(parsed)
        self._first_seen = {k: v for k, v in self._first_seen.items() if k in parsed}
        for name in parsed:
            self._first_seen.setdefault(name, started)
        links = links_to_inspect(self.default_link, desired, self._links_used)
        observed = await self._observe(links)
        actions = plan(desired, observed, fenced=fenced)
        may_hold = not fenced and self._fence.may_hold()
        adding = {c.address.ip for c in actions.add} if may_hold else set()
        reason = "released" if release else ("fenced" if fenced else "not-placed-here")
        if may_hold:  # first: a handover read below may wait on a slow API
            for claim in actions.keep:
                await self._renew(claim, parsed[claim.name])
        for addr in actions.remove:
            if addr.ip in adding:
                continue
            # moved away: no further announcement from here, even while the address stays
            # for the handover (a late round would pull the neighbours back from the new
            # holder, and they would wait for its next round once we let go)
            self._modes.withdrawn(addr)
            if not fenced and await self._handover.waiting(addr):
                await self._hold(addr)
                self._retry_in(HANDOVER_RECHECK)
                continue
            await self._remove(addr, reason)
        if may_hold:
            await asyncio.gather(*(self._add(c, parsed[c.name]) for c in actions.add))
        for addr in actions.remove:
            if addr.ip in adding:
                await self._remove(addr, "moved-to-another-link")
        for blocked in actions.blocked:
            self._report_blocked(blocked, parsed[blocked.claim.name])
        await self._report_addresses(observed.keys())
        PASS_SECONDS.observe(time.monotonic() - started)
        return self._retry

    async def release_all(self) -> None:
        """Remove every managed address on the links this process knows (SIGTERM with
        --cleanup-on-exit)."""
        await self.reconcile(release=True)

    async def extend_lifetimes(self, seconds: float) -> int:
        """Give every managed address on our links `seconds` to live (a restart's bridge);
        returns how many were extended. No pass, no decisions: the next process decides."""
        lifetime = max(1, math.ceil(seconds))
        extended = 0
        for link in sorted({self.default_link, *self._links_used}):
            try:
                managed = await self._backend.list_managed(link)
            except NetError as exc:
                self._failed("list", exc, link=link)
                continue
            for addr in managed:
                try:
                    await self._backend.add(link, addr.ip, addr.prefixlen, lifetime)
                    extended += 1
                except NetError as exc:
                    self._failed("renew", exc, address=f"{addr.ip}/{addr.prefixlen}")
        return extended

    async def close(self) -> None:
        await self._modes.close()

    # -- observing -----------------------------------------------------------------------
    async def _observe(self, links: Iterable[str]) -> dict[str, LinkView]:
        observed: dict[str, LinkView] = {}
        for link in sorted(links):
            try:
                if not await self._backend.link_exists(link):
                    continue
                addresses = await self._backend.list_all(link)
            except NetError as exc:
                self._failed("list", exc, link=link)
                continue
            observed[link] = LinkView(
                managed=frozenset((a.ip, a.prefixlen) for a in addresses if a.managed),
                foreign=frozenset(a.ip for a in addresses if not a.managed),
            )
            self._missing_links_reported.discard(link)
        return observed

    # -- actions -------------------------------------------------------------------------
    async def _remove(self, addr: Address, reason: str) -> None:
        self._modes.withdrawn(addr)
        try:
            removed = await self._backend.remove(addr.link, addr.ip, addr.prefixlen)
        except ForeignAddressError as exc:
            log.error("address.remove.refused", address=str(addr), error=str(exc))
            return
        except NetError as exc:
            self._failed("remove", exc, address=str(addr))
            return
        self._held.discard(addr)
        if removed:
            ADDRESS_CHANGES.labels("remove").inc()
            log.info("address.removed", address=str(addr), reason=reason, node=self.node)

    async def _hold(self, addr: Address) -> None:
        """Keep a moved address for what is left of its handover (whole seconds, at least
        one): it must not lapse before the new holder binds, nor outlive the hold."""
        if not self._fence.may_hold():
            return
        seconds = max(1, int(self._handover.remaining(addr)))
        try:
            await self._backend.add(addr.link, addr.ip, addr.prefixlen, seconds)
        except NetError as exc:
            self._failed("hold", exc, address=f"{addr.ip}/{addr.prefixlen}")

    async def _put(self, addr: Address, claim: IpClaim, op: str) -> bool:
        """Add `addr` or renew its lifetime; False (reported) if the link refused it."""
        try:
            await self._backend.add(addr.link, addr.ip, addr.prefixlen, self.addresses.valid_lft)
        except ForeignAddressError as exc:
            self._conflict(claim, "AdminAddress", str(exc))
            return False
        except NetError as exc:
            self._failed(op, exc, claim=claim.name, address=str(addr))
            return False
        self._links_used.add(addr.link)
        return True

    async def _renew(self, placed: PlacedClaim, claim: IpClaim) -> None:
        if await self._put(placed.address, claim, "renew"):
            addr = placed.address
            if self._first_seen.get(claim.name) is not None:
                # newly placed here, already on the link: whoever held it meanwhile may
                # have announced it (see the module docstring, step 2)
                self._modes.by_name(placed.mode).seen_again(addr, claim.name)
            self._held.add(addr)
            if claim.name in self._first_seen:
                self._first_seen[claim.name] = None  # already on the link when first seen
            self._status.bound(claim)

    async def _add(self, placed: PlacedClaim, claim: IpClaim) -> None:
        addr = placed.address
        decision = await self._takeover.decide(placed, claim)
        if decision is ConflictDecision.WAIT:
            return
        if self._claims.generation != self._generation or not self._claims.has_synced:
            # the claims were relisted while we probed (a node thawed: fenced, restored):
            # this add was decided from the old cache; the next pass decides again
            log.info("address.add.skipped", claim=claim.name, reason="claims-relisted")
            return
        if not self._fence.may_hold():  # the probe took time; the API may have gone
            log.info("address.add.skipped", claim=claim.name, reason="api-stale")
            return
        if not await self._put(addr, claim, "add"):
            return
        ADDRESS_CHANGES.labels("add").inc()
        log.info("address.added", claim=claim.name, address=str(addr), decision=decision.value)
        mode = self._modes.by_name(placed.mode)
        mode.added(addr, claim.name, bound=lambda: self._status.bound(claim))
        if addr in self._held:
            self._status.event(
                claim,
                "Normal",
                "AddressRestored",
                f"{addr.ip} had gone from {addr.link} on {self.node}; put back",
            )
        self._held.add(addr)
        if decision is ConflictDecision.TAKE_OVER:
            holder = claim.status.bound_node or "another node"
            self._status.event(
                claim,
                "Normal",
                "TakenOver",
                f"{addr.ip} taken over on {self.node} from {holder}, which still answered for it",
            )
        seen = self._first_seen.get(claim.name)
        if seen is not None:
            TIME_TO_BOUND_SECONDS.observe(max(0.0, time.monotonic() - seen))
            self._first_seen[claim.name] = None

    # -- reporting -----------------------------------------------------------------------
    def _conflict(self, claim: IpClaim, reason: str, message: str) -> None:
        CLAIM_CONFLICTS.labels(reason).inc()
        self._status.conflict(claim, reason, message)
        self._retry_in(self._conflict_retry)

    def _report_blocked(self, blocked: Blocked, claim: IpClaim) -> None:
        addr = blocked.claim.address
        if blocked.reason is BlockReason.ADMIN_ADDRESS:
            msg = f"{addr.ip} is on {addr.link} but was not added by eipctl"
            log.warning("claim.blocked", claim=claim.name, reason=blocked.reason.value, detail=msg)
            self._conflict(claim, blocked.reason.value, msg)
        elif blocked.reason is BlockReason.DUPLICATE_IP:
            msg = f"another claim placed on {self.node} holds {addr.ip}"
            log.warning("claim.blocked", claim=claim.name, reason=blocked.reason.value, detail=msg)
            self._conflict(claim, blocked.reason.value, msg)
        elif addr.link not in self._missing_links_reported:
            self._missing_links_reported.add(addr.link)
            log.warning("claim.blocked", claim=claim.name, reason="LinkMissing", link=addr.link)
            self._retry_in(self._error_retry)

    async def _report_addresses(self, links: Iterable[str]) -> None:
        held: set[tuple[IPAddress, int]] = set()
        for link in links:
            try:
                managed = await self._backend.list_managed(link)
                if link not in self._macs and self._modes.has_mac(link):
                    self._macs[link] = mac_to_str(await self._backend.link_mac(link))
            except NetError as exc:
                self._failed("list", exc, link=link)
                return
            held.update((a.ip, a.prefixlen) for a in managed)
        MANAGED_ADDRESSES.set(len(held))
        ordered = sorted(held, key=lambda a: (ip_sort_key(a[0]), a[1]))
        texts = [f"{ip}/{prefixlen}" for ip, prefixlen in ordered]
        if not self._fence.fenced:
            self._status.node_addresses(texts, sorted(set(self._macs.values())))

    def _failed(self, op: str, exc: NetError, **fields: str) -> None:
        NET_ERRORS.labels(op).inc()
        log.warning("link.failed", op=op, error=str(exc), **fields)
        self._retry_in(self._error_retry)

    def _retry_in(self, seconds: float) -> None:
        self._retry = seconds if self._retry is None else min(self._retry, seconds)
