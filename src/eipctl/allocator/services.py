"""Service reconcile: make what a Service holds equal to what it asks for.

Level-based: the plan comes from the Service in the cache and the book, whatever event
caused the call. Order of writes, chosen so a crash at any point leaves nothing handed out
twice and nothing that a restart cannot finish:

- acquire: create the IpClaim first (the reservation), then put the IP on the Service;
- release: take the IP off the Service first, then drop the Service from the claim (delete
  it when it was the last holder, with a resourceVersion precondition so a Service joining
  at that moment is never cut off).
"""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, IPv6Address

import structlog

from eipctl.allocator.state import Term
from eipctl.allocator.views import (
    Refused,
    claim_info,
    condition_mutation,
    in_pool_condition,
    is_deleting,
    join_claim,
    leave_claim,
    new_claim,
    recorded_ips,
    service_info,
    set_ingress,
    set_service_ips,
)
from eipctl.core.allocation import Acquire, ClaimInfo, Plan, ServiceInfo
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import IPCLAIMS, SERVICES, KubeApi, Obj
from eipctl.kube.errors import AlreadyExists, Conflict, NotFound
from eipctl.kube.workqueue import DONE, Result, requeue_after

log = structlog.get_logger(__name__)

IPAddress = IPv4Address | IPv6Address


class ServiceReconciler:
    def __init__(self, term: Term, api: KubeApi) -> None:
        self.term = term
        self.api = api

    async def reconcile(self, key: str) -> Result:
        term = self.term
        obj = term.caches.services.get(key)
        info: ServiceInfo | None = None
        if obj is not None and not is_deleting(obj):
            info = service_info(obj)
        elif term.book.held_by(key) and not await self._confirm_gone(key):
            return requeue_after(0.5)  # the cache lags a Service that exists
        namespace = key.partition("/")[0]
        plan = term.book.plan(key, info, term.caches.namespace_labels(namespace))
        raced = False
        acquired: list[IPAddress] = []
        try:
            for acq in plan.acquire:
                if await self._acquire(key, acq, info):
                    acquired.append(acq.ip)
                else:
                    raced = True
        finally:
            for acq in plan.acquire:
                if acq.ip not in acquired and not acq.join:
                    term.book.settle(acq.ip, key, None)
        desired = sorted((*plan.keep, *acquired), key=lambda ip: (ip.version, int(ip)))
        if obj is not None and info is not None:
            ours = {*plan.keep, *plan.release, *acquired, *recorded_ips(obj)}
            await self._write_service(key, desired, ours)
        for ip in plan.release:
            await self._release(key, ip)
        self._log(plan, desired, acquired)
        await self._mark(plan, obj)
        self._report(key, obj, plan)
        return requeue_after(0) if raced else DONE

    # --- claims ---------------------------------------------------------------------------
    async def _acquire(self, key: str, acq: Acquire, info: ServiceInfo | None) -> bool:
        """Create (or join) the claim; False if someone else holds the IP after all."""
        term = self.term
        name = claim_name_for(acq.ip)
        sharing_key = info.annotations.get("external-ip-sharing-key", "").strip() if info else ""
        if acq.join:
            try:
                stored = await term.writer.update(IPCLAIMS, name, join_claim(key, sharing_key))
            except (Refused, NotFound) as exc:
                log.info("claim_join_refused", service=key, ip=str(acq.ip), error=str(exc))
                return False
            self._seen(stored)
            log.info("claim_joined", service=key, ip=str(acq.ip), claim=name)
            return True
        body = new_claim(acq.ip, term.book.pool(acq.pool), acq.pool, key, sharing_key)
        try:
            stored = await term.writer.create(IPCLAIMS, body)
        except AlreadyExists:
            try:
                current = await self.api.get(IPCLAIMS, name)
            except NotFound:
                return False
            seen = self._seen(current)
            mine = seen is not None and seen.owned and key in seen.services
            log.info("claim_taken", service=key, ip=str(acq.ip), claim=name, ours=mine)
            return mine
        self._seen(stored)
        log.info("claim_created", service=key, ip=str(acq.ip), pool=acq.pool, claim=name)
        return True

    def _seen(self, obj: Obj) -> ClaimInfo | None:
        info = claim_info(obj)
        if info is not None:
            self.term.book.claim_seen(info)
        return info

    async def _release(self, key: str, ip: IPAddress) -> None:
        term = self.term
        claim = term.book.claim(ip)
        if claim is None or key not in claim.services:
            return
        name = claim_name_for(ip)
        cached = term.caches.claims.get(name) or await self._get_claim(name)
        for _ in range(5):
            current = claim_info(cached) if cached is not None else None
            if current is None:
                break
            if key not in current.services:
                self.term.book.claim_seen(current)
                return
            if set(current.services) - {key}:
                stored = await term.writer.update(IPCLAIMS, name, leave_claim(key))
                self._seen(stored)
                log.info("claim_left", service=key, ip=str(ip), claim=name)
                return
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
        log.info("claim_deleted", service=key, ip=str(ip), claim=name)

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
    ) -> None:
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
            log.info("service_vanished", service=key)

    async def _mark(self, plan: Plan, obj: Obj | None) -> None:
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
            now = next((c for c in conditions if c.get("type") == "InPool"), None)
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
                log.warning(
                    "allocation_marked", service=plan.service, ip=str(ip), reason=mark.reason
                )
                term.events.emit(_typed(obj), "Warning", mark.reason, mark.message)

    def _report(self, key: str, obj: Obj | None, plan: Plan) -> None:
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
        log.warning("service_problem", service=key, reason=problem.reason, message=problem.message)
        term.events.emit(_typed(obj), "Warning", problem.reason, problem.message)

    def _log(self, plan: Plan, desired: list[IPAddress], acquired: list[IPAddress]) -> None:
        if acquired or plan.release:
            log.info(
                "service_allocated",
                service=plan.service,
                ips=[str(ip) for ip in desired],
                acquired=[str(ip) for ip in acquired],
                released=[str(ip) for ip in plan.release],
            )


def _typed(obj: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", **obj}
