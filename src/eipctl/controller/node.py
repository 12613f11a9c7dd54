"""`NodeController`: the controller's tasks wired together, with every edge injected.

Tasks: the claim informer (only claims labelled for this node), the liveness responder
(answers the schedulers' UDP probes and the peers' queries; docs/liveness.md), the API checks
and the fence watchdog, the peer list, the reconcile loop, IpNode registration then the API
heartbeat, and the resync timer. The reconcile loop runs a pass when a claim changes, when
the fence changes, when a pass asked for a retry, and at least every `renew_interval` (which
renews lifetimes and repairs drift).

`process.run` builds the real edges (netlink, raw sockets, kubeconfig); the unit tests build
a `NodeController` with the in-memory link and fake probes against the API emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from eipctl.core.fence import Fence, FenceTransition
from eipctl.core.fields import ResourceError
from eipctl.core.ipnode import IpNode
from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.core.naming import API_VERSION
from eipctl.core.peer_keys import PeerIdentity
from eipctl.kube.client import IPCLAIMS, IPNODES, KubeApi, Obj
from eipctl.kube.errors import ApiError, NotFound
from eipctl.kube.events import EventRecorder, reference
from eipctl.kube.writer import SerializedWriter
from eipctl.net.link import Announcer, LinkBackend, Prober
from eipctl.net.liveness import LivenessResponder, PeerQuerier

from .bgp import FrrConfigWriter
from .claim_cache import ClaimCache
from .departure import Departure
from .fencing import FenceWatch
from .flood_events import FloodEvents
from .heartbeat import Endpoint, Heartbeat, register, register_until_done
from .link_reconciler import LinkReconciler
from .liveness_endpoint import own_address
from .node_key import publish as publish_node_key
from .outage_events import OutageEvents
from .peer_list import PeerList
from .pools import PoolCache
from .reachability import ApiReachability
from .settings import NodeSettings
from .status import StatusReporter
from .vouching import Vouching, loop_clock

__all__ = ["NodeController", "NodeSettings"]

log = structlog.get_logger(__name__)


class NodeController:
    def __init__(
        self,
        settings: NodeSettings,
        *,
        api: KubeApi,
        heartbeat_api: KubeApi,
        backend: LinkBackend,
        announcer: Announcer,
        prober: Prober | None,
        keyring: Keyring | None = None,
        node_key: bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``keyring``: the liveness key; None runs no responder (the IpNode then has no
        liveness endpoint and the scheduler judges it by its heartbeat counter).
        ``node_key``: this node's own key (`node_key`, docs/liveness.md "Node keys"),
        published for the schedulers; None: the cluster key only."""
        self.settings = settings
        self._node_key = node_key if keyring is not None else None
        self._identity = (
            None if self._node_key is None else PeerIdentity(settings.node, self._node_key)
        )
        self._api = api
        self._backend = backend
        self._trigger = asyncio.Event()
        self.fence = Fence(
            settings.fencing.fence_timeout, clock, vouch_window=settings.liveness.vouch_window
        )
        self.writer = SerializedWriter(api)
        self.events = EventRecorder(api, "eipctl-controller", host=settings.node)
        self.claims = ClaimCache(api, settings.node, self._claims_changed)
        self.vouching = Vouching(settings.node, self.claims, self.fence, loop_clock)
        self.writer.use_cache(IPCLAIMS, self.claims)
        self.status = StatusReporter(self.writer, self.events, settings.node)
        self.pools = PoolCache(api, self._trigger.set) if settings.announcing.bgp_link else None
        self.reconciler = LinkReconciler(
            settings.node,
            settings.link,
            settings.addresses,
            bgp_link=settings.announcing.bgp_link,
            conflict_retry=max(0.2, settings.liveness.probe_silence),
            backend=backend,
            claims=self.claims,
            fence=self.fence,
            status=self.status,
            announcer=announcer,
            prober=prober,
            holder_node=self._holder_node,
            mac_owner=self._mac_owner,
            claim_lookup=self._claim_fresh,
            pools=self.pools,
            leader_agrees=lambda: self.vouching.mismatch_since is None,
        )
        self.fence_watch = FenceWatch(settings.node, fence=self.fence, on_transition=self._on_fence)
        self.heartbeat = Heartbeat(
            heartbeat_api,
            settings.node,
            interval=settings.api.heartbeat_interval,
            fence=self.fence,
            on_transition=self.fence_watch.report,
            reregister=self._register,
        )
        self.responder = (
            None
            if keyring is None
            else LivenessResponder(
                settings.node,
                keyring
                if node_key is None
                else keyring.with_node_keys({settings.node: node_key}, required=False),
                flags=self._liveness_flags,
                on_probe=self.vouching.on_probe,
                writer_heard_within=settings.liveness.probe_silence / 2,
                on_flood=FloodEvents(self.events, settings.node).report,
            )
        )
        self.peers = (
            None
            if keyring is None or self.responder is None
            else PeerList(
                api,
                settings.node,
                PeerQuerier(settings.node, self.responder, identity=self._identity),
                probe_silence=settings.liveness.probe_silence,
                cluster_size=lambda: self.vouching.cluster_size,
            )
        )
        self.liveness_endpoint: Endpoint | None = None
        self.reachability = ApiReachability(
            heartbeat_api,
            settings.node,
            interval=settings.fencing.api_check_interval,
            probe_silence=settings.liveness.probe_silence,
            fence=self.fence,
            on_transition=self.fence_watch.report,
            last_probe=self._last_writer_probe,
            ask_peers=None if self.peers is None else self.peers.verdict,
            mismatch_since=lambda: self.vouching.mismatch_since,
            relist=self._relist,
            on_outage=OutageEvents(self.events, settings.node).report,
            clock=loop_clock,
        )
        self.fence_watch.justify = self.reachability.justify
        self.frr = (
            FrrConfigWriter(
                api=api,
                writer=self.writer,
                events=self.events,
                node=settings.node,
                path=settings.announcing.frr_config,
                pools=self.pools,
                bgp_link=settings.announcing.bgp_link,
                secret_namespace=settings.announcing.bgp_secret_namespace,
                router_id=self._router_id,
            )
            if settings.announcing.frr_config and self.pools is not None
            else None
        )
        if self.frr is not None and self.pools is not None:
            self.pools.add_listener(self.frr.changed)
        self.registered = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._refresh: asyncio.Task[None] | None = None
        self._key_task: asyncio.Task[None] | None = None  # ends once the key is published
        self.passes = 0

    # -- lifecycle -----------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down (addresses stay unless cleanup_on_exit)."""
        self.claims.start()
        if self.pools is not None:
            self.pools.start()
        try:
            await self._start_responder()
        except BaseException:
            await self.claims.stop()
            if self.pools is not None:
                await self.pools.stop()
            raise
        self._spawn(self.fence_watch.watchdog(), "fence-watchdog")
        self._spawn(self.reachability.run(), "api-checks")
        self._spawn(self._reconcile_loop(), "reconcile")
        self._spawn(self._register_then_beat(), "heartbeat")
        self._spawn(self._resync_loop(), "resync")
        if self.peers is not None:
            self._spawn(self._peers_after_registration(self.peers), "peers")
        if self.frr is not None:
            self._spawn(self.frr.run(), "frr-config")
        if self._node_key is not None:
            s = self.settings
            self._key_task = asyncio.create_task(
                publish_node_key(self._api, s.node, self._node_key, s.api.node_key_namespace),
                name="node-key",
            )
        try:
            await stop.wait()
        finally:
            await self.shutdown()

    def live(self) -> bool:
        """Liveness: no task has died."""
        return all(not t.done() for t in self._tasks)

    def ready(self) -> bool:
        pools = self.pools is None or self.pools.has_synced
        return self.registered.is_set() and self.claims.has_synced and pools

    async def shutdown(self) -> None:
        tasks = [*self._tasks, *(t for t in (self._refresh, self._key_task) if t is not None)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        if self.settings.addresses.cleanup_on_exit:
            await self.reconciler.release_all()
            log.info("shutdown.addresses.removed", node=self.settings.node)
        elif self.settings.api.restart_grace > 0 and not self.fence.fenced:
            await Departure(self.settings, self._api, self.reconciler, self.heartbeat).run()
        else:
            log.info("shutdown.addresses.kept", node=self.settings.node)
        if self.responder is not None:
            self.responder.close()  # after the restart grace is announced: see docs/liveness.md
        await self.reconciler.close()
        await self.claims.stop()
        if self.pools is not None:
            await self.pools.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2.0):
                await self.status.drain()
                await self.events.flush()
        self.status.cancel()

    async def _start_responder(self) -> None:
        """Bind the liveness responder; its endpoint goes into the IpNode at registration."""
        if self.responder is None:
            return
        s = self.settings
        address = s.liveness.address or await own_address(self._backend, s.link)
        await self.responder.start(address, s.liveness.port)
        self.liveness_endpoint = (address, self.responder.port)
        log.info("liveness.listening", node=s.node, address=address, port=self.responder.port)

    def _router_id(self) -> str:
        """FRR's router-id: the node's IPv4 liveness address; "" lets FRR choose."""
        endpoint = self.liveness_endpoint
        if endpoint is None or ":" in endpoint[0]:
            return ""
        return endpoint[0]

    def _liveness_flags(self) -> Flag:
        flags = Flag.FENCED if self.fence.fenced else Flag.NONE
        if self.fence.api_failing:
            flags |= Flag.API_STALE
        return flags

    def _last_writer_probe(self) -> float | None:
        return None if self.responder is None else self.responder.last_writer_at

    def _claims_changed(self) -> None:
        self.vouching.claims_changed()
        self._trigger.set()

    def _relist(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        self._refresh = self.claims.start_refresh()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    # -- loops ---------------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        delay: float | None = None
        renew = self.settings.addresses.renew_interval
        while True:
            timeout = renew if delay is None else min(delay, renew)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._trigger.wait()
            self._trigger.clear()
            try:
                delay = await self.reconciler.reconcile()
            except Exception:
                log.exception("reconcile.failed", node=self.settings.node)
                delay = 1.0
            self.passes += 1

    async def _register(self) -> int:
        s = self.settings
        on_labels = None if self.frr is None else self.frr.set_labels
        counter = await register(
            self._api,
            self.writer,
            s.node,
            s.link,
            self.liveness_endpoint,
            on_labels=on_labels,
            on_created=self.status.forget_addresses,  # a new IpNode's status is empty
            peer_key="" if self._identity is None else self._identity.public_text,
        )
        return counter

    async def _peers_after_registration(self, peers: PeerList) -> None:
        await self.registered.wait()
        await peers.run()

    async def _register_then_beat(self) -> None:
        limit = max(self.settings.fencing.fence_timeout, 5.0)
        self.heartbeat.counter = await register_until_done(
            self._register, self.settings.node, limit
        )
        self.registered.set()
        await self.heartbeat.run()

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.addresses.resync_interval)
            self._trigger.set()
            if self.registered.is_set() and not self.fence.fenced:
                try:
                    await self._register()  # Node labels may have changed
                except (ApiError, TimeoutError) as exc:
                    log.info("ipnode.refresh.failed", node=self.settings.node, error=repr(exc))

    # -- fencing -------------------------------------------------------------------------
    def _on_fence(self, transition: FenceTransition) -> None:
        node = self.settings.node
        involved = reference(API_VERSION, "IpNode", {"metadata": {"name": node}})
        timeout = self.settings.fencing.fence_timeout
        if transition is FenceTransition.FENCE:
            self.events.emit(
                involved,
                "Warning",
                "Fenced",
                f"cut off: no API answer for up to {timeout:g}s, no writing leader vouching "
                f"and no quorum saying the control plane is down: {node} removed its addresses",
            )
        elif transition is FenceTransition.RESTORE:
            self.events.emit(
                involved,
                "Normal",
                "Restored",
                f"API reachable again: {node} may hold addresses",
            )
        if transition is FenceTransition.RESTORE:
            if self._refresh is not None:
                self._refresh.cancel()
            self._refresh = self.claims.start_refresh()
        self._trigger.set()

    async def _claim_fresh(self, name: str) -> Obj | None:
        try:
            async with asyncio.timeout(self.settings.fencing.fence_timeout):
                return await self._api.get(IPCLAIMS, name)
        except NotFound:
            return None

    async def _mac_owner(self, mac: str) -> str | None:
        """Which other eipctl node publishes `mac` (only asked after a probe conflict)."""
        async with asyncio.timeout(self.settings.fencing.fence_timeout):
            nodes = await self._api.list(IPNODES)
        for obj in nodes.items:
            try:
                ipnode = IpNode.from_dict(obj)
            except ResourceError:
                continue  # the schema refuses such an object: not one a controller wrote
            if ipnode.name != self.settings.node and mac in ipnode.status.macs:
                return ipnode.name
        return None

    async def _holder_node(self, node: str) -> IpNode | None:
        """Another node's IpNode, read fresh (the take-over rule reads its Live condition)."""
        try:
            async with asyncio.timeout(self.settings.fencing.fence_timeout):
                obj = await self._api.get(IPNODES, node)
        except NotFound:
            return None
        return IpNode.from_dict(obj)
