"""Cheap simulated nodes for the scale benchmark (`ScaleNode`, `ScaleFleet`): the real
liveness path and a real controller's steady API traffic, without the link machinery.

A sandbox node (`eipctl.sandbox.nodes`) is a whole `NodeController` (~1 ms of CPU per node
per second); past a few hundred nodes the simulation, not eipctl, fills this machine. A
`ScaleNode` keeps, from the real code, what eipctl's own processes and the API see of a node:

- liveness: the real `LivenessResponder` (wire format, HMAC, kernel filter, replay check)
  on its own loopback address (`nodes.liveness_address`: 127.1.x.y) and a kernel-chosen
  port, its flags from a real `Fence`, its probes fed to the real `Vouching` (the digest of
  the claims placed on the node), so a writer's equal digest vouches as in a controller;
- registration: the real `heartbeat.register` (GET Node, GET IpNode, create through a real
  `SerializedWriter`), again every `resync_interval` (30 s) as the controller's resync loop
  does, and the real `Heartbeat` at the production cadence (10 s);
- API checks: the real `ApiReachability` (its GET of the IpNode every interval while not
  vouched for, and its guard when the writer's probes stop);
- claim status: for each claim placed on it, the real `StatusReporter` writes Bound (and
  the IpNode's status.addresses), through the node's own `SerializedWriter`, as a
  controller does once the address is on its link.

What it does not do: no links, netlink or in-memory reconcile loop, no announcements or
duplicate-address probes (the address is "on the link" as soon as the claim names the node);
no `FenceWatch` (a node never fences itself, so its replies never say FENCED); no node key or
peer key (the schedulers probe under the cluster key); no `PeerList` (a real controller lists
every IpNode after registering, a few times while the cluster boots, then every 10 minutes:
not made here); no Events. The claims come from ONE watch of every IpClaim
per process (`ScaleFleet`), not one label-selected watch per node: the emulator serves one
watch per process where a cluster serves one per node (the same events, each to one node).

All nodes of a process share one loop and one API client, whose session counts the
requests the nodes make, by verb (`RequestCounts`), so that they can be compared with what a
real controller makes. The worker-process entry point is `eipctl.sandbox.scale_worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import structlog

from eipctl.controller.claim_cache import ClaimCache
from eipctl.controller.heartbeat import Heartbeat, register, register_until_done
from eipctl.controller.reachability import ApiReachability
from eipctl.controller.settings import LivenessSettings
from eipctl.controller.status import StatusReporter
from eipctl.controller.vouching import Vouching, loop_clock
from eipctl.core.fence import Fence, FenceTransition
from eipctl.core.fields import labels_of
from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.core.naming import LABEL_NODE
from eipctl.core.resources import IpClaim
from eipctl.kube.client import IPCLAIMS, KubeApi, Obj
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import Informer, index_by_label
from eipctl.kube.writer import SerializedWriter
from eipctl.net.liveness import LivenessResponder
from eipctl.runtime.config import ControllerSettings
from eipctl.sandbox.nodes import _mac_for, liveness_address
from eipctl.sandbox.shared_api import API_TIMEOUT, loopback_client

log = structlog.get_logger(__name__)

LINK = "eth0"
BY_NODE = "node"


def request_kind(method: str, path: str, query: str) -> str:
    """A request's verb as the API server names it: WATCH, LIST, GET, PATCH, PUT, POST..."""
    if method != "GET":
        return method
    if "watch=true" in query or "watch=1" in query:
        return "WATCH"
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return "GET" if len(rest) >= 2 else "LIST"


class RequestCounts:
    """Requests by verb sent through one aiohttp session (an `aiohttp.TraceConfig`)."""

    def __init__(self) -> None:
        self.by_verb: Counter[str] = Counter()
        self.trace = aiohttp.TraceConfig()
        self.trace.on_request_start.append(self._started)

    async def _started(self, _session: Any, _ctx: Any, params: Any) -> None:
        url = params.url
        self.by_verb[request_kind(params.method, url.path, url.query_string)] += 1


async def shared_client(kubeconfig: Path, counts: RequestCounts) -> Any:
    """One kubernetes-asyncio client for the process (as `shared_api.SharedApi`), counting."""
    return await loopback_client(kubeconfig, [counts.trace])


class NodeClaims:
    """One node's claims in the process's shared informer: what `Vouching` reads of a
    `ClaimCache` (`has_synced`, `objects`)."""

    def __init__(self, informer: Informer, node: str) -> None:
        self._informer = informer
        self._node = node

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced

    def objects(self) -> list[Obj]:
        return self._informer.by_index(BY_NODE, self._node)


@dataclass(frozen=True)
class ScaleTiming:
    """A node's timing, from the controller's flags at their defaults (`ControllerSettings`),
    the few a `ScaleNode` needs of the controller's groups (`controller.settings`)."""

    address: str
    heartbeat_interval: float
    api_check_interval: float
    fence_timeout: float
    probe_silence: float
    resync_interval: float

    @property
    def vouch_window(self) -> float:
        """The controller's own (`LivenessSettings.vouch_window`)."""
        return LivenessSettings(probe_silence=self.probe_silence).vouch_window

    @classmethod
    def for_node(cls, index: int, flags: ControllerSettings | None = None) -> ScaleTiming:
        f = flags or ControllerSettings()
        return cls(
            address=liveness_address(index),
            heartbeat_interval=f.heartbeat_interval,
            api_check_interval=f.api_check_interval,
            fence_timeout=f.fence_timeout,
            probe_silence=f.probe_silence,
            resync_interval=f.resync_interval,
        )


def replies_sent() -> float:
    """Liveness replies sent by every responder of this process so far."""
    from eipctl.metrics import REGISTRY

    return REGISTRY.get_sample_value("eipctl_liveness_replies_sent_total") or 0.0


class ScaleNode:
    """One simulated node (the module docstring): responder, registration, heartbeat, API
    checks and claim status writes, on the process's shared client and claim informer."""

    def __init__(
        self,
        name: str,
        index: int,
        *,
        keyring: Keyring,
        claims: Informer,
        client: Any,
        parse: Callable[[Obj], IpClaim] = IpClaim.from_dict,
        flags: ControllerSettings | None = None,
    ) -> None:
        self.name = name
        self._parse = parse
        self.settings = s = ScaleTiming.for_node(index, flags)
        self.mac = ":".join(f"{b:02x}" for b in _mac_for(index))
        self.api = KubeApi(client, request_timeout=API_TIMEOUT)
        self.heartbeat_api = KubeApi(client, request_timeout=s.fence_timeout)
        self.fence = Fence(s.fence_timeout, loop_clock, vouch_window=s.vouch_window)
        self.writer = SerializedWriter(self.api)
        self.writer.use_cache(IPCLAIMS, claims)
        self.events = EventRecorder(self.api, "eipctl-controller", host=name)
        self.status = StatusReporter(self.writer, self.events, name)
        self.claims = NodeClaims(claims, name)
        self.vouching = Vouching(name, cast(ClaimCache, self.claims), self.fence, loop_clock)
        self.responder = LivenessResponder(
            name,
            keyring,
            flags=self._flags,
            on_probe=self.vouching.on_probe,
            writer_heard_within=s.probe_silence / 2,
        )
        self.heartbeat = Heartbeat(
            self.heartbeat_api,
            name,
            interval=s.heartbeat_interval,
            fence=self.fence,
            on_transition=self._transition,
            reregister=self._register,
        )
        self.reachability = ApiReachability(
            self.heartbeat_api,
            name,
            interval=s.api_check_interval,
            probe_silence=s.probe_silence,
            fence=self.fence,
            on_transition=self._transition,
            last_probe=lambda: self.responder.last_writer_at,
            mismatch_since=lambda: self.vouching.mismatch_since,
            clock=loop_clock,
        )
        self.registered = asyncio.Event()
        self.up = False
        self._tasks: list[asyncio.Task[None]] = []

    def _flags(self) -> Flag:
        return Flag.API_STALE if self.fence.api_failing else Flag.NONE

    def _transition(self, _transition: FenceTransition) -> None:
        """No `FenceWatch` here: a simulated node never fences (the module docstring)."""

    async def _register(self) -> int:
        endpoint = (self.settings.address, self.responder.port)
        return await register(
            self.api,
            self.writer,
            self.name,
            LINK,
            endpoint,
            on_created=self.status.forget_addresses,
        )

    async def start(self) -> None:
        """Bind the responder, then register and beat, and check the API, in the background."""
        await self.responder.start(self.settings.address, 0)
        self.up = True
        self._tasks = [
            asyncio.create_task(self._register_then_beat(), name=f"beat-{self.name}"),
            asyncio.create_task(self.reachability.run(), name=f"checks-{self.name}"),
            asyncio.create_task(self._resync_loop(), name=f"resync-{self.name}"),
        ]

    async def _register_then_beat(self) -> None:
        limit = max(self.settings.fence_timeout, 5.0)
        self.heartbeat.counter = await register_until_done(self._register, self.name, limit)
        self.registered.set()
        self.claims_changed()
        await self.heartbeat.run()

    async def _resync_loop(self) -> None:
        """As the controller's: every `resync_interval` the IpNode is registered again (a GET
        of the Node and of the IpNode; labels may have changed)."""
        while True:
            await asyncio.sleep(self.settings.resync_interval)
            if self.registered.is_set():
                try:
                    await self._register()
                except Exception as exc:
                    log.info("scale.refresh.failed", node=self.name, error=repr(exc))

    def claims_changed(self) -> None:
        """A claim placed on this node (or taken away) changed: the digest is stale, and
        what is placed here is now "on the link": Bound, and the IpNode's addresses."""
        self.vouching.claims_changed()
        if not self.up or not self.registered.is_set():
            return
        addresses = []
        for obj in self.claims.objects():
            claim = self._parse(obj)
            if claim.spec.node_name != self.name or not claim.spec.ip:
                continue
            self.status.bound(claim)
            addresses.append(f"{claim.spec.ip}/32")
        self.status.node_addresses(sorted(addresses), [self.mac])

    async def kill(self) -> None:
        """Power off: replies stop at once, the heartbeat and the API checks stop."""
        self.up = False
        self.responder.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.status.cancel()
        await self.writer.close()


class ScaleFleet:
    """The `ScaleNode`s of one process: one client, one watch of every IpClaim."""

    def __init__(
        self,
        kubeconfig: Path,
        keyring: Keyring,
        names: list[tuple[int, str]],
        flags: ControllerSettings | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.keyring = keyring
        self.names = names
        self.flags = flags  # the controllers' flags (default: theirs)
        self.counts = RequestCounts()
        self.nodes: dict[str, ScaleNode] = {}
        self.informer: Informer | None = None
        self._client: Any = None
        self._where: dict[str, str] = {}  # claim -> the node it was last placed on
        self._parsed: dict[str, tuple[str, IpClaim]] = {}  # claim -> (its version, parsed)
        self._dirty: set[str] = set()  # nodes whose claims changed since the last pass

    async def start(self, wave: int = 50) -> None:
        self._client = await shared_client(self.kubeconfig, self.counts)
        api = KubeApi(self._client, request_timeout=API_TIMEOUT)
        self.informer = Informer(
            api, IPCLAIMS, indexers={BY_NODE: index_by_label(LABEL_NODE)}, backoff_max=1.0
        )
        self.informer.add_key_handler(self._changed)
        self.informer.start()
        for index, name in self.names:
            self.nodes[name] = ScaleNode(
                name,
                index,
                keyring=self.keyring,
                claims=self.informer,
                client=self._client,
                parse=self._parse,
                flags=self.flags,
            )
        nodes = list(self.nodes.values())
        for first in range(0, len(nodes), wave):
            batch = nodes[first : first + wave]
            for node in batch:
                await node.start()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    await asyncio.gather(*(n.registered.wait() for n in batch))

    def _changed(self, key: str) -> None:
        assert self.informer is not None
        obj = self.informer.get(key)
        now = labels_of(obj).get(LABEL_NODE, "") if obj is not None else ""
        before = self._where.pop(key, "")
        if now:
            self._where[key] = now
        if obj is None:
            self._parsed.pop(key, None)
        dirty = {before, now} - {""}
        if dirty and not self._dirty:
            asyncio.get_running_loop().call_soon(self._pass)
        self._dirty |= dirty

    def _pass(self) -> None:
        """One pass for each node whose claims changed since the last: the events of a burst
        (a dead node's claims moved here) make one pass, as a controller's reconcile loop
        wakes once for the changes that came while it ran. A pass per event walked every
        claim of the node per event: 100 claims moved at once cost seconds of this loop."""
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            node = self.nodes.get(name)
            if node is not None:
                node.claims_changed()

    def _parse(self, obj: Obj) -> IpClaim:
        """The claim parsed once per version (a pass reads every claim of its node)."""
        meta = obj.get("metadata") or {}
        key, version = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        kept = self._parsed.get(key)
        if kept is not None and kept[0] == version and version:
            return kept[1]
        claim = IpClaim.from_dict(obj)
        self._parsed[key] = (version, claim)
        return claim

    def registered(self) -> int:
        return sum(1 for n in self.nodes.values() if n.registered.is_set())

    def replies(self) -> float:
        return replies_sent()

    def vouched(self) -> int:
        return sum(1 for n in self.nodes.values() if n.up and n.fence.vouched_recently())

    async def kill(self, name: str) -> None:
        await self.nodes[name].kill()

    async def stop(self) -> None:
        await asyncio.gather(
            *(n.kill() for n in self.nodes.values() if n.up), return_exceptions=True
        )
        if self.informer is not None:
            await self.informer.stop()
        if self._client is not None:
            await self._client.close()
