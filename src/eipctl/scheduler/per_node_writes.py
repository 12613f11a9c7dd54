"""The writes that keep policy ``all``'s per-node claims as `per_node.per_node_changes` says.

Part of the placement pass (`placing.Placer`): it runs after the decisions, shares their
writes in flight (`claim_writes.ClaimWrites`), and leaves a claim leaving ``all`` its copies
until its placement on one node is written (make before break; see `placing`).
"""

from __future__ import annotations

import structlog

from eipctl.core.claim_status import scheduled_status
from eipctl.core.claims import node_of, reference
from eipctl.core.fields import Obj, name_of
from eipctl.core.placement import ClaimPlacement, Cluster, Policies, Policy, Reason
from eipctl.kube.client import IPCLAIMS
from eipctl.kube.errors import AlreadyExists, Conflict, NotFound
from eipctl.kube.events import Tells
from eipctl.kube.writer import SerializedWriter
from eipctl.scheduler.claim_writes import ClaimWrites
from eipctl.scheduler.metrics import PLACEMENTS
from eipctl.scheduler.per_node import LocalOf, per_node_changes

log = structlog.get_logger(__name__)


class PerNodeCopies:
    """Creates and deletes per-node claims, each write through the term's `ClaimWrites`."""

    def __init__(
        self,
        writes: ClaimWrites,
        writer: SerializedWriter,
        recorder: Tells,
        local_of: LocalOf | None = None,
    ) -> None:
        self.local_of = local_of
        """Where a claim's Local Services are answered (`local_traffic.LocalTraffic.of`)."""
        self.writes = writes
        self.writer = writer
        self.recorder = recorder

    def sync(
        self,
        objs: list[Obj],
        views: list[ClaimPlacement],
        per_node: dict[str, Obj],
        cluster: Cluster,
        policies: Policies,
    ) -> None:
        """Start the writes for `objs` (the IPs' own claims, `views` their placement views as
        read: `claims.placement_of`) given the copies `per_node`."""
        pending = self.writes.pending
        marked: list[Obj] = []
        unplaced: list[Obj] = []
        placing: set[str] = set()  # claims whose placement on a node is being written
        for o, view in zip(objs, views, strict=True):
            name = view.name
            decision = pending.get(name)
            if policies.of(view.pool) is Policy.ALL:
                marked.append(o)  # marked, or about to be: copies first
            elif decision is not None and decision.to_node:
                placing.add(name)
                unplaced.append(o)
            elif not view.node:
                unplaced.append(o)  # its copies, if it has any, hold the IP meanwhile
        changes = per_node_changes(marked, per_node, cluster, unplaced, self.local_of)
        for body in changes.create:
            name = name_of(body)
            if name not in pending:
                self.writes.start(name, None, self._create(body))
        for obj in changes.kept:
            base = name_of(obj).partition(".")[0]
            if base in placing:
                self.writes.defer(base)  # look again once its placement is written
        for obj in changes.delete:
            name = name_of(obj)
            if name not in pending:
                self.writes.start(name, None, self._delete(obj))

    async def _create(self, body: Obj) -> None:
        name, node = name_of(body), node_of(body)
        try:
            await self.writer.create(IPCLAIMS, body)
        except AlreadyExists:
            return
        message = f"policy all: held by {node}"
        try:
            stored = await self.writer.update_status(IPCLAIMS, name, scheduled_status(message))
        except NotFound:
            return
        self.writes.remember(stored)
        PLACEMENTS.labels(Reason.ALL_NODES.value).inc()
        self.recorder.tell(
            reference(stored), "Normal", "AllNodes", message, ip=body["spec"]["ip"], node=node
        )

    async def _delete(self, obj: Obj) -> None:
        name = name_of(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        try:
            deleted = await self.writer.delete(IPCLAIMS, name, resource_version=rv)
        except Conflict:
            return  # changed meanwhile: the next pass looks again
        if deleted:
            log.info("per_node_claim.deleted", claim=name, node=node_of(obj))
