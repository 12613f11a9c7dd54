"""`eipctl sandbox --netns` (root): nodes as Linux network namespaces, controllers for real.

The topology is the e2e test bed's (`eipctl.sandbox.testbed.network.Network`, docs/testbed.md),
without its client and without admin addresses:

    switch ns  [ br0 ]--- n1 ~~ eth0 [node-1 ns]   198.51.100.11/24  2001:db8:1::11/64
                  |------ n2 ~~ eth0 [node-2 ns]   198.51.100.12/24  2001:db8:1::12/64
                  `------ ct ~~ eth0 [control ns]  198.51.100.3/24   2001:db8:1::3/64

Each node runs the real `eipctl controller` (netlink, gratuitous ARP, the liveness responder
on its 198.51.100.x, UDP 9473) as a child process in its namespace (`ip netns exec`). The
scheduler belongs in the control namespace (`adopt_scheduler`): from there it probes every
controller over UDP on the node network (docs/liveness.md). Controllers and scheduler share
the sandbox's liveness key (``<state dir>/liveness.key``).

Every namespace reaches the API through a relay: a socket listening on 127.0.0.1:6443
*inside* the namespace, served by the sandbox's loop, that forwards to the emulator in the
host namespace; one kubeconfig (``node.kubeconfig``) serves them all. Nothing is created in
the host namespace; namespaces are named ``eipsbx-<sandbox pid>-...`` and those of dead
sandboxes are removed at start.

Killing a node is pulling its plug: the controller gets SIGKILL, the relay closes, and the
namespace is deleted with its link and every address on it. Reviving builds it again (same
addresses, same MAC).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import structlog
import yaml

from eipctl.sandbox.children import Child
from eipctl.sandbox.namespaces import reap_leftovers, why_unavailable
from eipctl.sandbox.nodes import NodeError, NodeState, NodeStatus
from eipctl.sandbox.relay import NODE_API_PORT, ApiRelay
from eipctl.sandbox.testbed.network import LINK, Network, NodeNet
from kubemu import ApiServer

log = structlog.get_logger(__name__)

PREFIX = "eipsbx-"
RELAY_PORT = NODE_API_PORT
LIVENESS_KEY = "liveness.key"
"""The sandbox's liveness key file in its state directory (written by the session)."""


def unavailable() -> str | None:
    """Why --netns cannot run here, or None."""
    reason = why_unavailable()
    return None if reason is None else f"--netns {reason}"


def write_node_kubeconfig(server: ApiServer, path: Path, token: str | None = None) -> None:
    """The kubeconfig of the processes in namespaces: the API through their relay (as
    `token`'s user when given: a benchmark tells one process's requests apart by it)."""
    config = server.kubeconfig(token=token)
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"http://127.0.0.1:{RELAY_PORT}"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


async def remove_leftovers() -> list[str]:
    """Delete the namespaces of sandboxes that are no longer running (and what runs in them)."""
    return await asyncio.to_thread(reap_leftovers, PREFIX)


class NetnsNode:
    def __init__(self, fleet: NetnsFleet, name: str, index: int) -> None:
        self.fleet = fleet
        self.name = name
        self.index = index
        self.state = NodeState.KILLED
        self.boots = 0
        self.cached_addresses: list[str] = []
        self.net: NodeNet | None = None
        self._relay: ApiRelay | None = None
        self._child: Child | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def mac(self) -> str:
        return f"02:e1:00:00:{(self.index >> 8) & 0xFF:02x}:{self.index & 0xFF:02x}"

    async def addresses(self) -> list[str]:
        """Addresses on eth0 other than the node's own (the managed ones)."""
        net = self.net
        if self.state is not NodeState.UP or net is None:
            return []
        self.cached_addresses = await asyncio.to_thread(net.held_addresses)
        return self.cached_addresses

    async def status(self) -> NodeStatus:
        return NodeStatus(self.name, self.state, await self.addresses(), self.boots, self.mac)

    async def revive(self) -> None:
        async with self._lock:
            if self.state is NodeState.UP:
                raise NodeError(f"{self.name} is already up")
            await self._plug_in()

    async def kill(self) -> list[str]:
        async with self._lock:
            if self.state is not NodeState.UP:
                raise NodeError(f"{self.name} is not running")
            held = await self.addresses()
            await self._pull_plug()
            return held

    async def _plug_in(self) -> None:
        f = self.fleet
        self.net = net = await asyncio.to_thread(
            f.network.add_node, self.index, self.name, self.mac
        )
        self._relay = ApiRelay(net.ns.name, f.upstream)
        await self._relay.start()
        argv = ["controller", "--node-name", self.name, "--iface", LINK, "--kubeconfig"]
        argv += [str(f.node_kubeconfig), "--metrics-bind-address", "0"]
        argv += ["--health-probe-bind-address", "0", "--log-level", f.log_level]
        argv += ["--liveness-key-file", str(f.liveness_key_file), "--liveness-address", net.ip4]
        argv += ["--liveness-node-key-file", str(f.state_dir / f"{self.name}.node-key")]
        argv += f.controller_flags  # later on the command line: they win
        self._child = Child(
            f"controller-{self.name}",
            argv,
            f.state_dir / f"controller-{self.name}.log",
            prefix=["ip", "netns", "exec", net.ns.name],
        )
        self._task = asyncio.create_task(self._child.supervise(), name=f"node-{self.name}")
        self.state = NodeState.UP
        self.boots += 1
        log.info("node.booted", node=self.name, netns=net.ns.name, boots=self.boots)

    async def _pull_plug(self) -> None:
        self.state = NodeState.KILLED
        child, self._child = self._child, None
        if child is not None:
            child.stopping()
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            await child.kill()  # SIGKILL: no goodbye, no cleanup
        if self._relay is not None:
            await self._relay.stop()
            self._relay = None
        net, self.net = self.net, None
        if net is not None:
            await asyncio.to_thread(self.fleet.network.remove_node, self.name)
        self.cached_addresses = []
        log.info("node.killed", node=self.name, netns=net.ns.name if net else None)


class NetnsFleet:
    """The namespaced nodes, their switch and the control namespace. `start` builds, `stop`
    removes everything (also what a failed `start` made)."""

    def __init__(
        self,
        names: list[str],
        *,
        state_dir: Path,
        upstream: tuple[str, int],
        log_level: str,
        liveness_key_file: Path | None = None,
        controller_flags: Sequence[str] = (),
    ) -> None:
        self.network = Network(0, prefix=PREFIX, client=False, admin_addresses=False)
        self.state_dir = state_dir
        self.node_kubeconfig = state_dir / "node.kubeconfig"
        self.liveness_key_file = liveness_key_file or state_dir / LIVENESS_KEY
        self.upstream = upstream
        self.log_level = log_level
        self.controller_flags = list(controller_flags)
        """More flags for every controller, after the fleet's own (bench_scale.py's netns
        node answers liveness on a loopback address: ``--liveness-address``)."""
        self.nodes = {n: NetnsNode(self, n, i) for i, n in enumerate(names, start=1)}
        self._control_relay: ApiRelay | None = None

    @property
    def control_netns(self) -> str:
        """Where the scheduler runs (the name is fixed before `start` makes it)."""
        return self.network.control_name

    def adopt_scheduler(self, child: Child) -> None:
        """Run `child` (the sandbox's `eipctl scheduler`) in the control namespace, on the
        node network, with the API through the control namespace's relay. Call it before
        the child starts; `start` must have run by then (the session starts its children
        after the fleet)."""
        child.prefix = ["ip", "netns", "exec", self.control_netns]
        argv = list(child.argv)
        if "--kubeconfig" in argv:
            argv[argv.index("--kubeconfig") + 1] = str(self.node_kubeconfig)
        else:
            argv += ["--kubeconfig", str(self.node_kubeconfig)]
        child.argv = argv

    def get(self, name: str) -> NetnsNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise NodeError(f"no node {name!r} (nodes: {', '.join(self.nodes)})") from None

    async def start(self) -> None:
        removed = await remove_leftovers()
        if removed:
            log.info("netns.leftovers.removed", namespaces=removed)
        await asyncio.to_thread(self.network.build)  # switch and control namespace
        assert self.network.control is not None
        self._control_relay = ApiRelay(self.network.control.name, self.upstream)
        await self._control_relay.start()
        await asyncio.gather(*(node.revive() for node in self.nodes.values()))

    def holder_of(self, ip_text: str) -> str | None:
        for node in self.nodes.values():
            if ip_text in node.cached_addresses:
                return node.name
        return None

    async def statuses(self) -> list[NodeStatus]:
        return list(await asyncio.gather(*(n.status() for n in self.nodes.values())))

    async def stop(self) -> None:
        up = [n for n in self.nodes.values() if n.state is NodeState.UP]
        await asyncio.gather(*(n.kill() for n in up), return_exceptions=True)
        relay, self._control_relay = self._control_relay, None
        if relay is not None:
            await relay.stop()
        await asyncio.to_thread(self.network.close)  # whatever is left, the control ns too
