"""`eipctl allocator`: the process. Informers always; acting only while leader.

Lifecycle: connect, start the informers (a standby keeps warm caches), wait until they have
synced, then contend for the Lease ``eipctl-allocator``. Each leadership term builds a fresh
`Term` (book rebuilt from the caches before any work), runs the workers, and throws it all
away when the term ends, cancelling in-flight writes: the next term starts from the API's
truth. Returns when ``stop`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import structlog

from eipctl.allocator import metrics
from eipctl.allocator.pools import PoolReconciler
from eipctl.allocator.services import ServiceReconciler
from eipctl.allocator.state import Caches, Term
from eipctl.core.allocation import AllocationBook
from eipctl.kube.client import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    NAMESPACES,
    SERVICES,
    KubeApi,
    Obj,
    connect,
)
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import ChangeFunc, Informer
from eipctl.kube.leader import LeaderElector
from eipctl.kube.metrics import LEADER
from eipctl.kube.workqueue import DONE, Result, WorkQueue, run_workers
from eipctl.kube.writer import SerializedWriter
from eipctl.runtime.config import AllocatorSettings
from eipctl.runtime.health import Health

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-allocator"
EVENT_SOURCE = "eipctl-allocator"
"""`source.component` of the Events this process posts."""
RESYNC_INTERVAL = 300.0
"""Seconds between full passes over every object: insurance against a missed event."""


class Allocator:
    """The allocator bound to one API connection; `lead` runs one leadership term."""

    def __init__(self, api: KubeApi, settings: AllocatorSettings) -> None:
        self.api = api
        self.settings = settings
        self.caches = Caches(
            services=Informer(api, SERVICES),
            claims=Informer(api, IPCLAIMS),
            pools=Informer(api, IPCLAIMPOOLS),
            namespaces=Informer(api, NAMESPACES),
        )
        self.term: Term | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.events = EventRecorder(api, EVENT_SOURCE, host=settings.identity)
        self.caches.services.add_change_handler(self._to_term(lambda t: t.on_service))
        self.caches.claims.add_change_handler(self._to_term(lambda t: t.on_claim))
        self.caches.pools.add_change_handler(self._to_term(lambda t: t.on_pool))
        self.caches.namespaces.add_change_handler(self._to_term(lambda t: t.on_namespace))
        LEADER.labels(metrics.COMPONENT).set(0)

    def _to_term(self, method: Callable[[Term], ChangeFunc]) -> ChangeFunc:
        """An informer callback forwarded to the current term (dropped while standing by)."""

        def forward(old: Obj | None, new: Obj | None) -> None:
            if self.term is not None:
                method(self.term)(old, new)

        return forward

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.caches.all())

    def start(self) -> None:
        for informer in self.caches.all():
            informer.start()

    async def stop(self) -> None:
        for informer in self.caches.all():
            await informer.stop()
        await self.events.flush()

    async def wait_synced(self) -> None:
        for informer in self.caches.all():
            await informer.wait_synced()

    async def lead(self) -> None:
        """One leadership term: rebuild, then work until cancelled."""
        await self.wait_synced()
        writer = SerializedWriter(self.api)
        writer.use_cache(SERVICES, self.caches.services)
        writer.use_cache(IPCLAIMS, self.caches.claims)
        writer.use_cache(IPCLAIMPOOLS, self.caches.pools)
        term = Term(
            caches=self.caches,
            book=AllocationBook(
                purge_on_pool_delete=self.settings.purge_on_pool_delete,
                serve_unclassed=self.settings.serve_unclassed_load_balancers,
            ),
            queue=WorkQueue("allocator"),
            writer=writer,
            events=self.events,
        )
        services = ServiceReconciler(term, self.api)
        pools = PoolReconciler(term, self.api, purge_on_delete=self.settings.purge_on_pool_delete)

        async def handle(key: str) -> Result:
            kind, _, rest = key.partition(":")
            if kind == "svc":
                return await services.reconcile(rest)
            if kind == "pool":
                return await pools.reconcile(rest)
            if kind == "claim":
                return await pools.reconcile_claim(rest)
            if kind == "pools":
                return await pools.refresh()
            return DONE

        term.rebuild()
        self.term = term
        LEADER.labels(metrics.COMPONENT).set(1)
        log.info("allocator_leading", identity=self.settings.identity)
        workers = asyncio.create_task(
            run_workers(term.queue, handle, workers=self.settings.workers, drain_timeout=0.1)
        )
        self._background.add(workers)  # a second cancel must not orphan the workers
        workers.add_done_callback(self._background.discard)
        resync = asyncio.create_task(_resync_every(term, RESYNC_INTERVAL))
        try:
            await asyncio.shield(workers)
        finally:
            self.term = None
            LEADER.labels(metrics.COMPONENT).set(0)
            metrics.clear_all_pool_addresses()
            resync.cancel()
            workers.cancel()
            await writer.close()  # a write still queued must not land after the term
            await asyncio.wait({workers})
            log.info("allocator_standing_by", identity=self.settings.identity)


async def _resync_every(term: Term, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        log.info("allocator_resync")
        term.resync()


async def run(settings: AllocatorSettings, *, health: Health, stop: asyncio.Event) -> None:
    """Entry point of `eipctl allocator` (see cli/main.py)."""
    api = await connect(settings.kubeconfig)
    allocator = Allocator(api, settings)
    health.add_readiness_check("informers-synced", lambda: allocator.synced)
    allocator.start()
    try:
        await _until_stopped(_contend(allocator, settings), stop)
    finally:
        await allocator.stop()
        await api.close()


async def _contend(allocator: Allocator, settings: AllocatorSettings) -> None:
    if not settings.leader_elect:
        await allocator.lead()
        return
    elector = LeaderElector(allocator.api, settings.election(LEASE_NAME))
    await allocator.wait_synced()
    await elector.run(allocator.lead)


async def _until_stopped(work: Awaitable[None], stop: asyncio.Event) -> None:
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
