"""`eipctl allocator`: the process, wired on `kube.manager.Manager`.

Every replica keeps warm caches (Services, IpClaims, IpClaimPools, Namespaces); the holder of
the Lease ``eipctl-allocator`` runs a term. Each term builds a fresh `Term` (the book rebuilt
from the caches before any work, then every object queued) and throws it all away when the
term ends: the next term starts from the API's truth. Returns when ``stop`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import assert_never

import structlog

from eipctl.allocator import metrics
from eipctl.allocator.keys import AllocatorKey, AllPools, ClaimKey, PoolKey, ServiceKey
from eipctl.allocator.pools import PoolReconciler
from eipctl.allocator.services import ServiceReconciler
from eipctl.allocator.state import CLAIM_INDEXERS, Caches, Term
from eipctl.core.allocation import AllocationBook
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, NAMESPACES, SERVICES, KubeApi, Obj
from eipctl.kube.informer import ChangeFunc
from eipctl.kube.leader import LeaseApi
from eipctl.kube.manager import Component, LeaderTerm, Manager, clients
from eipctl.kube.workqueue import Handler, Result
from eipctl.runtime.config import AllocatorSettings
from eipctl.runtime.health import Health

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-allocator"
EVENT_SOURCE = "eipctl-allocator"
"""`source.component` of the Events this process posts."""
MANAGED = Component(metrics.COMPONENT, LEASE_NAME, EVENT_SOURCE)
RESYNC_INTERVAL = 300.0
"""Seconds between full passes over every object: insurance against a missed event."""


async def run(settings: AllocatorSettings, *, health: Health, stop: asyncio.Event) -> None:
    """Entry point of `eipctl allocator` (see cli/main.py)."""
    async with clients(settings.kubeconfig) as conn:
        allocator = Allocator(conn.api, settings, lease_api=conn.lease_api)
        await allocator.manager.run(health=health, stop=stop, settle_heap=True)


class Allocator:
    """The allocator bound to one API connection: its caches, and what each term runs."""

    def __init__(
        self, api: KubeApi, settings: AllocatorSettings, *, lease_api: LeaseApi | None = None
    ) -> None:
        self.api = api
        self.settings = settings
        m: Manager[AllocatorKey] = Manager(MANAGED, api, self, settings, lease_api=lease_api)
        self.manager = m
        self.events = m.recorder
        self.caches = Caches(
            services=m.informer(SERVICES, writer_cache=True),
            claims=m.informer(IPCLAIMS, writer_cache=True, indexers=CLAIM_INDEXERS),
            pools=m.informer(IPCLAIMPOOLS, writer_cache=True),
            namespaces=m.informer(NAMESPACES),
        )
        self.term: Term | None = None
        self.caches.services.add_change_handler(self._to_term(lambda t: t.on_service))
        self.caches.claims.add_change_handler(self._to_term(lambda t: t.on_claim))
        self.caches.pools.add_change_handler(self._to_term(lambda t: t.on_pool))
        self.caches.namespaces.add_change_handler(self._to_term(lambda t: t.on_namespace))
        m.add_leader_runnable("allocator-resync", self._resync_every)

    def _to_term(self, method: Callable[[Term], ChangeFunc]) -> ChangeFunc:
        """An informer callback forwarded to the current term (dropped while standing by)."""

        def forward(old: Obj | None, new: Obj | None) -> None:
            if self.term is not None:
                method(self.term)(old, new)

        return forward

    # --- the manager's lifecycle, for tests that drive it by hand ----------------------------
    def start(self) -> None:
        self.manager.start()

    async def lead(self) -> None:
        await self.manager.lead()

    async def stop(self) -> None:
        await self.manager.stop()

    # --- one term -----------------------------------------------------------------------------
    async def start_term(self, lead: LeaderTerm[AllocatorKey]) -> Handler[AllocatorKey]:
        """Rebuild the book from the caches and queue everything; the handler of each key.

        The term is current from before its rebuild, which yields to the loop: changes the
        informers see meanwhile reach it (`Term.rebuild`); `end_term` drops it also when the
        term is lost during the rebuild.
        """
        term = Term(
            caches=self.caches,
            book=AllocationBook(
                purge_on_pool_delete=self.settings.purge_on_pool_delete,
                serve_unclassed=self.settings.serve_unclassed_load_balancers,
            ),
            queue=lead.queue,
            writer=lead.writer,
            events=self.events,
        )
        services = ServiceReconciler(term, self.api)
        pools = PoolReconciler(term, self.api, purge_on_delete=self.settings.purge_on_pool_delete)

        async def handle(key: AllocatorKey) -> Result:
            match key:
                case ServiceKey(service):
                    return await services.reconcile(service)
                case PoolKey(pool):
                    return await pools.reconcile(pool)
                case ClaimKey(claim):
                    return await pools.reconcile_claim(claim)
                case AllPools():
                    return await pools.refresh()
                case _:
                    assert_never(key)

        self.term = term
        log.info("allocator.leading", identity=self.settings.identity)
        await term.rebuild()
        return handle

    async def end_term(self, _lead: LeaderTerm[AllocatorKey]) -> None:
        self.term = None
        metrics.clear_all_pool_addresses()
        log.info("allocator.standing_by", identity=self.settings.identity)

    async def _resync_every(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_INTERVAL)
            if self.term is not None:
                log.info("allocator.resync")
                await self.term.resync()
