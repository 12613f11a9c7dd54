"""Per-Node reconcile: one node claim for every labelled Node, none for the others.

Level-based: whatever woke it, a pass reads the Node, the claims bound to it and its slot
(annotation ``eipctl.io/external-ip-claim``), and enforces all of it. A Node that asks for an
IP gets one through the slot protocol (`nodeips.slot`: choose, write the slot, then bind);
a claim found bound to a Node whose fresh slot names another one is a stray and is released
at once, as are the claims of a Node that is gone or no longer asks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

import structlog

from eipctl.cloud.provider import AddressProvider, CloudError
from eipctl.core.claim_status import placed_status
from eipctl.core.claims import reference
from eipctl.core.fields import name_of
from eipctl.core.node_claims import (
    NodeClaim,
    NodeView,
    Release,
    choose_own,
    may_acquire,
    release_decision,
)
from eipctl.kube import events
from eipctl.kube.client import IPCLAIMS, NODES, Obj
from eipctl.kube.errors import Conflict, NotFound
from eipctl.kube.events import EventType
from eipctl.kube.workqueue import DONE, Result, TerminalError, requeue_after
from eipctl.kube.writer import SerializedWriter
from eipctl.nodeips import views as v
from eipctl.nodeips.cloud_claims import CloudClaims
from eipctl.nodeips.slot import IMMEDIATELY, Reader, SlotProtocol

log = structlog.get_logger(__name__)


class Recorder(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...
    def tell(
        self, involved: Obj, type_: EventType, reason: str, message: str, **fields: object
    ) -> None: ...


class NodeReconciler:
    """Reconciles one Node name at a time (the work queue guarantees one worker per key)."""

    def __init__(
        self,
        *,
        api: Reader,
        nodes: v.Cache,
        claims: v.Cache,
        pools: v.Cache,
        pods: v.Cache,
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
        self.caches = v.Caches(nodes=nodes, claims=claims, pools=pools, pods=pods)
        self.writer = writer
        self.recorder = recorder
        self.default_pool = default_pool
        self.prevent_deallocation = prevent_deallocation
        self.min_interval = min_interval
        self.cloud = CloudClaims(
            providers or {}, writer=writer, claims=claims, report=self._report_claim
        )
        self.clock = clock or asyncio.get_running_loop().time
        self.waiting: set[str] = set()
        """Nodes waiting for a pool or for space: woken when claims or pools change."""
        self.slots = SlotProtocol(
            api=api,
            caches=self.caches,
            writer=writer,
            cloud=self.cloud,
            default_pool=default_pool,
            requeue_interval=requeue_interval,
            clock=self.clock,
            waiting=self.waiting,
            report_node=self._report_node,
        )
        self._last: dict[str, float] = {}
        self._reported: dict[str, tuple[str, str]] = {}

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
            if not exc.retryable:  # a Node's providerID, a provider nodeips runs without
                raise TerminalError(exc.reason, exc.message) from exc
            return requeue_after(min(self.slots.requeue_interval, 5.0))

    async def _reconcile(self, name: str) -> Result:
        obj = self.caches.nodes.get(name)
        claims = self.caches.node_claims()
        self.slots.forget_expired(self.clock())
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
                return await self.slots.follow_slot(node)
            if not may_acquire(node):
                return DONE  # cordoned: no new IP
            return await self.slots.acquire(node, claims)
        if not node.slot:
            stored = await self.writer.update(NODES, name, v.set_slot("", own.name))
            if v.slot_of(stored) != own.name:
                return IMMEDIATELY  # another claim was chosen meanwhile: decide again
            log.info("node.slot_adopted", node=name, claim=own.name)
        self.waiting.discard(name)
        obj = self.caches.claims.get(own.name)
        return IMMEDIATELY if obj is None else await self.slots.hold(node, own, obj)

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
            await self.slots.edit_node(node, None)
            log.info("node.slot_cleared", node=node.name, claim=node.slot, why="label-removed")
        return DONE

    async def _release(self, claim: NodeClaim, node: NodeView | None, *, why: str) -> None:
        decision = release_decision(
            claim, node, self.default_pool, prevent_deallocation=self.prevent_deallocation
        )
        if decision is Release.KEEP:
            decision = Release.ORPHAN if self.prevent_deallocation else Release.DELETE
        obj = self.caches.claims.get(claim.name)
        if decision is Release.ORPHAN:
            await self.cloud.orphaned(claim, obj)
            try:
                await self.writer.update(IPCLAIMS, claim.name, v.bind(claim.node, ""))
                await self.writer.update_status(IPCLAIMS, claim.name, placed_status())
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

    # --- reporting ------------------------------------------------------------------------
    def _report_node(self, name: str, type_: EventType, reason: str, message: str) -> None:
        if self._reported.get(name) == (reason, message):
            return
        self._reported[name] = (reason, message)
        obj = self.caches.nodes.get(name)
        if obj is not None:
            self.recorder.tell(events.reference("v1", "Node", obj), type_, reason, message)
        else:  # gone: no Node to post on, the log line is the only record
            log.warning("node.waiting", node=name, reason=reason, detail=message)

    def _report_claim(self, obj: Obj, reason: str, message: str) -> None:
        key = "claim/" + name_of(obj)
        if self._reported.get(key) == (reason, message):
            return
        self._reported[key] = (reason, message)
        self.recorder.emit(reference(obj), "Warning", reason, message)
