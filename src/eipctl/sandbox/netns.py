"""`eipctl sandbox --netns` (root): nodes as Linux network namespaces, controllers for real.

    switch ns  [ br0 ]--- p-node-1 ~~ eth0 [node-1 ns]  198.51.100.11/24
                  `------ p-node-2 ~~ eth0 [node-2 ns]  198.51.100.12/24

Each node runs the real `eipctl controller` (netlink, gratuitous ARP) as a child process in
its namespace (`ip netns exec`). It reaches the API through a relay: a socket listening on
127.0.0.1:6443 *inside* the node's namespace, served by the sandbox's loop, that forwards to
the emulator in the host namespace. Nothing is created in the host namespace; namespaces are
named ``eipsbx-<sandbox pid>-...`` and those of dead sandboxes are removed at start.

Killing a node is pulling its plug: the controller gets SIGKILL, the relay closes, and the
namespace is deleted with its link and every address on it. Reviving builds it again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
from pathlib import Path

import structlog
import yaml

from eipctl.sandbox.apiserver import ApiServer
from eipctl.sandbox.children import Child
from eipctl.sandbox.namespaces import reap_leftovers, why_unavailable
from eipctl.sandbox.nodes import NodeError, NodeState, NodeStatus
from eipctl.sandbox.relay import NODE_API_PORT, ApiRelay

log = structlog.get_logger(__name__)

PREFIX = "eipsbx-"
LINK = "eth0"
NODE_NET = ipaddress.ip_network("198.51.100.0/24")
RELAY_PORT = NODE_API_PORT


def unavailable() -> str | None:
    """Why --netns cannot run here, or None."""
    reason = why_unavailable()
    return None if reason is None else f"--netns {reason}"


async def ip(*args: str, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        "ip", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {err.decode().strip()}")
    return out.decode()


def write_node_kubeconfig(server: ApiServer, path: Path) -> None:
    """The kubeconfig the nodes' controllers use: the API through their relay."""
    config = server.kubeconfig()
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
        self.ns = f"{fleet.prefix}{name}"
        self.state = NodeState.KILLED
        self.boots = 0
        self.cached_addresses: list[str] = []
        self._relay: ApiRelay | None = None
        self._child: Child | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def mac(self) -> str:
        return f"02:e1:00:00:{(self.index >> 8) & 0xFF:02x}:{self.index & 0xFF:02x}"

    async def addresses(self) -> list[str]:
        """Addresses on eth0 other than the node's own (the managed ones)."""
        if self.state is not NodeState.UP:
            return []
        out = await ip("-n", self.ns, "-j", "addr", "show", "dev", LINK, check=False)
        own = str(NODE_NET[10 + self.index])
        found = []
        for link in json.loads(out or "[]"):
            for a in link.get("addr_info") or []:
                if a.get("scope") == "global" and a.get("local") != own:
                    found.append(str(a["local"]))
        self.cached_addresses = found
        return found

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
        f, ns, port = self.fleet, self.ns, f"p-{self.name}"[:15]
        await ip("netns", "add", ns)
        await ip("-n", ns, "link", "set", "lo", "up")
        await ip(
            "-n", ns, "link", "add", LINK, "type", "veth", "peer", "name", port, "netns", f.switch
        )
        await ip("-n", ns, "link", "set", LINK, "address", self.mac)
        await ip("-n", ns, "addr", "add", f"{NODE_NET[10 + self.index]}/24", "dev", LINK)
        await ip("-n", ns, "link", "set", LINK, "up")
        await ip("-n", f.switch, "link", "set", port, "master", "br0", "up")
        self._relay = ApiRelay(ns, f.upstream)
        await self._relay.start()
        argv = ["controller", "--node-name", self.name, "--iface", LINK, "--kubeconfig"]
        argv += [str(f.node_kubeconfig), "--metrics-bind-address", "0"]
        argv += ["--health-probe-bind-address", "0", "--log-level", f.log_level]
        self._child = Child(
            f"controller-{self.name}",
            argv,
            f.state_dir / f"controller-{self.name}.log",
            prefix=["ip", "netns", "exec", ns],
        )
        self._task = asyncio.create_task(self._child.supervise(), name=f"node-{self.name}")
        self.state = NodeState.UP
        self.boots += 1
        log.info("node.booted", node=self.name, netns=ns, boots=self.boots)

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
        await ip("netns", "del", self.ns, check=False)
        self.cached_addresses = []
        log.info("node.killed", node=self.name, netns=self.ns)


class NetnsFleet:
    """The namespaced nodes and their switch. `start` builds, `stop` removes everything."""

    def __init__(
        self,
        names: list[str],
        *,
        state_dir: Path,
        upstream: tuple[str, int],
        log_level: str,
    ) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}-"
        self.switch = f"{self.prefix}sw"
        self.state_dir = state_dir
        self.node_kubeconfig = state_dir / "node.kubeconfig"
        self.upstream = upstream
        self.log_level = log_level
        self.nodes = {n: NetnsNode(self, n, i) for i, n in enumerate(names, start=1)}

    def get(self, name: str) -> NetnsNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise NodeError(f"no node {name!r} (nodes: {', '.join(self.nodes)})") from None

    async def start(self) -> None:
        removed = await remove_leftovers()
        if removed:
            log.info("netns.leftovers.removed", namespaces=removed)
        await ip("netns", "add", self.switch)
        await ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        await ip("-n", self.switch, "link", "set", "br0", "up")
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
        await ip("netns", "del", self.switch, check=False)
