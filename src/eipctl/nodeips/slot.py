"""Getting a Node its one claim, race-free, and holding it: the slot protocol.

The creation protocol (docs/node-ips.md, "Why no Node ever gets two claims"):

1. choose a claim name X: a reusable orphan of the pool, or the claim of a new IP (lowest
   free address; for cloud pools the Elastic IP tagged for this Node);
2. write the slot ``"" -> X`` on the Node with a resourceVersion precondition (a stale
   cache makes this write fail and re-read, never overwrite another choice);
3. only then bind X to the Node: create it (name from the IP: AlreadyExists means taken),
   or move the orphan with a compare-and-set on ``spec.nodeName``.

A claim is bound to a Node only by step 3 for the claim its slot names, and a slot changes
only after the claim it named was seen (fresh read) not to be the Node's. The pass that
decides when to acquire and what to release is `nodeips.reconciler`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog

from eipctl.core.claim_status import placed_status
from eipctl.core.claims import node_ip_claim
from eipctl.core.fields import name_of
from eipctl.core.naming import claim_name_for, ip_for_claim_name
from eipctl.core.node_claims import (
    NodeClaim,
    NodeView,
    desired_pool,
    may_acquire,
    new_ip,
    node_edit,
    rank_reuse,
    reusable,
)
from eipctl.core.pool import PoolError
from eipctl.core.resources import IpClaimPool
from eipctl.kube.client import IPCLAIMS, NODES, Obj
from eipctl.kube.errors import AlreadyExists, NotFound
from eipctl.kube.events import EventType
from eipctl.kube.workqueue import DONE, Result, requeue_after
from eipctl.kube.writer import SerializedWriter
from eipctl.nodeips import views as v
from eipctl.nodeips.cloud_claims import CloudClaims

log = structlog.get_logger(__name__)

IMMEDIATELY = requeue_after(0.0)
AVOID_FOR = 2.0
"""Seconds a claim name found taken is not chosen again (longer than any cache lag seen)."""


class Reader(Protocol):
    async def get(
        self, ref: Any, name: str, namespace: str | None = None, *, status: bool = False
    ) -> Obj: ...


ReportNode = Callable[[str, EventType, str, str], None]
"""(node, type, reason, message): a Warning about a Node that waits, posted once."""


class SlotProtocol:
    """Acquire (steps 1-3 above) and hold a Node's claim; one Node at a time per name."""

    def __init__(
        self,
        *,
        api: Reader,
        caches: v.Caches,
        writer: SerializedWriter,
        cloud: CloudClaims,
        default_pool: str,
        requeue_interval: float,
        clock: Callable[[], float],
        waiting: set[str],
        report_node: ReportNode,
    ) -> None:
        self.api = api
        self.caches = caches
        self.writer = writer
        self.cloud = cloud
        self.default_pool = default_pool
        self.requeue_interval = requeue_interval
        self.clock = clock
        self.waiting = waiting
        """Nodes waiting for a pool or for space (shared with the reconciler)."""
        self.report_node = report_node
        self._taking: dict[str, str] = {}
        """Claim name -> the Node a reconcile of this process is binding it to."""
        self.avoid: dict[str, float] = {}
        """Claim name -> until when not to choose it: a fresh read found it taken (the cache
        may not show that yet), so choosing it again would only repeat the round trip."""

    def forget_expired(self, now: float) -> None:
        self.avoid = {n: t for n, t in self.avoid.items() if t > now}

    # --- step 1 and 2: choose, write the slot -----------------------------------------------
    async def acquire(self, node: NodeView, claims: list[NodeClaim]) -> Result:
        pool_name = desired_pool(node, self.default_pool)
        pool = self.caches.pool(pool_name) if pool_name else None
        if pool is None:
            self.waiting.add(node.name)
            why = f"IpClaimPool {pool_name!r} not found" if pool_name else "no pool"
            self.report_node(
                node.name,
                "Warning",
                "NoPool",
                f"{why}: set label eipctl.io/external-ip-pool or --default-node-pool",
            )
            return DONE
        ranked = rank_reuse(
            pool_name,
            claims,
            self.caches.node_views(),
            self.caches.pods(),
            exclude={*self._taking, *self.avoid},
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
            self.report_node(
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
            fields = {"node": node.name, "claim": slot, "chosen": choice, "reuse": reused}
            if slot == choice:
                log.info("node.slot_written", **fields)
            else:
                log.info("node.slot_taken", **fields)
            if slot != choice:
                return IMMEDIATELY
            return await self.follow_slot(v.node_view(stored))
        finally:
            self._taking.pop(choice, None)

    def _new_claim_name(self, spec_pool: IpClaimPool) -> str | None:
        try:
            pool = spec_pool.address_pool()
        except PoolError as exc:
            log.warning("pool.invalid", pool=spec_pool.name, error=str(exc))
            return None
        used = [ip_for_claim_name(n) for n in (*self._taking, *self.avoid)]
        for obj in self.caches.claims.objects():
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

    # --- step 3: bind what the slot names ---------------------------------------------------
    async def follow_slot(self, node: NodeView) -> Result:
        """Bind the claim the slot names, or clear the slot if that claim is not to be had."""
        name = node.slot
        obj = self.caches.claims.get(name)
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
            return await self.hold(node, claim, obj)  # bound here; the cache lags
        if not may_acquire(node) or not reusable(
            claim, self.caches.node_views(), self.caches.pods()
        ):
            self._avoid_for_a_while(name)
            return await self._clear_slot(node, f"claim is held by node {claim.node}")
        try:
            await self.writer.update(IPCLAIMS, name, v.bind(claim.node, node.name))
            stored = await self.writer.update_status(IPCLAIMS, name, placed_status())
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
        pool = self.caches.pool(pool_name)
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
        body = node_ip_claim(
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
            stored = await self.writer.update_status(IPCLAIMS, name, placed_status())
        except NotFound:
            return IMMEDIATELY
        log.info("claim.created", node=node.name, claim=name, ip=str(ip), pool=pool_name)
        return await self._hold_stored(node, stored)

    def _avoid_for_a_while(self, name: str) -> None:
        self.avoid[name] = self.clock() + AVOID_FOR

    async def _clear_slot(self, node: NodeView, why: str) -> Result:
        await self.writer.update(NODES, node.name, v.set_slot(node.slot, ""))
        log.info("node.slot_cleared", node=node.name, claim=node.slot, why=why)
        await self.edit_node(node, None)
        return IMMEDIATELY if may_acquire(node) else DONE

    # --- holding it -------------------------------------------------------------------------
    async def _hold_stored(self, node: NodeView, stored: Obj) -> Result:
        own = v.node_claim(stored)
        return IMMEDIATELY if own is None else await self.hold(node, own, stored)

    async def hold(self, node: NodeView, own: NodeClaim, obj: Obj) -> Result:
        if own.provider:
            await self.cloud.hold(node, own, obj)
        elif own.phase == "Pending":
            try:
                await self.writer.update_status(IPCLAIMS, own.name, placed_status())
            except NotFound:
                return IMMEDIATELY
        await self.edit_node(node, own)
        return requeue_after(self.requeue_interval)

    async def edit_node(self, node: NodeView, own: NodeClaim | None) -> None:
        """The Node's label and startup taint, as `core.node_claims.node_edit` says."""
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
