"""The allocator's rules: what one Service should hold, given what it asks for and the book.

`plan_service` compares a Service's `Request` with the claims it holds and returns the `Plan`
the process carries out. Pure and synchronous, like MetalLB's allocator; the only state it
touches is the `Ledger` (the `AllocationBook`), where it reserves the IPs it decides to
acquire so two plans never pick the same one.

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
- Sharing: an IP held by others is joined only with the same non-empty sharing key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    ClaimInfo,
    PoolInfo,
    Request,
    ServiceInfo,
    ip_order,
)
from eipctl.core.pool import IPAddress


@dataclass(frozen=True)
class Acquire:
    """Get ``ip`` for the Service: create its claim, or join an existing shared one."""

    ip: IPAddress
    pool: str
    join: bool = False


@dataclass(frozen=True)
class Problem:
    """Something to tell the user (an Event on the Service); ``waiting`` = retry on change."""

    reason: str
    message: str
    waiting: bool = False


@dataclass(frozen=True)
class Mark:
    """A kept IP whose pool no longer fits it: reason for the claim's condition and an Event."""

    ip: IPAddress
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    """What to do for one Service; empty when it holds exactly what it should."""

    service: str
    keep: tuple[IPAddress, ...] = ()
    acquire: tuple[Acquire, ...] = ()
    release: tuple[IPAddress, ...] = ()
    problems: tuple[Problem, ...] = ()
    marks: tuple[Mark, ...] = ()

    @property
    def desired(self) -> tuple[IPAddress, ...]:
        """The IPs the Service should carry once the plan is done, in a stable order."""
        return tuple(sorted((*self.keep, *(a.ip for a in self.acquire)), key=ip_order))


class Ledger(Protocol):
    """What planning reads from, and reserves in, the book (`AllocationBook`)."""

    purge_on_pool_delete: bool

    def pool(self, name: str) -> PoolInfo | None: ...
    def pools(self) -> list[PoolInfo]: ...
    def claim(self, ip: IPAddress) -> ClaimInfo | None: ...
    def claims(self) -> list[ClaimInfo]: ...
    def pending_for(self, ip: IPAddress) -> str | None: ...
    def reserve_pending(self, ip: IPAddress, service: str) -> None: ...
    def reserve_lowest_free(self, pool: str, service: str) -> IPAddress | None: ...


def plan_service(
    book: Ledger,
    service: ServiceInfo,
    request: Request,
    namespace_labels: Mapping[str, str],
    held: list[ClaimInfo],
) -> Plan:
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

    def run(self, held: list[ClaimInfo]) -> Plan:
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
                if claim is not None and self._pool_named(claim.pool):
                    kept.add(ip)
                    self._keep(claim)
                else:
                    self._literal(ip)
        if self.request.auto and not (self.keep or self.acquire or self.problems):
            reason = f"no pool can give any of its families: {self._why_no_pool()}"
            self.problems.append(Problem("NoPool", reason, waiting=True))
        release = tuple(c.ip for c in held if c.ip not in kept)
        return Plan(
            self.service.key,
            tuple(self.keep),
            tuple(self.acquire),
            release,
            tuple(self.problems),
            tuple(self.marks),
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
        ]
        fits.sort(key=lambda c: (c.ip not in self.service.recorded, ip_order(c.ip)))
        return fits[0] if fits else None

    def _pool_named(self, pool: str) -> bool:
        return not self.request.pools or pool in self.request.pools

    def _purged(self, pool: str) -> bool:
        info = self.book.pool(pool)
        return info is not None and info.deleting and self.book.purge_on_pool_delete

    def _keep(self, claim: ClaimInfo) -> None:
        self.keep.append(claim.ip)
        info = self.book.pool(claim.pool)
        if info is None:
            self._mark(claim, "PoolNotFound", f"pool {claim.pool!r} does not exist")
        elif info.deleting:
            self._mark(claim, "PoolDeleting", f"pool {claim.pool!r} is being deleted")
        elif info.pool is None or not info.pool.contains(claim.ip):
            self._mark(claim, "OutsidePool", f"{claim.ip} is no longer in pool {claim.pool!r}")
        elif not info.admits(self.service, self.ns_labels):
            self._mark(claim, "NotAdmitted", f"pool {claim.pool!r} no longer admits the Service")
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
            self.problems.append(
                Problem("NoPool", f"no pool can give {wanted}: {self._why_no_pool()}", waiting=True)
            )
            return
        names = [p.name for p in pools]
        for ip in self.service.recorded:  # repair: a recorded IP whose claim is gone
            owner = self.book.pending_for(ip)
            if self.book.claim(ip) is not None or owner not in (None, self.service.key):
                continue
            pool = next((p for p in pools if p.pool is not None and p.pool.contains(ip)), None)
            if pool is not None and family in (ANY_FAMILY, ip.version):
                self._take(ip, pool.name)
                return
        if self._join_shared(pools):
            return
        for name in names:
            fresh = self.book.reserve_lowest_free(name, self.service.key)
            if fresh is not None:
                self.acquire.append(Acquire(fresh, name))
                return
        self.problems.append(
            Problem(
                "PoolExhausted", f"no free address for {wanted} in {', '.join(names)}", waiting=True
            )
        )

    def _join_shared(self, pools: list[PoolInfo]) -> bool:
        key = self.request.sharing_key
        if not key:
            return False
        names = {p.name for p in pools}
        for claim in self.book.claims():
            if (
                claim.owned
                and claim.sharing_key == key
                and claim.services
                and (claim.pool in names and self.service.key not in claim.services)
            ):
                self.acquire.append(Acquire(claim.ip, claim.pool, join=True))
                return True
        return False

    def _literal(self, ip: IPAddress) -> None:
        pools = [
            p
            for p in self._candidates(ip.version, literal=True)
            if p.pool is not None and p.pool.contains(ip)
        ]
        if not pools:
            where = f"pool {', '.join(self.request.pools)}" if self.request.pools else "any pool"
            self.problems.append(
                Problem(
                    "IPNotInPool", f"{ip} is not in {where} that admits the Service", waiting=True
                )
            )
            return
        claim = self.book.claim(ip)
        pending = self.book.pending_for(ip)
        if claim is None and pending in (None, self.service.key):
            self._take(ip, pools[0].name)
        elif claim is not None and self._may_share(claim):
            self.acquire.append(Acquire(ip, claim.pool, join=True))
        else:
            holders = ", ".join(claim.services) if claim and claim.services else pending
            what = "hand-set externalIPs of " if claim is not None and not claim.owned else ""
            self.problems.append(
                Problem(
                    "IPInUse", f"{ip} is held by {what}{holders or 'another claim'}", waiting=True
                )
            )

    def _may_share(self, claim: ClaimInfo) -> bool:
        key = self.request.sharing_key
        return bool(claim.owned and key and claim.sharing_key == key and claim.services)

    def _take(self, ip: IPAddress, pool: str) -> None:
        self.book.reserve_pending(ip, self.service.key)
        self.acquire.append(Acquire(ip, pool))

    def _why_no_pool(self) -> str:
        if self.request.pools:
            missing = [n for n in self.request.pools if self.book.pool(n) is None]
            if missing:
                return f"pool {', '.join(missing)} not found"
            return f"pool {', '.join(self.request.pools)} is not Ready or does not admit it"
        return "no Ready autoAssign pool of that family admits the Service"
