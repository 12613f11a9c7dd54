"""The allocator's running state for one leadership term: caches, book, queue, writer.

Informers outlive terms (a standby keeps warm caches, so a handover is fast); everything
that acts - the `AllocationBook`, the work queue, the writer - is made fresh when a term
starts and rebuilt from the caches *before* any work is taken: existing claims first, then
IPs that Services record but no claim backs, so nothing is handed out twice. The rebuild
yields to the loop as it goes (the Lease is renewed meanwhile) and the term is fed by the
informers from its start, so a change during the rebuild is not lost.

Queue keys (`allocator.keys`): a Service, a pool, a claim, or all pools at once.

The claims cache is indexed by pool (`CLAIM_INDEXERS`): a pool's reconcile, queued after
every claim change, reads its claims from the index instead of scanning every claim.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from eipctl.allocator.keys import ALL_POOLS, AllocatorKey, ClaimKey, PoolKey, ServiceKey
from eipctl.allocator.views import (
    claim_info,
    is_deleting,
    pool_infos,
    service_info,
)
from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import PoolInfo
from eipctl.core.fields import labels_of, name_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATED_IPS,
    ANNOTATION_EXTERNAL_IP,
    LABEL_POOL,
    LOAD_BALANCER_CLASS,
)
from eipctl.kube.client import Obj, object_key
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import IndexFunc, Informer, index_by_label
from eipctl.kube.slices import in_slices
from eipctl.kube.workqueue import WorkQueue
from eipctl.kube.writer import SerializedWriter

log = structlog.get_logger(__name__)

POOL_STATUS_DELAY = 0.3
"""Pool status is rewritten at most this often while claims churn (one write per burst)."""
CLAIMS_BY_POOL = "pool"
"""The claims cache's index of the pool label (`Term.claims_in_pool`)."""
CLAIM_INDEXERS: Mapping[str, IndexFunc] = {CLAIMS_BY_POOL: index_by_label(LABEL_POOL)}
"""The indexes the claims informer must keep (process.py passes them)."""


@dataclass
class Caches:
    services: Informer
    claims: Informer
    pools: Informer
    namespaces: Informer

    def all(self) -> list[Informer]:
        return [self.services, self.claims, self.pools, self.namespaces]

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        obj = self.namespaces.get(namespace)
        return labels_of(obj or {})


def interesting(obj: Mapping[str, Any], *, serve_unclassed: bool = False) -> bool:
    """A Service the allocator must look at: it asks for an IP or records one.

    Asking: the ``external-ip`` annotation, or ``type: LoadBalancer`` with eipctl's
    ``loadBalancerClass`` (or with none, when ``serve_unclassed``).
    """
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if ANNOTATION_EXTERNAL_IP in annotations or ANNOTATION_ALLOCATED_IPS in annotations:
        return True
    spec = obj.get("spec") or {}
    if spec.get("type") != "LoadBalancer":
        return False
    lb_class = spec.get("loadBalancerClass") or ""
    return lb_class == LOAD_BALANCER_CLASS or (serve_unclassed and not lb_class)


def unclassed(obj: Mapping[str, Any]) -> bool:
    """A plain ``type: LoadBalancer``: no ``loadBalancerClass``, no eipctl annotation; served
    only with ``--serve-unclassed-load-balancers`` (`interesting`)."""
    return interesting(obj, serve_unclassed=True) and not interesting(obj)


@dataclass
class Term:
    """One leadership term's acting state; informer handlers feed it while it is current."""

    caches: Caches
    book: AllocationBook
    queue: WorkQueue[AllocatorKey]
    writer: SerializedWriter
    events: EventRecorder
    waiting: set[str] = field(default_factory=set)
    """Services waiting for space or a pool: served again when either changes."""
    reported: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Last (reason, message) posted per object, so a waiting Service is told once."""
    pool_view: dict[str, PoolInfo] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)
    """When (monotonic) a Service was first seen needing attention, for the allocation
    duration metric; dropped once it holds what it asks for."""

    def interesting(self, obj: Mapping[str, Any]) -> bool:
        return interesting(obj, serve_unclassed=self.book.serve_unclassed)

    async def rebuild(self) -> None:
        """Load claims, pools, Services (hand-set IPs) and recorded IPs into the book, then
        queue every object.

        The walk gives the loop back every few milliseconds (`in_slices`): at 10,000
        Services a walk in one go outlasted the Lease's renew deadline. The term is current
        while it walks (the informers' handlers feed it), so each object is read from the
        cache as it is when its turn comes: one deleted meanwhile is skipped, not revived.
        """
        self.refresh_pools()
        claims, services = self.caches.claims, self.caches.services
        left_alone = 0
        async for name in in_slices(claims.keys()):
            obj = claims.get(name)
            info = claim_info(obj) if obj is not None else None
            if info is not None:
                self.book.claim_seen(info)
        async for key in in_slices(services.keys()):
            obj = services.get(key)
            if obj is None or is_deleting(obj):
                continue
            service = service_info(obj)
            self.book.service_seen(service)
            if self.interesting(obj):
                self.book.reserve_recorded(key, service.recorded)
                self.first_seen.setdefault(key, time.monotonic())
            elif unclassed(obj):
                left_alone += 1
        if not self.book.serve_unclassed:
            # a plain LoadBalancer stays <pending> with nothing on it: say so, once a term
            log.info(
                "allocator.unclassed_ignored",
                services=left_alone,
                flag="--serve-unclassed-load-balancers",
                detail="type LoadBalancer Services with no loadBalancerClass and no "
                "external-ip annotation are left alone (another LB controller may own them)",
            )
        await self.resync()
        log.info(
            "allocator.rebuilt",
            claims=len(self.caches.claims),
            pools=len(self.caches.pools),
            services=len(self.caches.services),
        )

    async def resync(self) -> None:
        """Queue every Service, claim and pool (level-based: a no-op for what is right),
        giving the loop back as it goes."""
        await self.resync_services()
        async for name in in_slices(self.caches.claims.keys()):
            self.queue.add(ClaimKey(name))
        for pool in self.book.pools():
            self.queue.add(PoolKey(pool.name))

    async def resync_services(self) -> None:
        services = self.caches.services
        async for key in in_slices(services.keys()):
            obj = services.get(key)
            if obj is not None and self.interesting(obj):
                self.queue.add(ServiceKey(key))

    def refresh_pools(self) -> list[str]:
        """Re-read every pool into the book; returns names whose view changed."""
        infos = pool_infos(self.caches.pools.objects())
        changed = [i.name for i in infos if self.pool_view.get(i.name) != i] + [
            n for n in self.pool_view if n not in {i.name for i in infos}
        ]
        self.pool_view = {i.name: i for i in infos}
        self.book.set_pools(infos)
        return changed

    # --- informer handlers ----------------------------------------------------------------
    def on_service(self, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        key = object_key(obj)
        self._track_service(key, new)
        touched = any(o is not None and self.interesting(o) for o in (old, new))
        if touched or self.book.held_by(key):
            if new is not None and self.interesting(new):
                self.first_seen.setdefault(key, time.monotonic())
            self.queue.add(ServiceKey(key))

    def _track_service(self, key: str, new: Obj | None) -> None:
        """Keep the book's view of every Service: hand-set IPs and what sharing looks at.

        Freed hand-set IPs wake the Services waiting for space; a change in what sharing
        looks at (ports, selector, traffic policy) re-checks everyone sharing with it.
        """
        before = self.book.service(key)
        if new is None or is_deleting(new):
            freed = self.book.service_gone(key)
            after = None
        else:
            after = service_info(new)
            freed = self.book.service_seen(after)
        if freed:
            self.wake_waiting()
        sharing = (before.ports, before.local_traffic, before.selector) if before else None
        if after is None or sharing != (after.ports, after.local_traffic, after.selector):
            for claim in self.book.held_by(key):
                for other in claim.services:
                    if other != key:
                        self.queue.add(ServiceKey(other))

    def on_claim(self, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        assert obj is not None
        before = claim_info(old) if old is not None else None
        after = claim_info(new) if new is not None else None
        if after is not None:
            self.book.claim_seen(after)
        elif before is not None:
            self.book.claim_gone(before.ip)
            self.wake_waiting()
        if before == after:
            return
        for info in (before, after):
            if info is not None:
                for service in info.services:
                    self.queue.add(ServiceKey(service))
                self.queue.add_after(PoolKey(info.pool), POOL_STATUS_DELAY)
        self.queue.add(ClaimKey(name_of(obj)))

    def on_pool(self, _old: Obj | None, new: Obj | None) -> None:
        self.queue.add(ALL_POOLS)
        if new is not None:
            self.queue.add(PoolKey(name_of(new)))

    def on_namespace(self, old: Obj | None, new: Obj | None) -> None:
        labels_old = ((old or {}).get("metadata") or {}).get("labels")
        labels_new = ((new or {}).get("metadata") or {}).get("labels")
        if labels_old == labels_new:
            return
        namespace = name_of(new or old or {})
        for obj in self.caches.services.objects():
            if (obj.get("metadata") or {}).get("namespace") == namespace and self.interesting(obj):
                self.queue.add(ServiceKey(object_key(obj)))

    def wake_waiting(self) -> None:
        for key in self.waiting:
            self.queue.add(ServiceKey(key))

    def holders_of_pool(self, pool: str) -> set[str]:
        return {
            service
            for claim in self.book.claims()
            if claim.pool == pool
            for service in claim.services
        }

    def claims_in_pool(self, pool: str) -> list[Obj]:
        """The cached claims labelled with ``pool`` (per-node copies too), in no order."""
        return self.caches.claims.by_index(CLAIMS_BY_POOL, pool)
