"""Simulated nodes: one `NodeController` per node in the sandbox's loop, on in-memory links.

Each node is a machine with one link (``eth0``, its own MAC) on a shared `Segment`, the
simulated L2 domain whose router's neighbour table shows which MAC answers for an IP. The
controller is the real one (`eipctl.controller.node.NodeController`) with the in-memory
backend, announcer and prober injected; only the edges are simulated. Liveness is not
simulated: each controller answers the schedulers' authenticated UDP probes for real
(docs/liveness.md), on its own loopback address, 127.1.x.y from the node's index (Linux
answers all of 127/8 on ``lo``: nothing to create), on a port the kernel picks.

Killing a node is a machine dying: its liveness replies stop at once, its controller stops
(no goodbye: addresses are not released through the API) and its link leaves the segment
with every address on it. Reviving boots the machine again: an empty link with the same
MAC, a fresh controller that answers probes again and registers its IpNode (with its new
port). The scheduler notices both on its own, from the replies, as it would in a cluster.

The nodes of one process share one API client (`eipctl.sandbox.shared_api`) instead of a
deployed controller's two each; every node still makes its own requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from eipctl.controller.node import NodeController, NodeSettings
from eipctl.controller.process import node_settings
from eipctl.core.liveness_wire import Keyring
from eipctl.core.node_keys import new_node_key
from eipctl.net.link import IPAddress, parse_ip
from eipctl.net.memory import MemoryLinkBackend, Segment
from eipctl.runtime.config import ControllerSettings
from eipctl.sandbox.shared_api import SharedApi

log = structlog.get_logger(__name__)

ANNOUNCE_COUNT = 3
ANNOUNCE_INTERVAL = 0.2  # no real ARP cache to outlast in memory; keep failover snappy
STOP_TIMEOUT = 3.0
RESTART_DELAY = 1.0
BOOT_WAVE = 25
"""Nodes powered on together; the next wave waits until these have registered: a thousand
starting at once would hold the shared loop for seconds (each registers, lists its claims
and starts its watch), and every one of them would fence before its first API check came
back."""
BOOT_WAVE_WAIT = 10.0
LINK = "eth0"
LIVENESS_PORT = 0  # any: two sandboxes (or test runs) side by side never collide


class NodeBackend(MemoryLinkBackend):
    """A simulated node's in-memory link; `on_add` hears of every address added (or
    renewed), so that the nodes holding addresses can be told from the hundreds that do not
    without looking at every link."""

    def __init__(self, on_add: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._on_add = on_add

    async def add(self, ifname: str, ip: str | IPAddress, prefixlen: int, valid_lft: int) -> None:
        await super().add(ifname, ip, prefixlen, valid_lft)
        if self._on_add is not None:
            self._on_add()


class NodeState(enum.StrEnum):
    UP = "up"
    KILLED = "killed"


class NodeError(Exception):
    """A kill/revive request that does not apply (unknown node, already dead...)."""


def unknown_node(name: str, names: list[str]) -> NodeError:
    """The error for a node name not in `names` (the first few and the last shown)."""
    known = ", ".join(names if len(names) <= 10 else [*names[:3], "...", names[-1]])
    return NodeError(f"no node {name!r} (nodes: {known})")


@dataclass(frozen=True)
class NodeStatus:
    name: str
    state: NodeState
    addresses: list[str]
    boots: int
    mac: str


def _mac_for(index: int) -> bytes:
    """Stable, locally administered MACs: node-1 is 02:e1:00:00:00:01."""
    return bytes([0x02, 0xE1, 0, 0, (index >> 8) & 0xFF, index & 0xFF])


def liveness_address(index: int) -> str:
    """Where node `index` answers liveness probes: node-1 on 127.1.0.1, node-1000 on
    127.1.3.232 (every address of 127/8 is local on Linux)."""
    if not 0 < index < 1 << 16:
        raise ValueError(f"node index {index} out of range 1..65535")
    return f"127.1.{index >> 8}.{index & 0xFF}"


class SimulatedNode:
    def __init__(
        self,
        name: str,
        index: int,
        *,
        segment: Segment,
        kube: SharedApi,
        settings: NodeSettings,
        keyring: Keyring | None = None,
        on_add: Callable[[], None] | None = None,
    ) -> None:
        """``keyring``: the liveness key; None runs the controller without a responder.
        ``on_add``: called whenever the controller adds (or renews) an address."""
        self.name = name
        self.mac = _mac_for(index)
        self.segment = segment
        self.kube = kube
        self.settings = settings
        self.keyring = keyring
        self.node_key = new_node_key()  # its own liveness key, kept across its restarts
        self.on_add = on_add
        self.state = NodeState.KILLED
        self.boots = 0
        self.backend: MemoryLinkBackend | None = None
        self.controller: NodeController | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one kill or revive at a time

    # -- what the view and the control endpoint read -------------------------------------
    async def addresses(self) -> list[str]:
        """The managed addresses on the node's link now (none while it is dead)."""
        backend = self.backend
        if backend is None:
            return []
        held = await backend.list_managed(self.settings.link)
        return [str(a.ip) for a in sorted(held, key=lambda a: (a.ip.version, a.ip))]

    def holds(self, ip: str | IPAddress) -> bool:
        backend = self.backend
        return backend is not None and backend.has_address(self.settings.link, parse_ip(ip))

    async def status(self) -> NodeStatus:
        mac = ":".join(f"{b:02x}" for b in self.mac)
        return NodeStatus(self.name, self.state, await self.addresses(), self.boots, mac)

    # -- lifecycle ---------------------------------------------------------------------------
    def boot(self) -> None:
        """Power on: an empty link on the segment and a controller that runs until killed."""
        if self.state is NodeState.UP:
            raise NodeError(f"{self.name} is already up")
        backend = NodeBackend(self.on_add)
        backend.create_link(self.settings.link, self.mac, segment=self.segment)
        self.backend = backend
        self.state = NodeState.UP
        self.boots += 1
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._life(backend, self._stop), name=f"node-{self.name}")
        log.info("node.booted", node=self.name, boots=self.boots)

    async def wait_registered(self, within: float) -> bool:
        """Whether the controller has registered its IpNode within `within` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline and self.state is NodeState.UP:
            controller = self.controller
            if controller is not None and controller.registered.is_set():
                return True
            await asyncio.sleep(0.02)
        return False

    async def revive(self) -> None:
        """`boot`, after any kill in progress has finished."""
        async with self._lock:
            self.boot()

    async def kill(self) -> list[str]:
        """Power off: the controller stops, the link and its addresses vanish. Returns the
        addresses that were on the link."""
        async with self._lock:
            return await self._power_off()

    async def _power_off(self) -> list[str]:
        if self.state is not NodeState.UP:
            raise NodeError(f"{self.name} is not running")
        self.state = NodeState.KILLED
        self._silence()  # power gone: no reply to the next probe, whatever the shutdown does
        self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await asyncio.shield(task)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        held = await self.addresses()
        self._unplug()
        log.info("node.killed", node=self.name, dropped=held)
        return held

    def _silence(self) -> None:
        controller = self.controller
        if controller is not None and controller.responder is not None:
            controller.responder.close()

    def _unplug(self) -> None:
        backend, self.backend = self.backend, None
        if backend is None:
            return
        self.segment.members[:] = [m for m in self.segment.members if m[0] is not backend]
        backend.delete_link(self.settings.link)

    async def _life(self, backend: MemoryLinkBackend, stop: asyncio.Event) -> None:
        """Run the controller until `stop`; a controller that fails is started again."""
        while not stop.is_set():
            try:
                await self._run_controller(backend, stop)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("node.controller.failed", node=self.name, restart_in=RESTART_DELAY)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESTART_DELAY):
                        await stop.wait()

    async def _run_controller(self, backend: MemoryLinkBackend, stop: asyncio.Event) -> None:
        try:
            api, heartbeat_api = await self.kube.apis(self.settings.fencing.fence_timeout)

            async def announcer(
                link: str,
                ip: str | IPAddress,
                /,
                *,
                still_ours: Callable[[], bool] | None = None,
                on_round: Callable[[], None] | None = None,
            ) -> int:
                return await backend.announce(
                    link,
                    ip,
                    count=ANNOUNCE_COUNT,
                    interval=ANNOUNCE_INTERVAL,
                    still_ours=still_ours,
                    on_round=on_round,
                )

            self.controller = NodeController(
                self.settings,
                api=api,
                heartbeat_api=heartbeat_api,
                backend=backend,
                announcer=announcer,
                prober=backend.probe,
                keyring=self.keyring,
                node_key=self.node_key,
            )
            await self.controller.run(stop)
        finally:
            self._silence()  # also when the shutdown was cut short
            self.controller = None


class Fleet:
    """The simulated nodes, by name."""

    def __init__(
        self,
        names: list[str],
        *,
        kubeconfig: Path,
        keyring: Keyring | None = None,
        first: int = 1,
    ) -> None:
        """``first``: the index of the first name (its MAC and liveness address), when
        these nodes are a block of a larger fleet (`eipctl.sandbox.workers`)."""
        self.segment = Segment()
        self.kube = SharedApi(kubeconfig)
        self.holding: set[str] = set()
        """Nodes that added an address (kept until someone finds them empty again)."""
        defaults = ControllerSettings()
        self.nodes = {
            name: SimulatedNode(
                name,
                index,
                segment=self.segment,
                kube=self.kube,
                # restart_grace 0: a kill is a crash, never a clean restart that asks the
                # scheduler to wait before moving the node's IPs
                settings=node_settings(
                    replace(
                        defaults,
                        node_name=name,
                        iface=LINK,
                        restart_grace=0.0,
                        liveness_address=liveness_address(index),
                        liveness_port=LIVENESS_PORT,
                        bgp_link="",  # no FRR here: every pool is l2, and no pool watch per node
                    )
                ),
                keyring=keyring,
                on_add=functools.partial(self.holding.add, name),
            )
            for index, name in enumerate(names, start=first)
        }

    def get(self, name: str) -> SimulatedNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise unknown_node(name, list(self.nodes)) from None

    def boot_all(self) -> None:
        for node in self.nodes.values():
            node.boot()

    async def start(
        self, stop: asyncio.Event | None = None, *, after_wave: Callable[[], None] | None = None
    ) -> None:
        """Boot every node, `BOOT_WAVE` at a time (each wave once the previous one has
        registered, or after `BOOT_WAVE_WAIT`); `stop` ends the boot early. `after_wave` is
        called once each wave has registered (or the wait ran out)."""
        nodes = list(self.nodes.values())
        for first in range(0, len(nodes), BOOT_WAVE):
            if stop is not None and stop.is_set():
                return
            wave = nodes[first : first + BOOT_WAVE]
            for node in wave:
                node.boot()
            if first + BOOT_WAVE < len(nodes):
                await asyncio.gather(*(n.wait_registered(BOOT_WAVE_WAIT) for n in wave))
                if after_wave is not None:
                    after_wave()

    def holder_of(self, ip: str) -> str | None:
        """The node whose link carries `ip` right now (first one, if several)."""
        for node in self.nodes.values():
            if node.holds(ip):
                return node.name
        return None

    async def statuses(self) -> list[NodeStatus]:
        return [await n.status() for n in self.nodes.values()]

    async def stop(self) -> None:
        """Stop every controller (the sandbox is ending; addresses do not matter any more)."""
        up = [n for n in self.nodes.values() if n.state is NodeState.UP]
        await asyncio.gather(*(n.kill() for n in up), return_exceptions=True)
        await self.kube.close()
