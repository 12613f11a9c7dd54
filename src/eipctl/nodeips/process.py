"""`eipctl nodeips`: the process. Informers always; acting only while holding the Lease.

Every replica watches Nodes, IpClaims, IpClaimPools and the Pods that carry
``eipctl.io/external-ip`` (a standby keeps warm caches). The Lease holder (``eipctl-nodeips``)
runs a term: a work queue keyed by Node name, a serialized writer and the `NodeReconciler`,
started with every Node (and every Node a node claim names) queued, which heals whatever
happened while nobody led. Safety does not depend on the Lease (docs/node-ips.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

import structlog

from eipctl.cloud.provider import AddressProvider
from eipctl.core.fields import Obj, name_of
from eipctl.core.naming import LABEL_EXTERNAL_IP
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, NODES, KubeApi, ResourceRef, connect
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import Informer, ListWatchApi
from eipctl.kube.leader import LeaderElector
from eipctl.kube.workqueue import WorkQueue, run_workers
from eipctl.kube.writer import SerializedWriter
from eipctl.nodeips import views as v
from eipctl.nodeips.reconciler import NodeReconciler
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.health import Health

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-nodeips"
EVENT_SOURCE = "eipctl-nodeips"
"""`source.component` of the Events this process posts."""
PODS = ResourceRef("", "v1", "pods", "Pod", namespaced=True)


async def run(settings: NodeIpsSettings, *, health: Health, stop: asyncio.Event) -> None:
    """Entry point of `eipctl nodeips` (cli/main.py COMMANDS)."""
    api = await connect(settings.kubeconfig)
    lease_api = await connect(settings.kubeconfig)
    providers: dict[str, AddressProvider] = {}
    if settings.cluster_id:
        from eipctl.cloud.aws import AwsProvider  # optional dependency: the `aws` extra

        providers["aws"] = AwsProvider(
            cluster_id=settings.cluster_id,
            region=settings.aws_region,
            endpoint_url=settings.aws_endpoint_url,
        )
    try:
        node_ips = NodeIps(api, settings, lease_api=lease_api, providers=providers)
        await node_ips.run(health=health, stop=stop)
    finally:
        for provider in providers.values():
            await provider.close()
        await lease_api.close()
        await api.close()


def _claim_node(obj: Obj | None) -> str:
    return str(((obj or {}).get("spec") or {}).get("nodeName") or "")


class NodeIps:
    """One replica of `eipctl nodeips`."""

    def __init__(
        self,
        api: KubeApi,
        settings: NodeIpsSettings,
        *,
        lease_api: KubeApi | None = None,
        providers: Mapping[str, AddressProvider] | None = None,
        watch_api: ListWatchApi | None = None,
    ) -> None:
        self.api = api
        self.lease_api = lease_api or api
        self.settings = settings
        self.providers = dict(providers or {})
        source = watch_api or api
        self.nodes = Informer(source, NODES)
        self.claims = Informer(source, IPCLAIMS)
        self.pools = Informer(source, IPCLAIMPOOLS)
        self.pods = Informer(source, PODS, label_selector=LABEL_EXTERNAL_IP)
        self.informers = [self.nodes, self.claims, self.pools, self.pods]
        self.recorder = EventRecorder(api, EVENT_SOURCE, host=settings.identity)
        self.queue: WorkQueue[str] | None = None
        self.reconciler: NodeReconciler | None = None
        self.terms = 0
        self.nodes.add_change_handler(self._on_node)
        self.claims.add_change_handler(self._on_claim)
        self.pools.add_change_handler(self._on_wake)
        self.pods.add_change_handler(self._on_wake)

    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.informers)

    async def run(self, *, health: Health | None = None, stop: asyncio.Event) -> None:
        if health is not None:
            health.add_readiness_check("informers-synced", lambda: self.synced)
        for informer in self.informers:
            informer.start()
        work = asyncio.create_task(self._contend())
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                work.result()  # surface a crash
        finally:
            stopper.cancel()
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
            for informer in self.informers:
                await informer.stop()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await self.recorder.flush()

    async def _contend(self) -> None:
        for informer in self.informers:
            await informer.wait_synced()
        s = self.settings
        if not s.leader_elect:
            await self._term()
            return
        elector = LeaderElector(self.lease_api, s.election(LEASE_NAME))
        await elector.run(self._term)

    async def _term(self) -> None:
        """Lead until cancelled: every Node queued first, then react to changes."""
        self.terms += 1
        s = self.settings
        queue: WorkQueue[str] = WorkQueue("nodeips")
        writer = SerializedWriter(self.api)
        writer.use_cache(NODES, self.nodes)
        writer.use_cache(IPCLAIMS, self.claims)
        reconciler = NodeReconciler(
            api=self.api,
            nodes=self.nodes,
            claims=self.claims,
            pools=self.pools,
            pods=self.pods,
            writer=writer,
            recorder=self.recorder,
            default_pool=s.default_node_pool,
            prevent_deallocation=s.prevent_deallocation,
            requeue_interval=s.node_reconciliation_requeue_interval,
            min_interval=s.node_min_reconciliation_interval,
            providers=self.providers,
        )
        self.queue, self.reconciler = queue, reconciler
        for name in self._all_node_names():
            queue.add(name)
        log.info("nodeips_leading", term=self.terms, nodes=len(self.nodes), identity=s.identity)
        try:
            await run_workers(queue, reconciler.reconcile, workers=s.workers, drain_timeout=0.1)
        finally:
            self.queue = self.reconciler = None
            await writer.close()  # a write still queued must not land after the term
            log.info("nodeips_term_ended", term=self.terms)

    def _all_node_names(self) -> list[str]:
        names = {name_of(o) for o in self.nodes.objects()}
        names |= {_claim_node(o) for o in self.claims.objects() if v.is_node_claim(o)}
        return sorted(n for n in names if n)

    # --- informer handlers (quick; only enqueue) --------------------------------------------
    def _on_node(self, old: Obj | None, new: Obj | None) -> None:
        if self.queue is not None:
            self.queue.add(name_of(new or old or {}))
            self._on_wake(old, new)  # a cordon or a deletion may free a claim for reuse

    def _on_claim(self, old: Obj | None, new: Obj | None) -> None:
        if self.queue is None:
            return
        if not any(o is not None and v.is_node_claim(o) for o in (old, new)):
            if new is None:
                self._on_wake(old, new)  # an address was freed
            return
        for node in {_claim_node(old), _claim_node(new)} - {""}:
            self.queue.add(node)
        if new is None or not _claim_node(new):
            self._on_wake(old, new)  # released or orphaned: waiting Nodes may use it

    def _on_wake(self, _old: Obj | None, _new: Obj | None) -> None:
        if self.queue is not None and self.reconciler is not None:
            for name in sorted(self.reconciler.waiting):
                self.queue.add(name)
