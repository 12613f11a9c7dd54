"""The allocation book: who holds which IP, per pool, and planning Services against it.

Like MetalLB's allocator, plain in-memory state with no client and no clock. The book is
rebuilt from IpClaims and Services before the allocator serves, and `AllocationBook.plan`
returns the `Plan` (rules in `core.allocation_planner`) the process carries out. The IpClaim
create (its name is derived from the IP) is the real reservation: the book only avoids asking
for IPs that are known to be taken. A bad annotation keeps what the Service holds and
reports the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eipctl.core.allocation_inputs import (
    ClaimInfo,
    PoolInfo,
    RequestError,
    ServiceInfo,
    ip_order,
    parse_request,
)
from eipctl.core.allocation_planner import Plan, Problem, plan_service
from eipctl.core.pool import IPAddress, PoolAllocator


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
        return sorted(self._claims.values(), key=lambda c: ip_order(c.ip))

    def held_by(self, service: str) -> list[ClaimInfo]:
        """Allocator-owned claims that list ``service``, lowest IP first."""
        return sorted(
            (self._claims[ip] for ip in self._by_service.get(service, ())),
            key=lambda c: ip_order(c.ip),
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
        plan = plan_service(self, service, request, namespace_labels or {}, held)
        taken = {a.ip for a in plan.acquire}
        for ip in [ip for ip, owner in self._pending.items() if owner == key and ip not in taken]:
            self.settle(ip, key, None)  # a start-up reservation the Service no longer needs
        return plan

    # --- reservations made while planning (the `Ledger` of core.allocation_planner) --------
    def pending_for(self, ip: IPAddress) -> str | None:
        """The Service an acquisition of ``ip`` is pending for, if any."""
        return self._pending.get(ip)

    def reserve_pending(self, ip: IPAddress, service: str) -> None:
        """Hold ``ip`` for ``service`` until `settle` (so no other plan picks it meanwhile)."""
        self._pending[ip] = service
        self._take(ip)

    def reserve_lowest_free(self, pool: str, service: str) -> IPAddress | None:
        """Take the lowest free IP of ``pool`` as pending for ``service``; None when full."""
        allocator = self._allocators.get(pool)
        fresh = allocator.allocate() if allocator is not None else None
        if fresh is not None:
            self.reserve_pending(fresh, service)
        return fresh

    # --- internals ----------------------------------------------------------------------

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
