"""The allocator's rules: what one Service should hold, given what it asks for and the book.

(The `AllocationPlan` it returns and the `Ledger` it reads are in `core.allocation_plan`.)

`plan_service` compares a Service's `Request` with the claims it holds and returns the
`AllocationPlan` the process carries out. Pure and synchronous, like MetalLB's allocator;
the only state it touches is the `Ledger` (the `AllocationBook`), where it reserves the IPs
it decides to acquire so two plans never pick the same one.

Rules (docs/allocator.md has the operator's version):

- Pool order: the named pools in annotation order; otherwise every ``autoAssign`` pool, by
  name. A pool is a candidate only if it is Ready, not being deleted, of the right family
  and its serviceSelector / namespaceSelector admit the Service. A literal IP may come from
  any admitting pool (``autoAssign`` only governs ``auto``).
- Families: ``auto`` wants one IP per entry of ``spec.ipFamilies`` (one of each for dual
  stack, served as far as pools allow); without ``ipFamilies``, one IP of any family.
- A held IP is kept while the request still covers it (same literal, or same family and a
  pool the Service still names), even if its pool shrank, stopped admitting the Service or
  is being deleted (then it is *marked*); it is released when the annotation goes, the
  Service goes, the literal changes, or the Service names another pool. With purge on
  pool delete, IPs of a deleting pool are released.
- Sharing: an IP held by others is joined only with the same non-empty sharing key and
  when `core.sharing` allows it (no port in common; with externalTrafficPolicy Local, the
  same selector). A Service that holds a shared IP it may no longer share (its ports or a
  co-holder's changed) gives it up if it came later: ``auto`` takes another IP, a literal
  waits. While one Service of a key is creating the key's claim, the others wait for it
  (``deferred``) rather than each taking an IP of their own.
- In use means: claimed, pending, or carried by any Service by hand (``spec.externalIPs`` or
  ``status.loadBalancer.ingress`` entries the allocator did not write).
"""

from __future__ import annotations

from collections.abc import Mapping

from eipctl.core.admission import refusals, verdict, weigh
from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    ClaimInfo,
    PoolInfo,
    Request,
    ServiceInfo,
    ip_order,
)
from eipctl.core.allocation_plan import Acquire, AllocationPlan, Ledger, Mark, Problem
from eipctl.core.pool import IPAddress
from eipctl.core.sharing import came_first, first_clash


def plan_service(
    book: Ledger,
    service: ServiceInfo,
    request: Request,
    namespace_labels: Mapping[str, str],
    held: list[ClaimInfo],
) -> AllocationPlan:
    """Fill each slot ``request`` wants from ``held``, recorded or new IPs (reserved in book)."""
    return _Planner(book, service, request, namespace_labels).run(held)


class _Planner:
    """One `plan_service` call; collects what it decides for one Service."""

    def __init__(
        self,
        book: Ledger,
        service: ServiceInfo,
        request: Request,
        namespace_labels: Mapping[str, str],
    ) -> None:
        self.book = book
        self.service = service
        self.request = request
        self.ns_labels = namespace_labels
        self.keep: list[IPAddress] = []
        self.acquire: list[Acquire] = []
        self.problems: list[Problem] = []
        self.marks: list[Mark] = []
        self.deferred = ""
        self.given_up: dict[IPAddress, str] = {}
        self.rekey: list[tuple[IPAddress, str]] = []

    def run(self, held: list[ClaimInfo]) -> AllocationPlan:
        kept: set[IPAddress] = set()
        if self.request.auto:
            for family in self.request.families:
                claim = self._keepable(held, family, kept)
                if claim is not None:
                    kept.add(claim.ip)
                    self._keep(claim)
                else:
                    self._allocate(family)
        else:
            for ip in self.request.ips:
                claim = next((c for c in held if c.ip == ip), None)
                if (
                    claim is not None
                    and self._pool_named(claim.pool)
                    and self._gives_up(claim) is None
                ):
                    kept.add(ip)
                    self._keep(claim)
                else:
                    self._literal(ip)
        if self.request.auto and not (self.keep or self.acquire or self.problems or self.deferred):
            reason = f"no pool can give any of its families: {self._why_no_pool(ANY_FAMILY)}"
            self.problems.append(Problem("NoPool", reason, waiting=True))
        release = tuple(c.ip for c in held if c.ip not in kept)
        gave_up = [
            Problem("PortClash", f"gives up {ip}: {why}") for ip, why in self.given_up.items()
        ]
        self.problems[:0] = gave_up
        return AllocationPlan(
            self.service.key,
            tuple(self.keep),
            tuple(self.acquire),
            release,
            tuple(self.problems),
            tuple(self.marks),
            self.deferred,
            rekey=tuple(self.rekey),
        )

    # --- keeping ------------------------------------------------------------------------
    def _keepable(
        self, held: list[ClaimInfo], family: int, kept: set[IPAddress]
    ) -> ClaimInfo | None:
        """The held claim that fills an auto slot: recorded on the Service first, then lowest."""
        fits = [
            c
            for c in held
            if c.ip not in kept
            and family in (ANY_FAMILY, c.ip.version)
            and self._pool_named(c.pool)
            and not self._purged(c.pool)
            and self._gives_up(c) is None
        ]
        fits.sort(key=lambda c: (c.ip not in self.service.recorded, ip_order(c.ip)))
        return fits[0] if fits else None

    def _holders(self, claim: ClaimInfo, *, older_only: bool = False) -> list[ServiceInfo]:
        """The other Services on ``claim`` as last seen (unknown ones are left out)."""
        out = []
        for key in claim.services:
            other = self.book.service(key)
            if other is None or other.key == self.service.key:
                continue
            if not older_only or came_first(other, self.service):
                out.append(other)
        return out

    def _gives_up(self, claim: ClaimInfo) -> str | None:
        """Why this Service must give up shared ``claim``: its key is no longer the one the
        IP is shared under, or it came later than a holder it now clashes with."""
        if len(claim.services) < 2:
            return None
        key = self.request.sharing_key
        if key != claim.sharing_key:
            reason: str | None = (
                f"its sharing key {key!r} is not {claim.sharing_key!r}, "
                f"the key {claim.ip} is shared under"
            )
        else:
            reason = first_clash(self.service, self._holders(claim, older_only=True))
        if reason is not None:
            self.given_up[claim.ip] = reason
        return reason

    def _pool_named(self, pool: str) -> bool:
        return not self.request.pools or pool in self.request.pools

    def _purged(self, pool: str) -> bool:
        info = self.book.pool(pool)
        return info is not None and info.deleting and self.book.purge_on_pool_delete

    def _keep(self, claim: ClaimInfo) -> None:
        self.keep.append(claim.ip)
        if claim.sharing_key != self.request.sharing_key and len(claim.services) < 2:
            self.rekey.append((claim.ip, self.request.sharing_key))
        info = self.book.pool(claim.pool)
        if info is None:
            self._mark(claim, "PoolNotFound", f"pool {claim.pool!r} does not exist")
        elif info.deleting:
            self._mark(claim, "PoolDeleting", f"pool {claim.pool!r} is being deleted")
        elif info.pool is None or not info.pool.contains(claim.ip):
            self._mark(claim, "OutsidePool", f"{claim.ip} is no longer in pool {claim.pool!r}")
        elif not info.admits(self.service, self.ns_labels):
            why = verdict(
                info, self.service, self.request, namespace_labels=self.ns_labels, literal=claim.ip
            )
            self._mark(
                claim, "NotAdmitted", f"pool {claim.pool!r} no longer admits it: {why.detail}"
            )
        elif self.request.auto and not self.request.pools and not info.auto_assign:
            self._mark(claim, "NotAdmitted", f"pool {claim.pool!r} no longer has autoAssign")

    def _mark(self, claim: ClaimInfo, reason: str, message: str) -> None:
        self.marks.append(Mark(claim.ip, reason, f"kept {claim.ip}: {message}"))

    # --- acquiring ----------------------------------------------------------------------
    def _candidates(self, family: int, *, literal: bool) -> list[PoolInfo]:
        if self.request.pools:
            infos = [self.book.pool(n) for n in self.request.pools]
            pools = [p for p in infos if p is not None]
        else:
            pools = [p for p in self.book.pools() if literal or p.auto_assign]
        return [
            p
            for p in pools
            if p.ready
            and not p.deleting
            and p.pool is not None
            and family in (ANY_FAMILY, p.pool.version)
            and p.admits(self.service, self.ns_labels)
        ]

    def _allocate(self, family: int) -> None:
        pools = self._candidates(family, literal=False)
        wanted = "an IP" if family == ANY_FAMILY else f"an IPv{family} address"
        if not pools:
            if family != ANY_FAMILY and len(self.request.families) > 1 and not self.request.pools:
                return  # dual stack is served as far as pools allow
            why = self._why_no_pool(family)
            self.problems.append(
                Problem("NoPool", f"no pool can give {wanted}: {why}", waiting=True)
            )
            return
        names = [p.name for p in pools]
        for ip in self.service.recorded:  # repair: a recorded IP whose claim is gone
            owner = self.book.pending_for(ip)
            if self.book.claim(ip) is not None or owner not in (None, self.service.key):
                continue
            if self.book.hand_set_by(ip) - {self.service.key}:
                continue
            pool = next((p for p in pools if p.pool is not None and p.pool.contains(ip)), None)
            if pool is not None and family in (ANY_FAMILY, ip.version):
                self._take(ip, pool.name)
                return
        if self._join_shared(pools):
            return
        for name in names:
            fresh = self.book.reserve_lowest_free(
                name, self.service.key, sharing_key=self.request.sharing_key
            )
            if fresh is not None:
                self.acquire.append(Acquire(fresh, name))
                return
        self.problems.append(
            Problem(
                "PoolExhausted", f"no free address for {wanted} in {', '.join(names)}", waiting=True
            )
        )

    def _join_shared(self, pools: list[PoolInfo]) -> bool:
        """Join an IP of the Service's key (or wait for one being made); False: none fits."""
        key = self.request.sharing_key
        if not key:
            return False
        names = {p.name for p in pools}
        refused: list[str] = []
        for claim in self.book.claims():
            if (
                claim.owned
                and claim.sharing_key == key
                and claim.services
                and (claim.pool in names and self.service.key not in claim.services)
            ):
                reason = first_clash(self.service, self._holders(claim))
                if reason is None:
                    self.acquire.append(Acquire(claim.ip, claim.pool, join=True))
                    return True
                refused.append(f"not sharing {claim.ip}: {reason}")
        for ip, pool, owner in self.book.pending_shared(key):
            other = self.book.service(owner)
            if owner == self.service.key or pool not in names or self.book.claim(ip):
                continue
            if other is None or first_clash(self.service, [other]) is None:
                self.deferred = f"waiting for {ip} (key {key!r}) being reserved for {owner}"
                return True
            refused.append(f"not sharing {ip}: {first_clash(self.service, [other])}")
        if refused:
            self.problems.append(Problem("SharingRefused", "; ".join(refused), waiting=False))
        return False

    def _literal(self, ip: IPAddress) -> None:
        pools = [
            p
            for p in self._candidates(ip.version, literal=True)
            if p.pool is not None and p.pool.contains(ip)
        ]
        if not pools:
            where = f"pool {', '.join(self.request.pools)}" if self.request.pools else "any pool"
            why = self._why_no_pool(ip.version, literal=ip)
            self.problems.append(
                Problem(
                    "IPNotInPool",
                    f"{ip} is not in {where} that admits the Service: {why}",
                    waiting=True,
                )
            )
            return
        claim = self.book.claim(ip)
        pending = self.book.pending_for(ip)
        by_hand = sorted(self.book.hand_set_by(ip) - {self.service.key})
        if by_hand and (claim is None or not claim.owned):
            self.problems.append(
                Problem("IPInUse", f"{ip} is set by hand on {', '.join(by_hand)}", waiting=True)
            )
        elif claim is None and pending in (None, self.service.key):
            self._take(ip, pools[0].name)
        elif claim is None and pending is not None and self._may_join_pending(ip, pending):
            self.deferred = f"waiting for {ip} being reserved for {pending}"
        elif claim is not None and self._may_share(claim):
            reason = first_clash(self.service, self._holders(claim))
            if reason is None:
                self.acquire.append(Acquire(ip, claim.pool, join=True))
            else:
                message = f"{ip} is shared under key {claim.sharing_key!r}, but {reason}"
                self.problems.append(Problem("PortClash", message, waiting=True))
        else:
            holders = ", ".join(claim.services) if claim and claim.services else pending
            what = "hand-set externalIPs of " if claim is not None and not claim.owned else ""
            self.problems.append(
                Problem(
                    "IPInUse", f"{ip} is held by {what}{holders or 'another claim'}", waiting=True
                )
            )

    def _may_join_pending(self, ip: IPAddress, owner: str) -> bool:
        key = self.request.sharing_key
        if not key or not any(p[0] == ip for p in self.book.pending_shared(key)):
            return False
        other = self.book.service(owner)
        return other is None or first_clash(self.service, [other]) is None

    def _may_share(self, claim: ClaimInfo) -> bool:
        key = self.request.sharing_key
        return bool(claim.owned and key and claim.sharing_key == key and claim.services)

    def _take(self, ip: IPAddress, pool: str) -> None:
        self.book.reserve_pending(
            ip, self.service.key, sharing_key=self.request.sharing_key, pool=pool
        )
        self.acquire.append(Acquire(ip, pool))

    def _why_no_pool(self, family: int, literal: IPAddress | None = None) -> str:
        """Each pool's own refusal (not Ready, being deleted, family, selectors...), in the
        words `kubectl eipctl why` uses (`core.admission`)."""
        verdicts = weigh(
            self.book.pools(),
            self.service,
            self.request,
            namespace_labels=self.ns_labels,
            family=family,
            literal=literal,
        )
        return refusals(verdicts)
