"""The allocation book: who holds which IP, per pool, and planning Services against it.

Like MetalLB's allocator, plain in-memory state with no client and no clock. The book is
rebuilt from IpClaims and Services before the allocator serves, and `AllocationBook.plan`
returns the `AllocationPlan` (rules in `core.allocation_planner`) the process carries out.
The IpClaim create (its name is derived from the IP) is the real reservation: the book only
avoids asking for IPs that are known to be taken. A bad annotation keeps what the Service
holds and reports the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eipctl.core.allocation_inputs import (
    ClaimInfo,
    PoolInfo,
    RequestError,
    ServiceInfo,
    ip_order,
    service_request,
)
from eipctl.core.allocation_plan import AllocationPlan, Problem
from eipctl.core.allocation_planner import plan_service
from eipctl.core.pool import IPAddress, PoolAllocator


class AllocationBook:
    """Who holds which IP, per pool; plans Services against it.

    Mutable on purpose (one per allocator process, rebuilt when it becomes leader). Claims
    are recorded as they are seen (`claim_seen`, `claim_gone`), and so are Services
    (`service_seen`, `service_gone`: what they look like for sharing, and the IPs they use
    by hand); `plan` reserves the IPs it decides to acquire as *pending* for that Service
    until `settle` says how it went. An IP is free only when no claim, no pending
    acquisition and no Service uses it.
    """

    def __init__(
        self, *, purge_on_pool_delete: bool = False, serve_unclassed: bool = False
    ) -> None:
        self.purge_on_pool_delete = purge_on_pool_delete
        self.serve_unclassed = serve_unclassed
        self._pools: dict[str, PoolInfo] = {}
        self._allocators: dict[str, PoolAllocator] = {}
        self._claims: dict[IPAddress, ClaimInfo] = {}
        self._pending: dict[IPAddress, str] = {}
        self._pending_shared: dict[IPAddress, tuple[str, str]] = {}
        self._by_service: dict[str, set[IPAddress]] = {}
        self._services: dict[str, ServiceInfo] = {}
        self._hand_set: dict[IPAddress, set[str]] = {}

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
                used = [
                    ip
                    for ip in {*self._claims, *self._pending, *self._hand_set}
                    if info.pool.contains(ip)
                ]
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
        self._pending_shared.pop(claim.ip, None)
        self._claims[claim.ip] = claim
        for service in claim.services if claim.owned else ():
            self._by_service.setdefault(service, set()).add(claim.ip)
        self._take(claim.ip)

    def claim_gone(self, ip: IPAddress) -> None:
        old = self._claims.pop(ip, None)
        if old is not None:
            self._unindex(ip, old.services)
            self._give_back(ip)

    # --- Services -----------------------------------------------------------------------
    def service_seen(self, service: ServiceInfo) -> bool:
        """Record a Service as it now is; True when the IPs it uses by hand changed."""
        old = self._services.get(service.key)
        self._services[service.key] = service
        return self._set_hand_set(service.key, old.hand_set if old else (), service.hand_set)

    def service_gone(self, key: str) -> bool:
        """Forget a deleted Service; True when that freed IPs it used by hand."""
        old = self._services.pop(key, None)
        return self._set_hand_set(key, old.hand_set if old else (), ())

    def service(self, key: str) -> ServiceInfo | None:
        return self._services.get(key)

    def hand_set_by(self, ip: IPAddress) -> frozenset[str]:
        """The Services that use ``ip`` without the allocator having given it to them."""
        return frozenset(self._hand_set.get(ip, ()))

    def _set_hand_set(
        self, key: str, before: Iterable[IPAddress], after: Iterable[IPAddress]
    ) -> bool:
        old, new = set(before), set(after)
        for ip in old - new:
            users = self._hand_set.get(ip, set())
            users.discard(key)
            if not users:
                self._hand_set.pop(ip, None)
                self._give_back(ip)
        for ip in new - old:
            self._hand_set.setdefault(ip, set()).add(key)
            self._take(ip)
        return old != new

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
            self._pending_shared.pop(ip, None)
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
    ) -> AllocationPlan:
        """Decide for Service ``key`` (None: it is gone); reserves IPs it acquires as pending."""
        held = self.held_by(key)
        if service is None:
            return AllocationPlan(key, release=tuple(c.ip for c in held))
        self.service_seen(service)
        if service.foreign_class:  # another implementation's: keep what it holds, touch nothing
            return AllocationPlan(key, keep=tuple(c.ip for c in held), hands_off=True)
        try:
            request = service_request(service, serve_unclassed=self.serve_unclassed)
        except RequestError as exc:
            return AllocationPlan(
                key,
                keep=tuple(c.ip for c in held),
                problems=(Problem("InvalidAnnotation", str(exc)),),
            )
        if request is None:
            return AllocationPlan(key, release=tuple(c.ip for c in held))
        plan = plan_service(self, service, request, namespace_labels or {}, held)
        taken = {a.ip for a in plan.acquire}
        for ip in [ip for ip, owner in self._pending.items() if owner == key and ip not in taken]:
            self.settle(ip, key, None)  # a start-up reservation the Service no longer needs
        return plan

    # --- reservations made while planning (the `Ledger` of core.allocation_planner) --------
    def pending_for(self, ip: IPAddress) -> str | None:
        """The Service an acquisition of ``ip`` is pending for, if any."""
        return self._pending.get(ip)

    def reserve_pending(
        self, ip: IPAddress, service: str, *, sharing_key: str = "", pool: str = ""
    ) -> None:
        """Hold ``ip`` for ``service`` until `settle` (so no other plan picks it meanwhile).

        With a ``sharing_key``, Services of the same key wait for this claim to exist and
        join it, instead of reserving IPs of their own at the same moment.
        """
        self._pending[ip] = service
        if sharing_key:
            self._pending_shared[ip] = (sharing_key, pool)
        self._take(ip)

    def reserve_lowest_free(
        self, pool: str, service: str, *, sharing_key: str = ""
    ) -> IPAddress | None:
        """Take the lowest free IP of ``pool`` as pending for ``service``; None when full."""
        allocator = self._allocators.get(pool)
        fresh = allocator.allocate() if allocator is not None else None
        if fresh is not None:
            self.reserve_pending(fresh, service, sharing_key=sharing_key, pool=pool)
        return fresh

    def pending_shared(self, sharing_key: str) -> list[tuple[IPAddress, str, str]]:
        """Acquisitions in flight under ``sharing_key``: (ip, pool, Service), lowest IP first."""
        return sorted(
            (
                (ip, pool, self._pending[ip])
                for ip, (key, pool) in self._pending_shared.items()
                if key == sharing_key and ip in self._pending
            ),
            key=lambda t: ip_order(t[0]),
        )

    # --- internals ----------------------------------------------------------------------

    def _take(self, ip: IPAddress) -> None:
        for allocator in self._allocators.values():
            if allocator.pool.contains(ip):
                allocator.reserve(ip)

    def _give_back(self, ip: IPAddress) -> None:
        """Free ``ip`` in its pool unless a claim, a pending acquisition or a Service uses it."""
        if ip in self._claims or ip in self._pending or ip in self._hand_set:
            return
        for allocator in self._allocators.values():
            allocator.release(ip)

    def _unindex(self, ip: IPAddress, services: Iterable[str]) -> None:
        for service in services:
            ips = self._by_service.get(service)
            if ips is not None:
                ips.discard(ip)
                if not ips:
                    del self._by_service[service]
