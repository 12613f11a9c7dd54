"""`eipctl scheduler`: keeps one IpClaim per external IP in use and places claims on live nodes.

Wired on `kube.manager.Manager`. Every replica, leader or not, runs the informers (IpClaims,
IpNodes, IpClaimPools, Services), the liveness prober (authenticated UDP to every node's
controller, `net.liveness`) and the `NodeWatch`, which judges the replies on its own clock,
so a standby that takes the Lease already knows which nodes are dead and acts at once. Only
the Lease holder runs a term: the `NodeConditions` (Live on each IpNode), the `Placer` and
the `ServiceClaims` behind the work queue (keys in `scheduler.keys`), started with a full
reconcile of every claim and every Service IP (which heals whatever happened while no
scheduler was leading).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import assert_never

import structlog

from eipctl.core.eligibility import facts_of
from eipctl.core.fields import Obj, name_of
from eipctl.core.liveness import Liveness, Transition
from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.core.local_endpoints import is_local, trim_slice
from eipctl.kube.client import (
    ENDPOINTSLICES,
    IPCLAIMPOOLS,
    IPCLAIMS,
    IPNODES,
    NODES,
    SECRETS,
    SERVICES,
    KubeApi,
    object_key,
)
from eipctl.kube.events import EventRecorder
from eipctl.kube.leader import LeaderElector, LeaseApi
from eipctl.kube.manager import Component, LeaderTerm, Manager, clients
from eipctl.kube.workqueue import Handler, Result, requeue_after
from eipctl.net.liveness import LivenessProber
from eipctl.runtime.config import SchedulerSettings
from eipctl.runtime.health import Health
from eipctl.runtime.liveness_key import KeyFile
from eipctl.scheduler import claims as c
from eipctl.scheduler import metrics
from eipctl.scheduler.claim_facts import ClaimFactsMemo
from eipctl.scheduler.claims_by_node import NODE_INDEX, placed_node
from eipctl.scheduler.digests import NodeDigests
from eipctl.scheduler.keys import Pass, SchedulerKey, ServiceIpKey
from eipctl.scheduler.liveness_secret import LivenessSecret
from eipctl.scheduler.local_traffic import SERVICE_INDEX, LocalTraffic, slice_service
from eipctl.scheduler.node_conditions import NodeConditions
from eipctl.scheduler.node_eligibility import NodeEligibility
from eipctl.scheduler.node_keys import NodeKeyCache
from eipctl.scheduler.node_watch import NodeWatch
from eipctl.scheduler.pacing import pace_after, rest_after
from eipctl.scheduler.placing import Placer
from eipctl.scheduler.service_claims import ServiceClaims, ServiceIndex
from eipctl.scheduler.service_events import ServiceEvents

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-scheduler"
EVENT_SOURCE = "eipctl-scheduler"
"""`source.component` of the Events this process posts."""
MANAGED = Component(metrics.COMPONENT, LEASE_NAME, EVENT_SOURCE)


async def run(settings: SchedulerSettings, *, health: Health, stop: asyncio.Event) -> None:
    """The process: connect, watch, contend for the Lease, schedule while leading, until stop."""
    async with clients(settings.kubeconfig) as conn:
        keyring = None
        if settings.liveness_key_file:
            keyring = await _liveness_key(settings, conn.api, health, stop)
            if keyring is None:
                return  # stopped while waiting for it
        scheduler = Scheduler(conn.api, settings, lease_api=conn.lease_api, keyring=keyring)
        await scheduler.run(health=health, stop=stop, settle_heap=True)


async def _liveness_key(
    settings: SchedulerSettings, api: KubeApi, health: Health, stop: asyncio.Event
) -> Keyring | None:
    """The liveness keyring, waited for while the Secret is created (`liveness_secret`)."""
    assert settings.liveness_key_file
    key_file = KeyFile(settings.liveness_key_file)
    health.add_readiness_reason("liveness-key", key_file.not_ready)
    secret = None
    if settings.liveness_secret:
        secret = LivenessSecret(
            api,
            EventRecorder(api, EVENT_SOURCE),
            name=settings.liveness_secret,
            namespace=settings.lease_namespace,
            manager=EVENT_SOURCE,
            replica=settings.identity,
        )
        health.add_readiness_reason("liveness-secret", lambda: secret.problem if secret else None)
    return await key_file.wait(stop, while_missing=None if secret is None else secret.ensure)


class Scheduler:
    """One replica. `run` returns when ``stop`` is set (the Lease is released on the way out)."""

    def __init__(
        self,
        api: KubeApi,
        settings: SchedulerSettings,
        *,
        lease_api: LeaseApi | None = None,
        clock: Callable[[], float] | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        """``keyring``: the liveness key (None: no prober; only nodes without a liveness
        endpoint, judged by their heartbeat counter, can be live: unit tests, upgrades)."""
        self.api = api
        self.settings = settings
        self._clock = clock
        m: Manager[SchedulerKey] = Manager(MANAGED, api, self, settings, lease_api=lease_api)
        self.manager = m
        self.recorder = m.recorder
        self.claims = m.informer(IPCLAIMS, writer_cache=True, indexers={NODE_INDEX: placed_node})
        self.nodes = m.informer(IPNODES)
        self.pools = m.informer(IPCLAIMPOOLS)
        self.services = m.informer(SERVICES)
        self.kube_nodes = m.informer(NODES)
        """The core v1 Nodes: the exclusion label, eipctl's taint, cordon (planned moves)."""
        self.endpoint_slices = m.informer(
            ENDPOINTSLICES, indexers={SERVICE_INDEX: slice_service}, transform=trim_slice
        )
        """Where externalTrafficPolicy: Local Services have endpoints (`local_traffic`)."""
        self.local_traffic = LocalTraffic(self.services, self.endpoint_slices)
        self.claim_facts = ClaimFactsMemo()
        """What placement passes read of each claim version, kept across terms."""
        self.liveness = Liveness(settings.liveness_timeout)
        self.prober: LivenessProber | None = None
        self.node_watch = NodeWatch(
            self.liveness,
            clock=self.now,
            kick=lambda: m.enqueue(Pass.PLACE),
            leading=lambda: m.leading,
            identity=settings.identity,
            set_targets=self._set_targets,
            on_transitions=self._on_transitions,
            drain=self._drain_replies,
        )
        self.digests = NodeDigests()
        if keyring is not None:
            self.prober = LivenessProber(
                keyring,
                interval=settings.liveness_interval,
                on_reply=self._on_reply,
                standing=lambda: Flag.WRITER if m.leading else Flag.NONE,
                digest=self.digests.digest,
                nodes=lambda: len(self.liveness.known()),
            )
            m.add_runnable("liveness-prober", self._probe)
        self.node_keys = NodeKeyCache(
            None
            if self.prober is None or not settings.node_key_namespace
            else m.informer(SECRETS, namespace=settings.node_key_namespace),
            self.prober,
        )
        self.dead_since = self.node_watch.dead_since
        self.index = ServiceIndex()
        self.placer: Placer | None = None
        self.node_conditions: NodeConditions | None = None
        self.node_eligibility: NodeEligibility | None = None
        self._passes_before = 0
        self.claims.add_change_handler(self._on_claim_change)
        self.nodes.add_change_handler(self._on_node_change)
        self.pools.add_change_handler(self._on_pool_change)
        self.services.add_change_handler(self._on_service_change)
        self.kube_nodes.add_change_handler(self._on_kube_node_change)
        self.endpoint_slices.add_change_handler(self._on_slice_change)
        m.add_runnable("liveness-watcher", self.node_watch.run)

    def _set_targets(self, targets: dict[str, tuple[str, int]]) -> None:
        if self.prober is not None:
            self.prober.set_targets(targets)

    def _drain_replies(self) -> None:
        if self.prober is not None:
            self.prober.drain()

    async def _probe(self) -> None:
        assert self.prober is not None
        try:
            await self.prober.run()
        finally:
            self.prober.close()

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        return self.manager.leading

    @property
    def terms(self) -> int:
        return self.manager.terms

    @property
    def elector(self) -> LeaderElector | None:
        return self.manager.elector

    @property
    def placement_passes(self) -> int:
        """Placement passes run by this replica, over all its terms."""
        return self._passes_before + (self.placer.passes if self.placer else 0)

    async def run(
        self, *, health: Health | None = None, stop: asyncio.Event, settle_heap: bool = False
    ) -> None:
        await self.manager.run(health=health, stop=stop, settle_heap=settle_heap)

    # --- one term ---------------------------------------------------------------------------
    async def start_term(self, term: LeaderTerm[SchedulerKey]) -> Handler[SchedulerKey]:
        """Queue a placement pass and every Service IP; the handler of each key."""
        s = self.settings
        queue = term.queue
        placer = Placer(
            claims=self.claims,
            nodes=self.nodes,
            pools=self.pools,
            liveness=self.liveness,
            writer=term.writer,
            recorder=self.recorder,
            services=ServiceEvents(self.services, self.recorder),
            policy=s.policy,
            clock=self.now,
            kick=lambda delay: queue.add_after(Pass.PLACE, delay),
            dead_since=self.dead_since,
            kube_nodes=self.kube_nodes,
            exclude_cordoned=s.exclude_cordoned_nodes,
            local=self.local_traffic,
            returned_at=self.node_watch.returned_at,
            hold_down=s.node_hold_down,
            facts=self.claim_facts,
            by_node=self.claims,
        )
        conditions = NodeConditions(
            self.nodes,
            self.liveness,
            term.writer,
            clock=self.now,
            kick=lambda: self.manager.enqueue(Pass.PLACE),
        )
        eligibility = NodeEligibility(
            self.nodes, term.writer, kick=lambda delay: queue.add_after(Pass.PLACE, delay)
        )
        service_claims = ServiceClaims(
            index=self.index,
            claims=self.claims,
            services=self.services,
            pools=self.pools,
            writer=term.writer,
            recorder=self.recorder,
            clock=self.now,
            claim_unpooled=s.claim_unpooled_external_ips,
            default_prefix_length=s.default_prefix_length,
            orphan_grace_period=s.orphan_grace_period,
        )

        async def handle(key: SchedulerKey) -> Result:
            match key:
                case Pass.PLACE:
                    if placer.dead_holding(self.now()):  # their claims first, not paced
                        await conditions.sync()  # Live before moves: see node_conditions
                        await placer.failover()
                    rest = rest_after(placer.pass_seconds, self.now() - placer.pass_ended)
                    if rest > 0:  # half the loop at most (`pacing`)
                        return requeue_after(rest)
                    await conditions.sync()  # Live before moves: see node_conditions
                    result = await placer.reconcile()
                    eligibility.sync(placer.excluded)
                    return result
                case Pass.REBALANCE:
                    await conditions.sync()
                    result = await placer.reconcile(rebalance_moves=s.rebalance_max_moves)
                    eligibility.sync(placer.excluded)
                    return result if result.error else requeue_after(s.rebalance_interval)
                case ServiceIpKey(claim):
                    return await service_claims.reconcile(claim)
                case _:
                    assert_never(key)

        queue.add(Pass.PLACE)
        for name in sorted(service_claims.all_keys()):
            queue.add(ServiceIpKey(name))
        if s.rebalance:  # moves only claims whose policy (pool's, else --policy) is spread
            queue.add_after(Pass.REBALANCE, s.rebalance_interval)
        self.placer = placer
        self.node_conditions = conditions
        self.node_eligibility = eligibility
        log.info(
            "scheduler.leading",
            identity=s.identity,
            term=term.number,
            policy=s.policy,
            claims=len(self.claims),
        )
        return handle

    async def end_term(self, term: LeaderTerm[SchedulerKey]) -> None:
        if self.node_conditions is not None:
            await self.node_conditions.close()
            self.node_conditions = None
        if self.node_eligibility is not None:
            await self.node_eligibility.close()
            self.node_eligibility = None
        if self.placer is not None:
            await self.placer.close()
            self._passes_before += self.placer.passes
            self.placer = None
        metrics.clear_claim_phases()
        metrics.EXCLUDED_NODES.clear()
        log.info("scheduler.term_ended", identity=self.settings.identity, term=term.number)

    # --- informer handlers (quick; only enqueue) ----------------------------------------------
    def _on_claim_change(self, old: Obj | None, new: Obj | None) -> None:
        obj = new or old or {}
        self.digests.observe(old, new)
        if self.placer is not None:
            self.placer.observe_claim(new, name_of(obj))  # a planned move bound, or gone
        if old is None or new is None:
            self.manager.enqueue(ServiceIpKey(name_of(obj)))
            self._pass_for_claims()
        elif self.placer is not None and self.placer.is_echo(new):
            return  # our own write coming back: the pass that made it knew
        elif c.placement_of(old) != c.placement_of(new) or not c.consistent(new):
            self._pass_for_claims()

    def _pass_for_claims(self) -> None:
        """A pass for changed claims, paced by what the last pass cost (`pacing`)."""
        last = self.placer.pass_seconds if self.placer is not None else 0.0
        self.manager.enqueue_after(Pass.PLACE, pace_after(last))

    def _on_reply(self, node: str, flags: Flag) -> None:
        if self.node_watch.heard(node, flags) and self.node_conditions is not None:
            self.node_conditions.changed(node)  # a reply moves a verdict only to live or fenced

    def _on_transitions(self, transitions: list[Transition]) -> None:
        if self.node_conditions is not None:
            for t in transitions:
                self.node_conditions.changed(t.node)

    def _on_node_change(self, old: Obj | None, new: Obj | None) -> None:
        self.node_watch.observe(old, new)  # judged first: `observe` compares with its verdict
        if self.node_conditions is not None:
            self.node_conditions.observe(old, new)

    def _on_kube_node_change(self, old: Obj | None, new: Obj | None) -> None:
        """A Node changed: a pass only if what eligibility reads of it did (Nodes' status
        changes often; their labels, taints and cordon rarely)."""
        if old is None or new is None or facts_of(old) != facts_of(new):
            self.manager.enqueue(Pass.PLACE)

    def _on_pool_change(self, old: Obj | None, new: Obj | None) -> None:
        self.manager.enqueue(Pass.PLACE)
        if self.manager.leading:
            for name in self.index.manual_names():  # admitted now, or not any more
                self.manager.enqueue(ServiceIpKey(name))

    def _on_service_change(self, old: Obj | None, new: Obj | None) -> None:
        key = object_key(new or old or {})
        for name in self.index.update(key, new):
            self.manager.enqueue(ServiceIpKey(name))
        if is_local(old or {}) != is_local(new or {}):  # its claims follow endpoints, or not
            self.manager.enqueue(Pass.PLACE)

    def _on_slice_change(self, old: Obj | None, new: Obj | None) -> None:
        """A Local Service's endpoints changed: a pass (other slices' churn costs nothing)."""
        if self.local_traffic.relevant(old, new):
            self.manager.enqueue(Pass.PLACE)
