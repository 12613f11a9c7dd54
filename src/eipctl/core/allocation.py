"""The allocator's decisions: what each Service asks for, which pool serves it, what to do.

Pure and synchronous, like MetalLB's allocator: no client, no clock. `AllocationBook` is the
in-memory picture of who holds which IP (rebuilt from IpClaims and Services before serving);
`AllocationBook.plan` compares what a Service asks for with what it holds and returns the
`Plan` the process carries out. The IpClaim create (its name is derived from the IP) is the
real reservation: the book only avoids asking for IPs that are known to be taken.

Rules (docs/allocator.md has the operator's version):

- Annotations: ``external-ip: auto`` or a comma list of literal IPs (at most one per
  family); ``external-ip-pool: A[,B]`` restricts the pools; ``external-ip-sharing-key: K``.
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
- A bad annotation keeps what the Service holds and reports the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from eipctl.core.naming import (
    ANNOTATION_EXTERNAL_IP,
    ANNOTATION_POOL,
    ANNOTATION_SHARING_KEY,
    AUTO,
    parse_ip,
)
from eipctl.core.pool import IPAddress, Pool, PoolAllocator

ANY_FAMILY = 0
"""A slot that any family may fill (Service without ``spec.ipFamilies``)."""


class LabelMatcher(Protocol):
    """A label selector (`core.resources` provides one); None in a pool means "everyone"."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...


class RequestError(ValueError):
    """The Service's annotations cannot be understood; the message says why, for an Event."""


@dataclass(frozen=True)
class Request:
    """What a Service asks for. ``ips`` empty means ``auto`` for ``families``."""

    ips: tuple[IPAddress, ...] = ()
    families: tuple[int, ...] = (ANY_FAMILY,)
    pools: tuple[str, ...] = ()
    sharing_key: str = ""

    @property
    def auto(self) -> bool:
        return not self.ips


@dataclass(frozen=True)
class ServiceInfo:
    """The parts of a Service the allocator reads; ``recorded`` = its allocated-ips list."""

    key: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ip_families: tuple[int, ...] = ()
    recorded: tuple[IPAddress, ...] = ()


@dataclass(frozen=True)
class PoolInfo:
    """An IpClaimPool as the allocator sees it; ``pool`` is None when the spec is bad."""

    name: str
    pool: Pool | None
    auto_assign: bool = True
    service_selector: LabelMatcher | None = None
    namespace_selector: LabelMatcher | None = None
    deleting: bool = False
    problem: str = ""
    """Why the pool is not Ready ("" when it is): bad spec, overlap with an older pool."""
    prefix_length: int | None = None

    @property
    def ready(self) -> bool:
        return self.pool is not None and not self.problem

    def admits(self, service: ServiceInfo, namespace_labels: Mapping[str, str]) -> bool:
        """Whether the selectors let ``service`` draw from this pool."""
        if self.service_selector is not None and not self.service_selector.matches(service.labels):
            return False
        return self.namespace_selector is None or self.namespace_selector.matches(namespace_labels)


@dataclass(frozen=True)
class ClaimInfo:
    """An IpClaim: ``owned`` when the allocator made it (else the scheduler, for hand-set IPs)."""

    ip: IPAddress
    pool: str
    services: tuple[str, ...] = ()
    owned: bool = True
    sharing_key: str = ""


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
        return tuple(sorted((*self.keep, *(a.ip for a in self.acquire)), key=_ip_order))


def _ip_order(ip: IPAddress) -> tuple[int, int]:
    return ip.version, int(ip)


def parse_request(annotations: Mapping[str, str], ip_families: Iterable[int]) -> Request | None:
    """The request in a Service's annotations; None when it asks for nothing.

    Raises `RequestError` for a value the allocator cannot act on.
    """
    raw = annotations.get(ANNOTATION_EXTERNAL_IP)
    if raw is None:
        return None
    value = raw.strip()
    pools = tuple(p.strip() for p in annotations.get(ANNOTATION_POOL, "").split(",") if p.strip())
    key = annotations.get(ANNOTATION_SHARING_KEY, "").strip()
    if value.lower() == AUTO:
        families = tuple(dict.fromkeys(ip_families)) or (ANY_FAMILY,)
        return Request(families=families, pools=pools, sharing_key=key)
    ips: list[IPAddress] = []
    for part in (p.strip() for p in value.split(",")):
        try:
            ip = parse_ip(part)
        except ValueError:
            raise RequestError(
                f"{ANNOTATION_EXTERNAL_IP}={raw!r}: expected 'auto' or IP addresses, "
                f"{part!r} is neither"
            ) from None
        if any(other.version == ip.version for other in ips):
            raise RequestError(f"{ANNOTATION_EXTERNAL_IP}={raw!r}: at most one IP per family")
        ips.append(ip)
    return Request(
        ips=tuple(ips), families=tuple(ip.version for ip in ips), pools=pools, sharing_key=key
    )


class AllocationBook:
    """Who holds which IP, per pool; plans Services against it.

    Mutable on purpose (one per allocator process, rebuilt when it becomes leader). Claims
    are recorded as they are seen (`claim_seen`, `claim_gone`); `plan` reserves the IPs it
    decides to acquire as *pending* for that Service until `settle` says how it went.
    """

    def __init__(self, *, purge_on_pool_delete: bool = False) -> None:
        self.purge_on_pool_delete = purge_on_pool_delete
        self._pools: dict[str, PoolInfo] = {}
        self._allocators: dict[str, PoolAllocator] = {}
        self._claims: dict[IPAddress, ClaimInfo] = {}
        self._pending: dict[IPAddress, str] = {}
        self._by_service: dict[str, set[IPAddress]] = {}

    # --- pools ------------------------------------------------------------------------
    def set_pools(self, pools: Iterable[PoolInfo]) -> None:
        """Replace the pool set; allocators are rebuilt only for pools whose space changed."""
        fresh = {p.name: p for p in pools}
        for name in list(self._allocators):
            old, new = self._pools.get(name), fresh.get(name)
            if new is None or new.pool is None or old is None or old.pool != new.pool:
                del self._allocators[name]
        self._pools = fresh
        for name, info in fresh.items():
            if info.pool is not None and name not in self._allocators:
                used = [ip for ip in (*self._claims, *self._pending) if info.pool.contains(ip)]
                self._allocators[name] = PoolAllocator(info.pool, used)

    def pool(self, name: str) -> PoolInfo | None:
        return self._pools.get(name)

    def pools(self) -> list[PoolInfo]:
        return [self._pools[n] for n in sorted(self._pools)]

    def counts(self, name: str) -> tuple[int, int]:
        """(allocated, free) of a pool: claims labelled with it, free addresses in range."""
        allocated = sum(1 for c in self._claims.values() if c.pool == name)
        allocator = self._allocators.get(name)
        return allocated, allocator.free if allocator is not None else 0

    # --- claims -----------------------------------------------------------------------
    def claim_seen(self, claim: ClaimInfo) -> None:
        """Record a claim (from the API or our own create); replaces a pending reservation."""
        old = self._claims.get(claim.ip)
        self._unindex(claim.ip, old.services if old else ())
        self._pending.pop(claim.ip, None)
        self._claims[claim.ip] = claim
        for service in claim.services if claim.owned else ():
            self._by_service.setdefault(service, set()).add(claim.ip)
        self._take(claim.ip)

    def claim_gone(self, ip: IPAddress) -> None:
        old = self._claims.pop(ip, None)
        if old is not None:
            self._unindex(ip, old.services)
            if ip not in self._pending:
                self._give_back(ip)

    def claim(self, ip: IPAddress) -> ClaimInfo | None:
        return self._claims.get(ip)

    def claims(self) -> list[ClaimInfo]:
        return sorted(self._claims.values(), key=lambda c: _ip_order(c.ip))

    def held_by(self, service: str) -> list[ClaimInfo]:
        """Allocator-owned claims that list ``service``, lowest IP first."""
        return sorted(
            (self._claims[ip] for ip in self._by_service.get(service, ())),
            key=lambda c: _ip_order(c.ip),
        )

    def settle(self, ip: IPAddress, service: str, claim: ClaimInfo | None) -> None:
        """End a pending acquisition: ``claim`` is what the API now holds (None: not ours)."""
        if claim is not None:
            self.claim_seen(claim)
            return
        if self._pending.get(ip) == service:
            del self._pending[ip]
            if ip not in self._claims:
                self._give_back(ip)

    def reserve_recorded(self, service: str, ips: Iterable[IPAddress]) -> None:
        """At start: keep IPs a Service records but no claim backs for that Service's repair."""
        for ip in ips:
            if ip not in self._claims and ip not in self._pending:
                self._pending[ip] = service
                self._take(ip)

    # --- planning ---------------------------------------------------------------------
    def plan(
        self,
        key: str,
        service: ServiceInfo | None,
        namespace_labels: Mapping[str, str] | None = None,
    ) -> Plan:
        """Decide for Service ``key`` (None: it is gone); reserves IPs it acquires as pending."""
        held = self.held_by(key)
        if service is None:
            return Plan(key, release=tuple(c.ip for c in held))
        try:
            request = parse_request(service.annotations, service.ip_families)
        except RequestError as exc:
            return Plan(
                key,
                keep=tuple(c.ip for c in held),
                problems=(Problem("InvalidAnnotation", str(exc)),),
            )
        if request is None:
            return Plan(key, release=tuple(c.ip for c in held))
        plan = _Planner(self, service, request, namespace_labels or {}).run(held)
        taken = {a.ip for a in plan.acquire}
        for ip in [ip for ip, owner in self._pending.items() if owner == key and ip not in taken]:
            self.settle(ip, key, None)  # a start-up reservation the Service no longer needs
        return plan

    # --- internals ----------------------------------------------------------------------
    def _reserve_pending(self, ip: IPAddress, service: str) -> None:
        self._pending[ip] = service
        self._take(ip)

    def _pending_for(self, ip: IPAddress) -> str | None:
        return self._pending.get(ip)

    def _allocator(self, name: str) -> PoolAllocator | None:
        return self._allocators.get(name)

    def _take(self, ip: IPAddress) -> None:
        for allocator in self._allocators.values():
            if allocator.pool.contains(ip):
                allocator.reserve(ip)

    def _give_back(self, ip: IPAddress) -> None:
        for allocator in self._allocators.values():
            allocator.release(ip)

    def _unindex(self, ip: IPAddress, services: Iterable[str]) -> None:
        for service in services:
            ips = self._by_service.get(service)
            if ips is not None:
                ips.discard(ip)
                if not ips:
                    del self._by_service[service]


class _Planner:
    """One `AllocationBook.plan` call: fills each wanted slot from held, recorded or new IPs."""

    def __init__(
        self,
        book: AllocationBook,
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
        fits.sort(key=lambda c: (c.ip not in self.service.recorded, _ip_order(c.ip)))
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
            owner = self.book._pending_for(ip)
            if self.book.claim(ip) is not None or owner not in (None, self.service.key):
                continue
            pool = next((p for p in pools if p.pool is not None and p.pool.contains(ip)), None)
            if pool is not None and family in (ANY_FAMILY, ip.version):
                self._take(ip, pool.name)
                return
        if self._join_shared(pools):
            return
        for name in names:
            allocator = self.book._allocator(name)
            fresh = allocator.allocate() if allocator is not None else None
            if fresh is not None:
                self._take(fresh, name)
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
        pending = self.book._pending_for(ip)
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
        self.book._reserve_pending(ip, self.service.key)
        self.acquire.append(Acquire(ip, pool))

    def _why_no_pool(self) -> str:
        if self.request.pools:
            missing = [n for n in self.request.pools if self.book.pool(n) is None]
            if missing:
                return f"pool {', '.join(missing)} not found"
            return f"pool {', '.join(self.request.pools)} is not Ready or does not admit it"
        return "no Ready autoAssign pool of that family admits the Service"
