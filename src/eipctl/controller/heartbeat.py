"""The IpNode: registration at start, and the API heartbeat.

Liveness is not judged from the API (docs/liveness.md): the schedulers probe the node over
UDP. The API heartbeat is for people and for upgrades: every `--heartbeat-interval` (10 s)
a status merge patch ``{"status": {"heartbeat": n, "lastHeartbeatTime": t}}`` (kubectl's LAST
HEARTBEAT column), sent straight to the API on its own client (not through the serialized
writer): it carries no precondition, the fields are written by this process only, and it
must never wait behind another write. A success also proves the API reachable (`Fence`),
as the reads of `reachability.ApiReachability` do between heartbeats; the fence's answer
goes to `fencing.FenceWatch`, which watches the deadline and reports the transitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from eipctl.core.fence import Fence, FenceTransition
from eipctl.core.fields import Mutation, format_time, labels_of
from eipctl.core.ipnode import (
    HEARTBEAT,
    LAST_HEARTBEAT_TIME,
    LINK,
    LIVENESS_ADDRESS,
    LIVENESS_PEER_KEY,
    LIVENESS_PORT,
    RESTART_GRACE_SECONDS,
    IpNode,
)
from eipctl.kube.client import IPNODES, NODES, Obj
from eipctl.kube.errors import AlreadyExists, Forbidden, NotFound, server_answered
from eipctl.kube.verbs import Gets, Patches, WritesCreate, WritesUpdate

from .metrics import API_SILENCE, HEARTBEATS

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


Endpoint = tuple[str, int]
"""Where this controller answers liveness probes: (address, port)."""


def _spec(link: str, liveness: Endpoint | None, peer_key: str) -> dict[str, Any]:
    spec: dict[str, Any] = {LINK: link}
    if liveness is not None:
        spec[LIVENESS_ADDRESS], spec[LIVENESS_PORT] = liveness
        if peer_key:
            spec[LIVENESS_PEER_KEY] = peer_key
    return spec


def _ipnode_mutation(
    link: str, liveness: Endpoint | None, peer_key: str, labels: Mapping[str, str] | None
) -> Mutation:
    def mutate(obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        for key in (LIVENESS_ADDRESS, LIVENESS_PORT, LIVENESS_PEER_KEY):
            spec.pop(key, None)
        spec.update(_spec(link, liveness, peer_key))
        if labels is not None:
            obj.setdefault("metadata", {})["labels"] = dict(labels)

    return mutate


async def register(
    api: NodeApi,
    writer: NodeWriter,
    node: str,
    link: str,
    liveness: Endpoint | None = None,
    *,
    on_labels: Callable[[Mapping[str, str]], None] | None = None,
    on_created: Callable[[], None] | None = None,
    peer_key: str = "",
) -> int:
    """Create or update this node's IpNode (spec.link, the liveness endpoint and peer key,
    the Node's labels); return its current heartbeat counter so the next write is a change.

    The IpNode's labels are exactly the Node's (the IpNode belongs to this controller);
    without a Node they are left as they are. `on_labels` gets the IpNode's labels as they
    now are (what pools' and BGPPeers' nodeSelectors match); `on_created` is called when
    this call created the IpNode (its status is empty: publish the addresses again).
    """
    labels = await node_labels(api, node)
    try:
        current = await api.get(IPNODES, node)
    except NotFound:
        body: Obj = {
            "metadata": {"name": node, "labels": labels or {}},
            "spec": _spec(link, liveness, peer_key),
        }
        try:
            await writer.create(IPNODES, body)
            log.info("ipnode.created", node=node, link=link, labels=len(labels or {}))
            if on_created is not None:
                on_created()
            if on_labels is not None:
                on_labels(labels or {})
            return 0
        except AlreadyExists:
            current = await api.get(IPNODES, node)
    have = IpNode.from_dict(current)
    if (
        have.spec.link != link
        or have.spec.liveness_endpoint != liveness
        or have.spec.liveness_peer_key != (peer_key if liveness is not None else "")
        or (labels is not None and have.labels != labels)
    ):
        current = await writer.update(
            IPNODES, node, _ipnode_mutation(link, liveness, peer_key, labels)
        )
        log.info("ipnode.updated", node=node, link=link, labels=len(labels or {}))
        have = IpNode.from_dict(current)
    if on_labels is not None:
        on_labels(have.labels)
    return have.status.heartbeat


async def register_until_done(
    attempt: Callable[[], Awaitable[int]], node: str, limit: float
) -> int:
    """`attempt` (a `register`, each try within `limit`) retried with backoff until it
    succeeds; its heartbeat counter. Never gives up: the fence covers the meantime."""
    delay = 0.1
    while True:
        try:
            async with asyncio.timeout(limit):
                return await attempt()
        except Exception as exc:
            log.warning("ipnode.register.failed", node=node, error=repr(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)


class Heartbeat:
    """Bumps status.heartbeat every `interval`; each success feeds the `Fence`.

    `on_transition` gets the fence's answer to every success, NONE included
    (`fencing.FenceWatch.report`).
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
        patch: dict[str, Any] = {
            "status": {
                HEARTBEAT: self.counter,
                LAST_HEARTBEAT_TIME: format_time(datetime.now(UTC)),
                RESTART_GRACE_SECONDS: None,
            }
        }
        try:
            async with asyncio.timeout(self.fence.fence_timeout):
                try:
                    await self._api.patch(IPNODES, self._node, patch, status=True)
                except NotFound:
                    log.warning("ipnode.missing", node=self._node)
                    self.counter = int(await self._reregister()) + 1
                    patch["status"][HEARTBEAT] = self.counter
                    await self._api.patch(IPNODES, self._node, patch, status=True)
        except Exception as exc:  # ApiError, timeout, or a client bug: never stop beating
            HEARTBEATS.labels("error").inc()
            if server_answered(exc):  # a 429 or a refusal: the API is there all the same
                self._on_transition(self.fence.succeeded())
            else:
                self.fence.failed()
            self._failures += 1
            if self._failures == 1 or self._failures % 20 == 0:
                log.warning(
                    "heartbeat.failed",
                    node=self._node,
                    failures=self._failures,
                    api_silence=round(self.fence.api_silence(), 3),
                    error="timeout" if isinstance(exc, TimeoutError) else repr(exc),
                )
            return False
        HEARTBEATS.labels("ok").inc()
        if self._failures:
            log.info("heartbeat.recovered", node=self._node, failures=self._failures)
        self._failures = 0
        self._on_transition(self.fence.succeeded())
        return True

    async def announce_grace(self, seconds: float) -> None:
        """A last heartbeat that asks the scheduler to wait `seconds` before judging us dead."""
        self.counter += 1
        patch = {
            "status": {
                HEARTBEAT: self.counter,
                LAST_HEARTBEAT_TIME: format_time(datetime.now(UTC)),
                RESTART_GRACE_SECONDS: seconds,
            }
        }
        await self._api.patch(IPNODES, self._node, patch, status=True)

    async def run(self) -> None:
        """Beat forever at a fixed cadence (a slow write shortens the next sleep)."""
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.beat()
            API_SILENCE.set(self.fence.api_silence())
            await asyncio.sleep(max(0.0, self._interval - (loop.time() - started)))
