"""The IpNode: registration at start, the heartbeat, and the self-fencing watchdog.

The heartbeat is a status merge patch ``{"status": {"heartbeat": n}}`` sent straight to the
API on its own client (not through the serialized writer): it carries no precondition, the
counter is written by this process only, and it must never wait behind another write (a
claim status retry, an IpNode addresses update) or behind a connection another request
holds. Each write is bounded by `node_timeout`: a heartbeat that took longer is worthless.

Fencing runs on our own monotonic clock (`core.fence.Fence`): the watchdog sleeps until
the exact moment the last success becomes `node_timeout` old, so the node fences within a
few milliseconds of the deadline even while a heartbeat request hangs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from eipctl.core.fence import Fence, FenceTransition
from eipctl.core.fields import Mutation, labels_of
from eipctl.core.ipnode import HEARTBEAT, RESTART_GRACE_SECONDS, IpNode
from eipctl.kube.client import IPNODES, NODES, Obj
from eipctl.kube.errors import AlreadyExists, Forbidden, NotFound
from eipctl.kube.verbs import Gets, Patches, WritesCreate, WritesUpdate

from .metrics import FENCE_TRANSITIONS, FENCED, HEARTBEAT_AGE, HEARTBEATS

log = structlog.get_logger(__name__)


class NodeApi(Gets, Patches, Protocol):
    """The heartbeat's own connection: a GET and the status patch (`KubeApi`)."""


class NodeWriter(WritesCreate, WritesUpdate, Protocol):
    """Registering the IpNode goes through the writer (`SerializedWriter`)."""


async def node_labels(api: NodeApi, node: str) -> dict[str, str] | None:
    """The core v1 Node's labels, or None if there is no such Node (or we may not read it)."""
    try:
        obj = await api.get(NODES, node)
    except (NotFound, Forbidden) as exc:
        log.info("node.labels.unavailable", node=node, error=type(exc).__name__)
        return None
    return dict(labels_of(obj))


def _ipnode_mutation(link: str, labels: Mapping[str, str] | None) -> Mutation:
    def mutate(obj: Obj) -> None:
        obj.setdefault("spec", {})["link"] = link
        if labels is not None:
            obj.setdefault("metadata", {})["labels"] = dict(labels)

    return mutate


async def register(api: NodeApi, writer: NodeWriter, node: str, link: str) -> int:
    """Create or update this node's IpNode (spec.link, the Node's labels); return its
    current heartbeat counter so the next write is a change.

    The IpNode's labels are exactly the Node's (the IpNode belongs to this controller);
    without a Node they are left as they are.
    """
    labels = await node_labels(api, node)
    try:
        current = await api.get(IPNODES, node)
    except NotFound:
        body: Obj = {"metadata": {"name": node, "labels": labels or {}}, "spec": {"link": link}}
        try:
            await writer.create(IPNODES, body)
            log.info("ipnode.created", node=node, link=link, labels=len(labels or {}))
            return 0
        except AlreadyExists:
            current = await api.get(IPNODES, node)
    have = IpNode.from_dict(current)
    if have.spec.link != link or (labels is not None and have.labels != labels):
        current = await writer.update(IPNODES, node, _ipnode_mutation(link, labels))
        log.info("ipnode.updated", node=node, link=link, labels=len(labels or {}))
    return IpNode.from_dict(current).status.heartbeat


class Heartbeat:
    """Bumps status.heartbeat every `interval`; drives the `Fence`.

    `on_transition` is called (synchronously, on the loop) on FENCE and RESTORE.
    `reregister` recreates the IpNode if someone deleted it; it returns the new counter.
    """

    def __init__(
        self,
        api: NodeApi,
        node: str,
        *,
        interval: float,
        fence: Fence,
        on_transition: Callable[[FenceTransition], None],
        reregister: Callable[[], Awaitable[int]],
        counter: int = 0,
    ) -> None:
        self._api = api
        self._node = node
        self._interval = interval
        self.fence = fence
        self._on_transition = on_transition
        self._reregister = reregister
        self.counter = counter
        self._failures = 0

    async def beat(self) -> bool:
        """One heartbeat write; True if it succeeded."""
        self.counter += 1
        # every beat clears a restart grace an earlier process announced (null deletes it)
        patch: dict[str, Any] = {"status": {HEARTBEAT: self.counter, RESTART_GRACE_SECONDS: None}}
        try:
            async with asyncio.timeout(self.fence.node_timeout):
                try:
                    await self._api.patch(IPNODES, self._node, patch, sub="status")
                except NotFound:
                    log.warning("ipnode.missing", node=self._node)
                    self.counter = int(await self._reregister()) + 1
                    patch["status"][HEARTBEAT] = self.counter
                    await self._api.patch(IPNODES, self._node, patch, sub="status")
        except Exception as exc:  # ApiError, timeout, or a client bug: never stop beating
            HEARTBEATS.labels("error").inc()
            self._failures += 1
            if self._failures == 1 or self._failures % 20 == 0:
                log.warning(
                    "heartbeat.failed",
                    node=self._node,
                    failures=self._failures,
                    age=round(self.fence.heartbeat_age(), 3),
                    error="timeout" if isinstance(exc, TimeoutError) else repr(exc),
                )
            return False
        HEARTBEATS.labels("ok").inc()
        if self._failures:
            log.info("heartbeat.recovered", node=self._node, failures=self._failures)
        self._failures = 0
        self._transition(self.fence.succeeded())
        return True

    async def announce_grace(self, seconds: float) -> None:
        """A last heartbeat that asks the scheduler to wait `seconds` before judging us dead."""
        self.counter += 1
        patch = {"status": {HEARTBEAT: self.counter, RESTART_GRACE_SECONDS: seconds}}
        await self._api.patch(IPNODES, self._node, patch, sub="status")

    async def run(self) -> None:
        """Beat forever at a fixed cadence (a slow write shortens the next sleep)."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.beat()
            HEARTBEAT_AGE.set(self.fence.heartbeat_age())
            await asyncio.sleep(max(0.0, self._interval - (loop.time() - started)))

    async def watchdog(self) -> None:
        """Fence exactly when the last success is `node_timeout` old."""
        while True:
            if self.fence.fenced:  # RESTORE comes from a successful beat()
                await asyncio.sleep(self._interval)
                continue
            remaining = self.fence.node_timeout - self.fence.heartbeat_age()
            if remaining > 0:
                await asyncio.sleep(remaining)
                continue
            self._transition(self.fence.check())

    def _transition(self, transition: FenceTransition) -> None:
        if transition is FenceTransition.NONE:
            return
        FENCE_TRANSITIONS.labels(transition.value).inc()
        FENCED.set(1 if transition is FenceTransition.FENCE else 0)
        if transition is FenceTransition.FENCE:
            log.warning(
                "node.fenced",
                node=self._node,
                heartbeat_age=round(self.fence.heartbeat_age(), 3),
                at=time.time(),
            )
        else:
            log.warning("node.restored", node=self._node, at=time.time())
        self._on_transition(transition)
