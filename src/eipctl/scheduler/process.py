"""`eipctl scheduler`: keeps one IpClaim per external IP in use and places claims on live nodes.

Every replica, leader or not, runs the informers (IpClaims, IpNodes, IpClaimPools, Services)
and tracks IpNode heartbeats on its own clock, so a standby that takes the Lease already
knows which nodes are dead and acts at once. Only the Lease holder runs a *term*: a work
queue, a serialized writer and the reconcilers, started with a full reconcile of every claim
and every Service IP (which heals whatever happened while no scheduler was leading).

Queue keys: ``place`` (the global placement pass), ``rebalance`` (periodic, with
``--rebalance``), and ``ip/<claim name>`` (claims for hand-set IPs, orphan removal).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from eipctl.core.fields import Obj, labels_of, name_of
from eipctl.core.liveness import Liveness
from eipctl.core.placement import Policy
from eipctl.kube.client import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    IPNODES,
    SERVICES,
    KubeApi,
    connect,
    object_key,
)
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import Informer
from eipctl.kube.leader import LeaderElector
from eipctl.kube.metrics import LEADER
from eipctl.kube.workqueue import DONE, Result, WorkQueue, requeue_after, run_workers
from eipctl.kube.writer import SerializedWriter
from eipctl.runtime.config import SchedulerSettings
from eipctl.runtime.health import Health
from eipctl.scheduler import claims as c
from eipctl.scheduler import metrics
from eipctl.scheduler.metrics import KNOWN_NODES, LIVE_NODES, NODE_HEARTBEAT_AGE
from eipctl.scheduler.placing import Placer
from eipctl.scheduler.service_claims import ServiceClaims, ServiceIndex
from eipctl.scheduler.service_events import ServiceEvents

log = structlog.get_logger(__name__)

LEASE_NAME = "eipctl-scheduler"
PLACE = "place"
REBALANCE = "rebalance"
IP_PREFIX = "ip/"


async def run(settings: SchedulerSettings, *, health: Health, stop: asyncio.Event) -> None:
    """The process: connect, watch, contend for the Lease, schedule while leading, until stop."""
    api = await connect(settings.kubeconfig)
    # The Lease gets its own connection pool: a burst of claim writes and Events must never
    # queue a renewal behind it, or a busy leader fences itself and the work starts over.
    lease_api = await connect(settings.kubeconfig)
    try:
        await Scheduler(api, settings, lease_api=lease_api).run(health=health, stop=stop)
    finally:
        await lease_api.close()
        await api.close()


class Scheduler:
    """One replica. `run` returns when ``stop`` is set (the Lease is released on the way out)."""

    def __init__(
        self,
        api: KubeApi,
        settings: SchedulerSettings,
        *,
        lease_api: KubeApi | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.api = api
        self.lease_api = lease_api or api
        self.settings = settings
        self._clock = clock
        self.claims = Informer(api, IPCLAIMS)
        self.nodes = Informer(api, IPNODES)
        self.pools = Informer(api, IPCLAIMPOOLS)
        self.services = Informer(api, SERVICES)
        self.informers = (self.claims, self.nodes, self.pools, self.services)
        self.liveness = Liveness(settings.node_timeout)
        self.index = ServiceIndex()
        self.recorder = EventRecorder(api, "eipctl-scheduler", host=settings.identity)
        self.queue: WorkQueue[str] | None = None
        self.placer: Placer | None = None
        self._passes_before = 0
        self.elector: LeaderElector | None = None
        self.terms = 0
        self.dead_since: dict[str, float] = {}
        """When this replica declared each dead node dead (failover duration starts there)."""
        self._log = log.bind(identity=settings.identity)
        self.claims.add_change_handler(self._on_claim_change)
        self.nodes.add_change_handler(self._on_node_change)
        self.pools.add_change_handler(self._on_pool_change)
        self.services.add_change_handler(self._on_service_change)

    def now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @property
    def is_leader(self) -> bool:
        return self.queue is not None

    @property
    def placement_passes(self) -> int:
        """Placement passes run by this replica, over all its terms."""
        return self._passes_before + (self.placer.passes if self.placer else 0)

    # --- lifecycle --------------------------------------------------------------------
    async def run(self, *, health: Health | None = None, stop: asyncio.Event) -> None:
        LEADER.labels(metrics.COMPONENT).set(0)
        for informer in self.informers:
            informer.start()
        watcher = asyncio.create_task(self._watch_liveness(), name="scheduler-liveness")
        if health is not None:
            health.add_readiness_check("informers-synced", self._synced)
            health.add_liveness_check("liveness-watcher", lambda: not watcher.done())
        main: asyncio.Task[None] | None = None
        waiting: asyncio.Future[Any] = asyncio.gather(*(i.wait_synced() for i in self.informers))
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            # load everything (claims, nodes, pools, Services) before acting on any of it
            await asyncio.wait({waiting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not stop.is_set():
                self._log.info("scheduler_synced", claims=len(self.claims), nodes=len(self.nodes))
                main = asyncio.create_task(self._contend(), name="scheduler-leader")
                await asyncio.wait({main, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if main.done():
                    main.result()  # the elector or the term failed: let the CLI report it
        finally:
            waiting.cancel()
            stopped.cancel()
            if main is not None:
                main.cancel()  # the elector releases the Lease on its way out
                with contextlib.suppress(asyncio.CancelledError):
                    await main
            watcher.cancel()
            await asyncio.gather(watcher, waiting, stopped, return_exceptions=True)
            for informer in self.informers:
                await informer.stop()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await self.recorder.flush()

    def _synced(self) -> bool:
        return all(i.has_synced for i in self.informers)

    async def _contend(self) -> None:
        s = self.settings
        if not s.leader_elect:
            await self._term()
            return
        self.elector = LeaderElector(self.lease_api, s.election(LEASE_NAME))
        await self.elector.run(self._term)

    async def _term(self) -> None:
        """Lead until cancelled: full reconcile first, then react to changes."""
        self.terms += 1
        s = self.settings
        queue: WorkQueue[str] = WorkQueue("scheduler")
        writer = SerializedWriter(self.api)
        writer.use_cache(IPCLAIMS, self.claims)
        placer = Placer(
            claims=self.claims,
            nodes=self.nodes,
            pools=self.pools,
            liveness=self.liveness,
            writer=writer,
            recorder=self.recorder,
            services=ServiceEvents(self.services, self.recorder),
            policy=s.policy,
            clock=self.now,
            kick=lambda delay: queue.add_after(PLACE, delay),
            dead_since=self.dead_since,
        )
        service_claims = ServiceClaims(
            index=self.index,
            claims=self.claims,
            services=self.services,
            pools=self.pools,
            writer=writer,
            recorder=self.recorder,
            clock=self.now,
            claim_unpooled=s.claim_unpooled_external_ips,
            default_prefix_length=s.default_prefix_length,
            orphan_grace_period=s.orphan_grace_period,
        )

        async def handle(key: str) -> Result:
            if key == PLACE:
                return await placer.reconcile()
            if key == REBALANCE:
                result = await placer.reconcile(rebalance_moves=s.rebalance_max_moves)
                return result if result.error else requeue_after(s.rebalance_interval)
            if key.startswith(IP_PREFIX):
                return await service_claims.reconcile(key[len(IP_PREFIX) :])
            return DONE

        queue.add(PLACE)
        for name in sorted(service_claims.all_keys()):
            queue.add(IP_PREFIX + name)
        if s.rebalance and Policy(s.policy) is Policy.SPREAD:
            queue.add_after(REBALANCE, s.rebalance_interval)
        self.queue = queue
        self.placer = placer
        LEADER.labels(metrics.COMPONENT).set(1)
        self._log.info(
            "scheduler_leading", term=self.terms, policy=s.policy, claims=len(self.claims)
        )
        try:
            await run_workers(queue, handle, workers=s.workers, drain_timeout=0.1)
        finally:
            await placer.close()
            # a deposed leader's queued writes must not land after the new leader acts
            await writer.close()
            self._passes_before += placer.passes
            self.queue = None
            self.placer = None
            LEADER.labels(metrics.COMPONENT).set(0)
            metrics.clear_claim_phases()
            self._log.info("scheduler_term_ended", term=self.terms)

    # --- liveness -----------------------------------------------------------------------
    async def _watch_liveness(self) -> None:
        """Log every death and return once, and start a placement pass when one happens.

        Sleeps until the earliest moment a node could turn dead; a node seen later always
        has a later deadline, so nothing is missed. While every heartbeat has stalled (our
        watch is stale: see `core.liveness`), it polls, and says so once.
        """
        stalled = False
        while True:
            now = self.now()
            changes = self.liveness.transitions(now)
            for t in changes:
                if t.live:
                    self.dead_since.pop(t.node, None)
                else:
                    self.dead_since.setdefault(t.node, now)
                age = self.liveness.heartbeat_age(t.node, now)
                self._log.info(
                    "node_live" if t.live else "node_dead",
                    node=t.node,
                    heartbeat_age=None if age is None else round(age, 3),
                    leader=self.is_leader,
                )
            for node in [n for n in self.dead_since if self.liveness.is_live(n, now)]:
                del self.dead_since[node]  # e.g. a pass saw it dead, then it beat again
            if changes:
                self._enqueue(PLACE)
                LIVE_NODES.set(len(self.liveness.live(now)))
            known = self.liveness.known()
            KNOWN_NODES.set(len(known))
            for node in known:
                age = self.liveness.heartbeat_age(node, now)
                if age is not None:
                    NODE_HEARTBEAT_AGE.labels(node).set(age)
            suspects = self.liveness.suspects(now)
            if bool(suspects) != stalled:
                stalled = bool(suspects)
                if stalled:
                    self._log.warning(
                        "heartbeats_stalled",
                        silent=len(suspects),
                        why="every heartbeat stopped at once: our view may be stale, "
                        "so no node is declared dead until heartbeats flow again",
                    )
                else:
                    self._log.info("heartbeats_flowing")
            deadline = self.liveness.next_death(now)
            delay = self.liveness.timeout if deadline is None else deadline - now
            if stalled:
                delay = min(delay, self.liveness.timeout / 10)
            await asyncio.sleep(max(delay, 0.0) + 0.001)

    # --- informer handlers --------------------------------------------------------------
    def _enqueue(self, key: str) -> None:
        if self.queue is not None:
            self.queue.add(key)

    def _on_node_change(self, old: Obj | None, new: Obj | None) -> None:
        now = self.now()
        name = name_of(new or old or {})
        if new is None:
            self.liveness.forget(name)
            self.dead_since.pop(name, None)
            metrics.forget_node(name)
            self._enqueue(PLACE)
            return
        was_live = self.liveness.is_live(name, now)
        status = new.get("status") or {}
        heartbeat = status.get("heartbeat")
        grace = status.get("restartGraceSeconds")
        self.liveness.observe(
            name,
            heartbeat if isinstance(heartbeat, int) else None,
            now,
            grace=float(grace) if isinstance(grace, int | float) else 0.0,
        )
        relabelled = old is not None and labels_of(old) != labels_of(new)
        if not was_live or relabelled:
            self._enqueue(PLACE)

    def _on_claim_change(self, old: Obj | None, new: Obj | None) -> None:
        obj = new or old or {}
        if old is None or new is None:
            self._enqueue(IP_PREFIX + name_of(obj))
            self._enqueue(PLACE)
        elif self.placer is not None and self.placer.is_echo(new):
            return  # our own write coming back: the pass that made it knew
        elif c.placement_of(old) != c.placement_of(new) or not c.consistent(new):
            self._enqueue(PLACE)

    def _on_pool_change(self, old: Obj | None, new: Obj | None) -> None:
        self._enqueue(PLACE)
        if self.queue is not None:
            for name in self.index.manual_names():  # admitted now, or not any more
                self.queue.add(IP_PREFIX + name)

    def _on_service_change(self, old: Obj | None, new: Obj | None) -> None:
        key = object_key(new or old or {})
        for name in self.index.update(key, new):
            self._enqueue(IP_PREFIX + name)
