"""`eipctl nodeips`: the process, wired on `kube.manager.Manager`.

Every replica watches Nodes, IpClaims, IpClaimPools and the Pods that carry
``eipctl.io/external-ip`` (a standby keeps warm caches). The Lease holder (``eipctl-nodeips``)
runs a term: a work queue keyed by Node name, a serialized writer and the `NodeReconciler`,
started with every Node (and every Node a node claim names) queued, which heals whatever
happened while nobody led. Safety does not depend on the Lease (docs/node-ips.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import structlog

from eipctl.cloud.provider import AddressProvider
from eipctl.core.claims import is_node_ip_claim, node_of
from eipctl.core.fields import Obj, name_of
from eipctl.core.naming import LABEL_EXTERNAL_IP
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, NODES, KubeApi, ResourceRef
from eipctl.kube.informer import ListWatchApi
from eipctl.kube.leader import LeaseApi
from eipctl.kube.manager import Component, LeaderTerm, Manager, clients
from eipctl.kube.workqueue import Handler
from eipctl.nodeips.reconciler import NodeReconciler
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.health import Health

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-nodeips"
EVENT_SOURCE = "eipctl-nodeips"
"""`source.component` of the Events this process posts."""
MANAGED = Component("nodeips", LEASE_NAME, EVENT_SOURCE, publish_leader=False)
PODS = ResourceRef("", "v1", "pods", "Pod", namespaced=True)


async def run(settings: NodeIpsSettings, *, health: Health, stop: asyncio.Event) -> None:
    """Entry point of `eipctl nodeips` (cli/main.py COMMANDS)."""
    async with clients(settings.kubeconfig) as conn, _providers(settings) as providers:
        node_ips = NodeIps(conn.api, settings, lease_api=conn.lease_api, providers=providers)
        await node_ips.run(health=health, stop=stop, settle_heap=True)


@asynccontextmanager
async def _providers(settings: NodeIpsSettings) -> AsyncIterator[dict[str, AddressProvider]]:
    """The cloud providers the settings ask for (AWS with ``--cluster-id``); closed on exit."""
    providers: dict[str, AddressProvider] = {}
    if settings.cluster_id:
        from eipctl.cloud.aws import AwsProvider  # optional dependency: the `aws` extra

        providers["aws"] = AwsProvider(
            cluster_id=settings.cluster_id,
            region=settings.aws_region,
            endpoint_url=settings.aws_endpoint_url,
        )
    try:
        yield providers
    finally:
        for provider in providers.values():
            await provider.close()


class NodeIps:
    """One replica of `eipctl nodeips`."""

    def __init__(
        self,
        api: KubeApi,
        settings: NodeIpsSettings,
        *,
        lease_api: LeaseApi | None = None,
        providers: Mapping[str, AddressProvider] | None = None,
        watch_api: ListWatchApi | None = None,
    ) -> None:
        self.api = api
        self.settings = settings
        self.providers = dict(providers or {})
        m: Manager[str] = Manager(
            MANAGED, api, self, settings, lease_api=lease_api, watch_api=watch_api
        )
        self.manager = m
        self.recorder = m.recorder
        self.nodes = m.informer(NODES, writer_cache=True)
        self.claims = m.informer(IPCLAIMS, writer_cache=True)
        self.pools = m.informer(IPCLAIMPOOLS)
        self.pods = m.informer(PODS, label_selector=LABEL_EXTERNAL_IP)
        self.reconciler: NodeReconciler | None = None
        self.nodes.add_change_handler(self._on_node)
        self.claims.add_change_handler(self._on_claim)
        self.pools.add_change_handler(self._on_wake)
        self.pods.add_change_handler(self._on_wake)

    @property
    def synced(self) -> bool:
        return self.manager.synced

    @property
    def terms(self) -> int:
        return self.manager.terms

    async def run(
        self, *, health: Health | None = None, stop: asyncio.Event, settle_heap: bool = False
    ) -> None:
        await self.manager.run(health=health, stop=stop, settle_heap=settle_heap)

    # --- one term ---------------------------------------------------------------------------
    async def start_term(self, term: LeaderTerm[str]) -> Handler[str]:
        """Every Node queued first; the reconciler handles each Node name."""
        s = self.settings
        reconciler = NodeReconciler(
            api=self.api,
            nodes=self.nodes,
            claims=self.claims,
            pools=self.pools,
            pods=self.pods,
            writer=term.writer,
            recorder=self.recorder,
            default_pool=s.default_node_pool,
            prevent_deallocation=s.prevent_deallocation,
            requeue_interval=s.node_reconciliation_requeue_interval,
            min_interval=s.node_min_reconciliation_interval,
            providers=self.providers,
        )
        self.reconciler = reconciler
        for name in self._all_node_names():
            term.queue.add(name)
        log.info("nodeips.leading", term=term.number, nodes=len(self.nodes), identity=s.identity)
        return reconciler.reconcile

    async def end_term(self, term: LeaderTerm[str]) -> None:
        self.reconciler = None
        log.info("nodeips.term_ended", term=term.number)

    def _all_node_names(self) -> list[str]:
        names = {name_of(o) for o in self.nodes.objects()}
        names |= {node_of(o) for o in self.claims.objects() if is_node_ip_claim(o)}
        return sorted(n for n in names if n)

    # --- informer handlers (quick; only enqueue) --------------------------------------------
    def _on_node(self, old: Obj | None, new: Obj | None) -> None:
        if self.manager.leading:
            self.manager.enqueue(name_of(new or old or {}))
            self._on_wake(old, new)  # a cordon or a deletion may free a claim for reuse

    def _on_claim(self, old: Obj | None, new: Obj | None) -> None:
        if not self.manager.leading:
            return
        if not any(o is not None and is_node_ip_claim(o) for o in (old, new)):
            if new is None:
                self._on_wake(old, new)  # an address was freed
            return
        for node in {node_of(old or {}), node_of(new or {})} - {""}:
            self.manager.enqueue(node)
        if new is None or not node_of(new):
            self._on_wake(old, new)  # released or orphaned: waiting Nodes may use it

    def _on_wake(self, _old: Obj | None, _new: Obj | None) -> None:
        if self.reconciler is not None:
            for name in sorted(self.reconciler.waiting):
                self.manager.enqueue(name)
