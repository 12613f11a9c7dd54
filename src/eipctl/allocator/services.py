"""Service reconcile: make what a Service holds equal to what it asks for.

Level-based: the plan comes from the Service in the cache and the book, whatever event
caused the call. Order of writes, chosen so a crash at any point leaves nothing handed out
twice and nothing that a restart cannot finish:

- acquire: create the IpClaim first (the reservation), then put the IP on the Service;
- release: take the IP off the Service first, then drop the Service from the claim (delete
  it when it was the last holder, with a resourceVersion precondition so a Service joining
  at that moment is never cut off).

Each IP given or taken back gets a Normal Event (``Allocated`` / ``Released``) on the Service,
so ``kubectl describe service`` answers "why does it have this IP"; Events are fire and
forget, outside the three writes per Service that allocation itself needs.
"""

from __future__ import annotations

import asyncio
import time
from ipaddress import IPv4Address, IPv6Address

import structlog

from eipctl.allocator import metrics
from eipctl.allocator.keys import ServiceKey
from eipctl.allocator.state import Term
from eipctl.allocator.views import (
    Refused,
    claim_info,
    condition_mutation,
    in_pool_condition,
    is_deleting,
    join_claim,
    leave_claim,
    recorded_ips,
    service_info,
    set_claim_sharing_key,
    set_ingress,
    set_service_ips,
)
from eipctl.core.allocation_inputs import ClaimInfo, ServiceInfo
from eipctl.core.allocation_plan import Acquire, AllocationPlan
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import (
    ANNOTATION_EXTERNAL_IP,
    ANNOTATION_SHARING_KEY,
    CONDITION_IN_POOL,
    claim_name_for,
)
from eipctl.kube.client import IPCLAIMS, SERVICES, KubeApi, Obj
from eipctl.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from eipctl.kube.events import reference
from eipctl.kube.workqueue import DONE, Result, requeue_after

log = structlog.get_logger(__name__)

IPAddress = IPv4Address | IPv6Address

DEFER_DELAY = 0.05
"""Seconds before a Service waiting for its sharing key's claim to be created looks again."""


class ServiceReconciler:
    def __init__(self, term: Term, api: KubeApi) -> None:
        self.term = term
        self.api = api

    async def reconcile(self, key: str) -> Result:
        term = self.term
        seen_at = term.first_seen.get(key, time.monotonic())
        obj = term.caches.services.get(key)
        info: ServiceInfo | None = None
        if obj is not None and not is_deleting(obj):
            info = service_info(obj)
        elif term.book.held_by(key) and not await self._confirm_gone(key):
            return requeue_after(0.5)  # the cache lags a Service that exists
        namespace = key.partition("/")[0]
        plan = term.book.plan(key, info, term.caches.namespace_labels(namespace))
        if plan.hands_off or plan.deferred:
            for acq in plan.acquire:
                if not acq.join:
                    term.book.settle(acq.ip, key, None)
            if plan.deferred:
                log.debug("service.deferred", service=key, why=plan.deferred)
                return requeue_after(DEFER_DELAY)
            term.waiting.discard(key)
            return DONE
        raced = False
        acquired: list[IPAddress] = []
        try:
            for acq in plan.acquire:
                if await self._acquire(key, acq, info):
                    acquired.append(acq.ip)
                    metrics.ALLOCATIONS.labels(acq.pool, metrics.family(acq.ip)).inc()
                else:
                    raced = True
        finally:
            for acq in plan.acquire:
                if acq.ip not in acquired and not acq.join:
                    term.book.settle(acq.ip, key, None)
        desired = sorted((*plan.keep, *acquired), key=lambda ip: (ip.version, int(ip)))
        written = False
        if obj is not None and info is not None:
            ours = {*plan.keep, *plan.release, *acquired, *recorded_ips(obj)}
            try:
                written = await self._write_service(key, desired, ours)
            except (Forbidden, Invalid) as exc:
                await self._refused(key, obj, acquired, exc)
                return DONE
        if written:
            pools = {a.ip: a.pool for a in plan.acquire}
            for ip in acquired:
                self._event(key, obj, "Allocated", f"allocated {ip} from pool {pools[ip]}")
        for ip in plan.release:
            reason, why = self._release_reason(info, obj, ip)
            pool = await self._release(key, ip)
            if pool is not None:
                metrics.RELEASES.labels(pool, reason).inc()
                self._event(key, obj, "Released", f"released {ip} (pool {pool}): {why}")
        for ip, sharing_key in plan.rekey:
            await self._rekey(key, ip, sharing_key)
        self._log(plan, desired, acquired)
        self._time(key, seen_at, plan, written and bool(acquired), raced)
        await self._mark(plan, obj)
        self._report(key, obj, plan)
        return requeue_after(0) if raced else DONE

    async def _refused(
        self, key: str, obj: Obj, acquired: list[IPAddress], exc: Forbidden | Invalid
    ) -> None:
        """The API refused the Service write (an admission plugin or policy): give back what
        was taken for it and tell the user the API's own words, once."""
        for ip in acquired:
            await self._release(key, ip)
        message = f"the API refused to write the IPs to the Service ({exc.reason}): {exc.message}"
        last = ("ServiceWriteRefused", message)
        if self.term.reported.get(key) != last:
            self.term.reported[key] = last
            metrics.ALLOCATION_FAILURES.labels(metrics.failure_reason("ServiceWriteRefused")).inc()
            self.term.events.tell(_service(obj), "Warning", "ServiceWriteRefused", message)

    # --- claims ---------------------------------------------------------------------------
    async def _acquire(self, key: str, acq: Acquire, info: ServiceInfo | None) -> bool:
        """Create (or join) the claim; False if someone else holds the IP after all."""
        term = self.term
        name = claim_name_for(acq.ip)
        sharing_key = info.annotations.get(ANNOTATION_SHARING_KEY, "").strip() if info else ""
        if acq.join:
            try:
                stored = await term.writer.update(IPCLAIMS, name, join_claim(key, sharing_key))
            except (Refused, NotFound) as exc:
                log.info("claim.join_refused", service=key, ip=str(acq.ip), error=str(exc))
                return False
            self._seen(stored)
            log.info("claim.joined", service=key, ip=str(acq.ip), claim=name)
            return True
        pool = term.book.pool(acq.pool)
        body = allocator_claim(
            acq.ip,
            pool=acq.pool,
            prefix_length=pool.prefix_length if pool is not None else None,
            service=key,
            sharing_key=sharing_key,
        )
        try:
            stored = await term.writer.create(IPCLAIMS, body)
        except AlreadyExists:
            try:
                current = await self.api.get(IPCLAIMS, name)
            except NotFound:
                return False
            seen = self._seen(current)
            mine = seen is not None and seen.owned and key in seen.services
            log.info("claim.taken", service=key, ip=str(acq.ip), claim=name, ours=mine)
            return mine
        self._seen(stored)
        log.info("claim.created", service=key, ip=str(acq.ip), pool=acq.pool, claim=name)
        return True

    async def _rekey(self, key: str, ip: IPAddress, sharing_key: str) -> None:
        name = claim_name_for(ip)
        try:
            stored = await self.term.writer.update(
                IPCLAIMS, name, set_claim_sharing_key(key, sharing_key)
            )
        except (Refused, NotFound) as exc:
            log.info("claim.rekey_refused", service=key, claim=name, error=str(exc))
            self.term.queue.add(ServiceKey(key))
            return
        self._seen(stored)
        log.info("claim.rekeyed", service=key, claim=name, sharing_key=sharing_key)

    def _seen(self, obj: Obj) -> ClaimInfo | None:
        info = claim_info(obj)
        if info is not None:
            self.term.book.claim_seen(info)
        return info

    def _release_reason(
        self, info: ServiceInfo | None, obj: Obj | None, ip: IPAddress
    ) -> tuple[str, str]:
        """Why ``ip`` is taken back: the metric's reason and the Released Event's words.

        Without the annotation, where the IP was tells how the Service had asked: a
        LoadBalancer carries it in ``status.loadBalancer.ingress`` only, any other Service in
        ``spec.externalIPs`` (`views.set_service_ips`), so an IP not there came from a class.
        """
        if info is None:
            return metrics.RELEASE_SERVICE_DELETED, "service deleted"
        if ANNOTATION_EXTERNAL_IP not in info.annotations:
            if info.load_balancer:
                return metrics.RELEASE_NOT_SERVED, (
                    "it asks nothing of eipctl now: a LoadBalancer with no loadBalancerClass "
                    "and no external-ip annotation is served only with "
                    "--serve-unclassed-load-balancers"
                )
            in_spec = {str(e) for e in ((obj or {}).get("spec") or {}).get("externalIPs") or ()}
            if str(ip) not in in_spec:
                return metrics.RELEASE_NOT_LOAD_BALANCER, (
                    f"no longer a LoadBalancer (now type {info.service_type}) "
                    "and no external-ip annotation"
                )
            return metrics.RELEASE_ANNOTATION_REMOVED, "annotation removed"
        claim = self.term.book.claim(ip)
        pool = self.term.book.pool(claim.pool) if claim is not None else None
        if pool is not None and pool.deleting and self.term.book.purge_on_pool_delete:
            return metrics.RELEASE_POOL_PURGED, "pool purged"
        return metrics.RELEASE_REQUEST_CHANGED, "request changed"

    async def _release(self, key: str, ip: IPAddress) -> str | None:
        """Take ``key`` off the claim of ``ip``; the claim's pool if this call let the IP go."""
        term = self.term
        claim = term.book.claim(ip)
        if claim is None or key not in claim.services:
            return None
        name = claim_name_for(ip)
        cached = term.caches.claims.get(name) or await self._get_claim(name)
        for _ in range(5):
            current = claim_info(cached) if cached is not None else None
            if current is None:
                break
            if key not in current.services:
                self.term.book.claim_seen(current)
                return None
            if set(current.services) - {key}:
                stored = await term.writer.update(IPCLAIMS, name, leave_claim(key))
                self._seen(stored)
                log.info("claim.left", service=key, ip=str(ip), claim=name)
                return claim.pool
            rv = ((cached or {}).get("metadata") or {}).get("resourceVersion")
            try:
                await term.writer.delete(IPCLAIMS, name, resource_version=rv)
                break
            except Conflict:  # changed since we looked (placed, joined...): look again
                cached = await self._get_claim(name)
        else:
            raise Conflict(409, "Conflict", f"claim {name} kept changing while being released")
        term.book.claim_gone(ip)
        term.wake_waiting()
        log.info("claim.deleted", service=key, ip=str(ip), claim=name)
        return claim.pool

    async def _get_claim(self, name: str) -> Obj | None:
        try:
            return await self.api.get(IPCLAIMS, name)
        except NotFound:
            return None

    async def _confirm_gone(self, key: str) -> bool:
        namespace, _, name = key.partition("/")
        try:
            obj = await self.api.get(SERVICES, name, namespace)
        except NotFound:
            return True
        return is_deleting(obj)

    # --- the Service ------------------------------------------------------------------------
    async def _write_service(
        self, key: str, desired: list[IPAddress], ours: set[IPAddress]
    ) -> bool:
        """Spec and status of the Service; False if it vanished meanwhile."""
        namespace, _, name = key.partition("/")
        writer = self.term.writer
        try:
            # submitted together so the status write starts from the spec write's result
            # (one lane per object), not from a cache that has not seen it yet
            await asyncio.gather(
                writer.update(SERVICES, name, set_service_ips(desired, ours), namespace=namespace),
                writer.update_status(
                    SERVICES, name, set_ingress(desired, ours), namespace=namespace
                ),
            )
        except NotFound:
            log.info("service.vanished", service=key)
            return False
        return True

    async def _mark(self, plan: AllocationPlan, obj: Obj | None) -> None:
        """Claims kept outside their pool get InPool=False (and the Service an Event, once)."""
        term = self.term
        marked = {m.ip: m for m in plan.marks}
        for ip in plan.keep:
            mark = marked.get(ip)
            name = claim_name_for(ip)
            cached = term.caches.claims.get(name)
            if cached is None:
                continue
            conditions = (cached.get("status") or {}).get("conditions") or []
            now = next((c for c in conditions if c.get("type") == CONDITION_IN_POOL), None)
            if mark is None and (now is None or now.get("status") == "True"):
                continue
            if mark is not None and now is not None and now.get("reason") == mark.reason:
                continue
            condition = in_pool_condition(mark.reason if mark else "", mark.message if mark else "")
            try:
                await term.writer.update_status(IPCLAIMS, name, condition_mutation(condition))
            except NotFound:
                continue
            if mark is not None and obj is not None:
                term.events.tell(_service(obj), "Warning", mark.reason, mark.message, ip=str(ip))

    def _report(self, key: str, obj: Obj | None, plan: AllocationPlan) -> None:
        term = self.term
        if any(p.waiting for p in plan.problems):
            term.waiting.add(key)
        else:
            term.waiting.discard(key)
        if not plan.problems:
            term.reported.pop(key, None)
            return
        problem = plan.problems[0]
        last = (problem.reason, problem.message)
        if term.reported.get(key) == last or obj is None:
            return
        term.reported[key] = last
        metrics.ALLOCATION_FAILURES.labels(metrics.failure_reason(problem.reason)).inc()
        term.events.tell(_service(obj), "Warning", problem.reason, problem.message)

    def _event(self, key: str, obj: Obj | None, reason: str, message: str) -> None:
        """A Normal Event on the Service (a bare reference when it is already gone)."""
        namespace, _, name = key.partition("/")
        involved = obj if obj is not None else {"metadata": {"name": name, "namespace": namespace}}
        self.term.events.emit(_service(involved), "Normal", reason, message)

    def _time(
        self, key: str, seen_at: float, plan: AllocationPlan, served: bool, raced: bool
    ) -> None:
        """Observe the allocation duration once the Service carries a new IP; keep the start
        while it still waits (a pool, space, a lost race), forget it otherwise."""
        first_seen = self.term.first_seen
        if served:
            metrics.ALLOCATION_SECONDS.observe(time.monotonic() - seen_at)
            first_seen.pop(key, None)
        elif raced or any(p.waiting for p in plan.problems):
            first_seen[key] = seen_at
        else:
            first_seen.pop(key, None)

    def _log(
        self, plan: AllocationPlan, desired: list[IPAddress], acquired: list[IPAddress]
    ) -> None:
        if acquired or plan.release:
            log.info(
                "service.allocated",
                service=plan.service,
                ips=[str(ip) for ip in desired],
                acquired=[str(ip) for ip in acquired],
                released=[str(ip) for ip in plan.release],
            )


def _service(obj: Obj) -> Obj:
    """The Service as an Event's involved object."""
    return reference("v1", "Service", obj)
