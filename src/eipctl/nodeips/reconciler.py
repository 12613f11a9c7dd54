"""Per-Node reconcile: one node claim for every labelled Node, created race-free.

Level-based: whatever woke it, a pass reads the Node, the claims bound to it and its slot
(annotation ``eipctl.io/external-ip-claim``), and enforces all of it. The creation protocol
(docs/node-ips.md, "Why no Node ever gets two claims"):

1. choose a claim name X: a reusable orphan of the pool, or the claim of a new IP (lowest
   free address; for cloud pools the Elastic IP tagged for this Node);
2. write the slot ``"" -> X`` on the Node with a resourceVersion precondition (a stale
   cache makes this write fail and re-read, never overwrite another choice);
3. only then bind X to the Node: create it (name from the IP: AlreadyExists means taken),
   or move the orphan with a compare-and-set on ``spec.nodeName``.

A claim is bound to a Node only by step 3 for the claim its slot names, and a slot changes
only after the claim it named was seen (fresh read) not to be the Node's. A claim found
bound to a Node whose fresh slot names another one is a stray and is released at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog

from eipctl.cloud.provider import AddressProvider, CloudError
from eipctl.core.fields import ResourceError, name_of
from eipctl.core.naming import claim_name_for, ip_for_claim_name
from eipctl.core.node_claims import (
    NodeClaim,
    NodeView,
    PodView,
    Release,
    choose_own,
    desired_pool,
    may_acquire,
    new_ip,
    node_edit,
    rank_reuse,
    release_decision,
    reusable,
)
from eipctl.core.pool import PoolError
from eipctl.core.resources import IpClaimPool
from eipctl.kube.client import IPCLAIMS, NODES, Obj
from eipctl.kube.errors import AlreadyExists, Conflict, NotFound
from eipctl.kube.events import EventType
from eipctl.kube.workqueue import DONE, Result, requeue_after
from eipctl.kube.writer import SerializedWriter
from eipctl.nodeips import views as v
from eipctl.nodeips.cloud_claims import CloudClaims

log = structlog.get_logger(__name__)

IMMEDIATELY = requeue_after(0.0)
AVOID_FOR = 2.0
"""Seconds a claim name found taken is not chosen again (longer than any cache lag seen)."""


class Cache(Protocol):
    def get(self, key: str) -> Obj | None: ...
    def objects(self) -> list[Obj]: ...


class Reader(Protocol):
    async def get(
        self, ref: Any, name: str, namespace: str | None = None, sub: Any = None
    ) -> Obj: ...


class Recorder(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...


class NodeReconciler:
    """Reconciles one Node name at a time (the work queue guarantees one worker per key)."""

    def __init__(
        self,
        *,
        api: Reader,
        nodes: Cache,
        claims: Cache,
        pools: Cache,
        pods: Cache,
        writer: SerializedWriter,
        recorder: Recorder,
        default_pool: str,
        prevent_deallocation: bool,
        requeue_interval: float,
        min_interval: float = 0.0,
        providers: Mapping[str, AddressProvider] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.api = api
        self.nodes = nodes
        self.claims = claims
        self.pools = pools
        self.pods = pods
        self.writer = writer
        self.recorder = recorder
        self.default_pool = default_pool
        self.prevent_deallocation = prevent_deallocation
        self.requeue_interval = requeue_interval
        self.min_interval = min_interval
        self.cloud = CloudClaims(
            providers or {}, writer=writer, claims=claims, report=self._report_claim
        )
        self.clock = clock or asyncio.get_running_loop().time
        self.waiting: set[str] = set()
        """Nodes waiting for a pool or for space: woken when claims or pools change."""
        self._taking: dict[str, str] = {}
        """Claim name -> the Node a reconcile of this process is binding it to."""
        self._avoid: dict[str, float] = {}
        """Claim name -> until when not to choose it: a fresh read found it taken (the cache
        may not show that yet), so choosing it again would only repeat the round trip."""
        self._last: dict[str, float] = {}
        self._reported: dict[str, tuple[str, str]] = {}

    # --- reading ------------------------------------------------------------------------
    def _node_claims(self) -> list[NodeClaim]:
        out = []
        for obj in self.claims.objects():
            claim = v.node_claim(obj)
            if claim is not None:
                out.append(claim)
        return out

    def _node_views(self) -> dict[str, NodeView]:
        return {view.name: view for view in (v.node_view(o) for o in self.nodes.objects())}

    def _pods(self) -> list[PodView]:
        return [p for p in (v.pod_view(o) for o in self.pods.objects()) if p is not None]

    def _pool(self, name: str) -> IpClaimPool | None:
        obj = self.pools.get(name)
        if obj is None:
            return None
        try:
            return IpClaimPool.from_dict(obj)
        except ResourceError as exc:
            log.warning("pool.invalid", pool=name, error=str(exc))
            return None

    # --- the pass -----------------------------------------------------------------------
    async def reconcile(self, name: str) -> Result:
        now = self.clock()
        last = self._last.get(name)
        if self.min_interval > 0 and last is not None and now - last < self.min_interval:
            return requeue_after(self.min_interval - (now - last))
        self._last[name] = now
        try:
            return await self._reconcile(name)
        except CloudError as exc:
            self._report_node(name, "Warning", exc.reason, exc.message)
            log.warning("node.cloud_error", node=name, reason=exc.reason, error=exc.message)
            return requeue_after(min(self.requeue_interval, 5.0))

    async def _reconcile(self, name: str) -> Result:
        obj = self.nodes.get(name)
        claims = self._node_claims()
        now = self.clock()
        self._avoid = {n: t for n, t in self._avoid.items() if t > now}
        mine = [c for c in claims if c.node == name]
        if obj is None:
            return await self._node_gone(name, mine)
        node = v.node_view(obj)
        if not node.auto_assign:
            self.waiting.discard(name)
            return await self._not_asking(node, mine)
        own = choose_own(node, mine, self.default_pool)
        if any(c is not own for c in mine) or own is None:
            fresh = await self._fresh_node(name)
            if fresh is None:
                return requeue_after(0.2)  # deleted; the cache has not seen it yet
            node = v.node_view(fresh)
            own = choose_own(node, mine, self.default_pool)
            for claim in mine:
                if claim is not own:
                    await self._release(claim, node, why="stray")
        if own is None:
            if node.slot:
                return await self._follow_slot(node)
            if not may_acquire(node):
                return DONE  # cordoned: no new IP
            return await self._acquire(node, claims)
        if not node.slot:
            stored = await self.writer.update(NODES, name, v.set_slot("", own.name))
            if v.slot_of(stored) != own.name:
                return IMMEDIATELY  # another claim was chosen meanwhile: decide again
            log.info("node.slot_adopted", node=name, claim=own.name)
        self.waiting.discard(name)
        obj = self.claims.get(own.name)
        return IMMEDIATELY if obj is None else await self._hold(node, own, obj)

    async def _fresh_node(self, name: str) -> Obj | None:
        try:
            return await self.api.get(NODES, name)
        except NotFound:
            return None

    # --- Node gone or no longer asking --------------------------------------------------
    async def _node_gone(self, name: str, mine: list[NodeClaim]) -> Result:
        self.waiting.discard(name)
        self._last.pop(name, None)
        if not mine:
            return DONE
        if await self._fresh_node(name) is not None:
            return requeue_after(0.2)  # the cache lags a Node that exists
        for claim in mine:
            await self._release(claim, None, why="node-gone")
        return DONE

    async def _not_asking(self, node: NodeView, mine: list[NodeClaim]) -> Result:
        for claim in mine:
            await self._release(claim, node, why="label-removed")
        if node.slot:
            await self.writer.update(NODES, node.name, v.set_slot(node.slot, ""))
            await self._edit_node(node, None)
            log.info("node.slot_cleared", node=node.name, claim=node.slot, why="label-removed")
        return DONE

    async def _release(self, claim: NodeClaim, node: NodeView | None, *, why: str) -> None:
        decision = release_decision(
            claim, node, self.default_pool, prevent_deallocation=self.prevent_deallocation
        )
        if decision is Release.KEEP:
            decision = Release.ORPHAN if self.prevent_deallocation else Release.DELETE
        obj = self.claims.get(claim.name)
        if decision is Release.ORPHAN:
            await self.cloud.orphaned(claim, obj)
            try:
                await self.writer.update(IPCLAIMS, claim.name, v.bind(claim.node, ""))
                await self.writer.update_status(IPCLAIMS, claim.name, v.placed_status())
            except (NotFound, v.NotOurs):
                return
        else:
            await self.cloud.deleted(claim, obj)
            rv = (obj or {}).get("metadata", {}).get("resourceVersion")
            try:
                await self.writer.delete(IPCLAIMS, claim.name, resource_version=rv)
            except Conflict:
                return  # changed meanwhile: the next pass looks again
        log.info(
            "claim.released",
            claim=claim.name,
            ip=str(claim.ip),
            node=claim.node,
            decision=decision.value,
            why=why,
        )

    # --- getting an IP --------------------------------------------------------------------
    async def _acquire(self, node: NodeView, claims: list[NodeClaim]) -> Result:
        pool_name = desired_pool(node, self.default_pool)
        pool = self._pool(pool_name) if pool_name else None
        if pool is None:
            self.waiting.add(node.name)
            why = f"IpClaimPool {pool_name!r} not found" if pool_name else "no pool"
            self._report_node(
                node.name,
                "Warning",
                "NoPool",
                f"{why}: set label eipctl.io/external-ip-pool or --default-node-pool",
            )
            return DONE
        ranked = rank_reuse(
            pool_name,
            claims,
            self._node_views(),
            self._pods(),
            exclude={*self._taking, *self._avoid},
        )
        choice: str | None = ranked[0].name if ranked else None
        reused = choice is not None
        if choice is None:
            if pool.spec.provider:
                choice = claim_name_for((await self.cloud.ensure(pool, node.name)).ip)
            else:
                choice = self._new_claim_name(pool)
        if choice is None:
            self.waiting.add(node.name)
            self._report_node(
                node.name,
                "Warning",
                "PoolExhausted",
                f"IpClaimPool {pool_name} has no free address",
            )
            return DONE
        self._taking[choice] = node.name
        try:
            stored = await self.writer.update(NODES, node.name, v.set_slot("", choice))
            slot = v.slot_of(stored)
            log.info(
                "node.slot_written" if slot == choice else "node.slot_taken",
                node=node.name,
                claim=slot,
                chosen=choice,
                reuse=reused,
            )
            if slot != choice:
                return IMMEDIATELY
            return await self._follow_slot(v.node_view(stored))
        finally:
            self._taking.pop(choice, None)

    def _new_claim_name(self, spec_pool: IpClaimPool) -> str | None:
        try:
            pool = spec_pool.address_pool()
        except PoolError as exc:
            log.warning("pool.invalid", pool=spec_pool.name, error=str(exc))
            return None
        used = [ip_for_claim_name(n) for n in (*self._taking, *self._avoid)]
        for obj in self.claims.objects():
            try:
                used.append(ip_for_claim_name(name_of(obj)))
            except ValueError:
                continue
        ip = new_ip(pool, used)
        return None if ip is None else claim_name_for(ip)

    def _in_pool(self, spec_pool: IpClaimPool, name: str) -> bool:
        try:
            pool = spec_pool.address_pool()
        except PoolError:
            return False
        return pool.contains(ip_for_claim_name(name))

    async def _follow_slot(self, node: NodeView) -> Result:
        """Bind the claim the slot names, or clear the slot if that claim is not to be had."""
        name = node.slot
        obj = self.claims.get(name)
        claim = v.node_claim(obj) if obj is not None else None
        if claim is None or claim.node != node.name:
            try:
                obj = await self.api.get(IPCLAIMS, name)
            except NotFound:
                obj = None
        if obj is None:
            if not may_acquire(node):
                return await self._clear_slot(node, "claim gone, node cordoned")
            return await self._create(node, name)
        claim = v.node_claim(obj)
        pool_name = desired_pool(node, self.default_pool)
        if claim is None or claim.pool != pool_name:
            self._avoid_for_a_while(name)
            return await self._clear_slot(node, "claim is not a node claim of the pool")
        if claim.node == node.name:
            return await self._hold(node, claim, obj)  # bound here; the cache lags
        if not may_acquire(node) or not reusable(claim, self._node_views(), self._pods()):
            self._avoid_for_a_while(name)
            return await self._clear_slot(node, f"claim is held by node {claim.node}")
        try:
            await self.writer.update(IPCLAIMS, name, v.bind(claim.node, node.name))
            stored = await self.writer.update_status(IPCLAIMS, name, v.placed_status())
        except v.NotOurs as exc:
            log.info("claim.bind_refused", node=node.name, claim=name, error=str(exc))
            return IMMEDIATELY
        except NotFound:
            return IMMEDIATELY
        await self.cloud.reused(claim, obj, node.name)
        log.info("claim.reused", node=node.name, claim=name, ip=str(claim.ip), from_node=claim.node)
        return await self._hold_stored(node, stored)

    async def _create(self, node: NodeView, name: str) -> Result:
        pool_name = desired_pool(node, self.default_pool)
        pool = self._pool(pool_name)
        if pool is None:
            self.waiting.add(node.name)
            return DONE  # woken when the pool appears
        ip = ip_for_claim_name(name)
        allocation = ""
        if not pool.spec.provider and not self._in_pool(pool, name):
            return await self._clear_slot(node, f"{ip} is not an address of pool {pool_name}")
        if pool.spec.provider:
            address = await self.cloud.ensure(pool, node.name)
            if address.ip != str(ip):
                return await self._clear_slot(node, f"the cloud holds {address.ip} for this node")
            allocation = address.allocation_id
        body = v.new_claim(
            ip,
            node=node.name,
            pool=pool_name,
            prefix_length=pool.spec.prefix_length,
            provider=pool.spec.provider,
            allocation=allocation,
        )
        try:
            await self.writer.create(IPCLAIMS, body)
        except AlreadyExists:
            self._avoid_for_a_while(name)
            log.info("claim.create_found_taken", node=node.name, claim=name)
            return IMMEDIATELY  # the next pass reads it and keeps or clears the slot
        try:
            stored = await self.writer.update_status(IPCLAIMS, name, v.placed_status())
        except NotFound:
            return IMMEDIATELY
        log.info("claim.created", node=node.name, claim=name, ip=str(ip), pool=pool_name)
        return await self._hold_stored(node, stored)

    def _avoid_for_a_while(self, name: str) -> None:
        self._avoid[name] = self.clock() + AVOID_FOR

    async def _clear_slot(self, node: NodeView, why: str) -> Result:
        await self.writer.update(NODES, node.name, v.set_slot(node.slot, ""))
        log.info("node.slot_cleared", node=node.name, claim=node.slot, why=why)
        await self._edit_node(node, None)
        return IMMEDIATELY if may_acquire(node) else DONE

    # --- holding it -----------------------------------------------------------------------
    async def _hold_stored(self, node: NodeView, stored: Obj) -> Result:
        own = v.node_claim(stored)
        return IMMEDIATELY if own is None else await self._hold(node, own, stored)

    async def _hold(self, node: NodeView, own: NodeClaim, obj: Obj) -> Result:
        if own.provider:
            await self.cloud.hold(node, own, obj)
        elif own.phase == "Pending":
            try:
                await self.writer.update_status(IPCLAIMS, own.name, v.placed_status())
            except NotFound:
                return IMMEDIATELY
        await self._edit_node(node, own)
        return requeue_after(self.requeue_interval)

    async def _edit_node(self, node: NodeView, own: NodeClaim | None) -> None:
        edit = node_edit(node, own)
        if edit.empty:
            return
        try:
            await self.writer.update(NODES, node.name, v.apply_node_edit(edit))
        except NotFound:
            return
        log.info(
            "node.labelled",
            node=node.name,
            external_ip=edit.external_ip,
            taint_removed=edit.remove_taint,
        )

    # --- reporting ------------------------------------------------------------------------
    def _report_node(self, name: str, type_: EventType, reason: str, message: str) -> None:
        if self._reported.get(name) == (reason, message):
            return
        self._reported[name] = (reason, message)
        obj = self.nodes.get(name)
        if obj is not None:
            self.recorder.emit(v.involved("Node", obj), type_, reason, message)
        log.warning("node.waiting", node=name, reason=reason, message=message)

    def _report_claim(self, obj: Obj, reason: str, message: str) -> None:
        key = "claim/" + name_of(obj)
        if self._reported.get(key) == (reason, message):
            return
        self._reported[key] = (reason, message)
        self.recorder.emit(v.involved("IpClaim", obj), "Warning", reason, message)
