"""Pool and claim reconcile: pool status, the pool-protection finalizer, orphaned claims.

- `AllPools`: re-read every pool (readiness and overlap depend on all of them); Services
  waiting for space, and holders of a pool whose view changed, are looked at again, so a pool
  created or widened serves waiting Services at once and a shrunk one marks its holders.
- `PoolKey`: status (allocated, free, Ready) written only when it changes; the
  finalizer keeps a pool with live allocations from going away (``--purge-on-pool-delete``
  releases them instead).
- `ClaimKey`: an allocator claim listing no Service, or only Services that no longer
  exist, is released. Claims made by anyone else (the scheduler's, for hand-set IPs) are
  never touched.
"""

from __future__ import annotations

import structlog

from eipctl.allocator import metrics
from eipctl.allocator.keys import PoolKey, ServiceKey
from eipctl.allocator.state import Term
from eipctl.allocator.views import claim_info, is_deleting, pool_status, set_finalizer
from eipctl.core.allocation_inputs import PoolInfo
from eipctl.core.claims import reference
from eipctl.core.naming import API_VERSION, POOL_FINALIZER
from eipctl.kube import events
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, SERVICES, KubeApi, Obj
from eipctl.kube.errors import Conflict, NotFound
from eipctl.kube.workqueue import DONE, Result, requeue_after

log = structlog.get_logger(__name__)


class PoolReconciler:
    def __init__(self, term: Term, api: KubeApi, *, purge_on_delete: bool) -> None:
        self.term = term
        self.api = api
        self.purge_on_delete = purge_on_delete

    async def refresh(self) -> Result:
        term = self.term
        changed = term.refresh_pools()
        for name in changed:
            info = term.book.pool(name)
            log.info(
                "pool.seen",
                pool=name,
                ready=bool(info and info.ready),
                problem=info.problem if info else "deleted",
            )
            for service in term.holders_of_pool(name):
                term.queue.add(ServiceKey(service))
            term.queue.add(PoolKey(name))
        if changed:  # waiting Services, and dual-stack ones missing a family, may fit now
            await term.resync_services()
        return DONE

    async def reconcile(self, name: str) -> Result:
        term = self.term
        obj = term.caches.pools.get(name)
        info = term.book.pool(name)
        if obj is None or info is None:
            metrics.clear_pool_addresses(name)
            return DONE
        owned = [c for c in term.claims_in_pool(name) if _owned(c)]
        if info.deleting:
            return await self._deleting(name, obj, owned)
        finalizers = (obj.get("metadata") or {}).get("finalizers") or []
        if POOL_FINALIZER not in finalizers:
            await term.writer.update(IPCLAIMPOOLS, name, set_finalizer(True))
        allocated, free = term.book.counts(name)
        if info.pool is not None:
            metrics.set_pool_addresses(name, info.pool.size, free)
        else:
            metrics.clear_pool_addresses(name)
        generation = (obj.get("metadata") or {}).get("generation")
        mutate = pool_status(info, allocated, free, generation)
        await term.writer.update_status(IPCLAIMPOOLS, name, mutate)
        self._report(name, obj, info.problem, "InvalidPool" if info.pool is None else "Overlap")
        return DONE

    async def _deleting(self, name: str, obj: Obj, owned: list[Obj]) -> Result:
        term = self.term
        if not owned:
            try:
                await term.writer.update(IPCLAIMPOOLS, name, set_finalizer(False))
            except NotFound:
                return DONE
            metrics.clear_pool_addresses(name)
            log.info("pool.released", pool=name)
            return DONE
        allocated = len(owned)
        try:
            mutate = pool_status(term.book.pool(name) or _gone(name), allocated, 0, None)
            await term.writer.update_status(IPCLAIMPOOLS, name, mutate)
        except NotFound:
            return DONE
        if self.purge_on_delete:
            message = f"purging {allocated} allocation(s) (--purge-on-pool-delete)"
            for service in term.holders_of_pool(name):
                term.queue.add(ServiceKey(service))
        else:
            message = f"deletion waits until its {allocated} allocation(s) are released"
        self._report(name, obj, message, "PoolInUse")
        return requeue_after(2.0)

    def _report(self, name: str, obj: Obj, problem: str, reason: str) -> None:
        term = self.term
        key = f"pool/{name}"
        if not problem:
            term.reported.pop(key, None)
            return
        if term.reported.get(key) == (reason, problem):
            return
        term.reported[key] = (reason, problem)
        involved = events.reference(API_VERSION, "IpClaimPool", obj)
        term.events.tell(involved, "Warning", reason, problem)

    # --- claims -----------------------------------------------------------------------------
    async def reconcile_claim(self, name: str) -> Result:
        """Release an allocator claim whose Services are all gone (or that lists none)."""
        term = self.term
        obj = term.caches.claims.get(name)
        if obj is None or not _owned(obj) or is_deleting(obj):
            return DONE
        info = claim_info(obj)
        if info is None:
            return DONE
        alive = [s for s in info.services if await self._service_exists(s)]
        if alive:
            for service in info.services:
                term.queue.add(ServiceKey(service))  # each decides whether it still wants the IP
            return DONE
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        try:
            deleted = await term.writer.delete(IPCLAIMS, name, resource_version=rv)
        except Conflict:
            return requeue_after(0.2)
        term.book.claim_gone(info.ip)
        term.wake_waiting()
        if not deleted:  # someone else removed it first
            return DONE
        metrics.RELEASES.labels(info.pool, metrics.RELEASE_ORPHANED).inc()
        holders = ", ".join(info.services) or "none"
        message = f"released {info.ip} (pool {info.pool}): its Services are gone ({holders})"
        term.events.tell(reference(obj), "Normal", "Released", message, ip=str(info.ip))
        return DONE

    async def _service_exists(self, key: str) -> bool:
        cached = self.term.caches.services.get(key)
        if cached is not None:
            return not is_deleting(cached)
        namespace, _, name = key.partition("/")
        try:
            obj = await self.api.get(SERVICES, name, namespace)
        except NotFound:
            return False
        return not is_deleting(obj)


def _owned(obj: Obj) -> bool:
    info = claim_info(obj)
    return info is not None and info.owned


def _gone(name: str) -> PoolInfo:
    return PoolInfo(name=name, pool=None, deleting=True)
