"""Helpers for the controller stories: one node namespace, one peer, a real `eipctl controller`.

Holds no tests (named to sit with the stories that import it).

Topology (all made by the test, removed afterwards even on failure)::

    [node ns]  eth0 (192.0.2.2/24) ==veth== p0 (192.0.2.1/24)  [peer ns]
               127.0.0.1:6443 -> relay -> emulator (host 127.0.0.1)

The controller runs as `ip netns exec <node> python -m eipctl controller --iface eth0`, so it
sees only the node's links. It answers liveness probes on 192.0.2.2:9473 with a random key
(`<tmp>/liveness.key`); no scheduler runs here, so none come: it proves the API reachable
with its reads alone (docs/liveness.md, "The controller: fencing without writes"). It reaches the API emulator, which listens on the host's
127.0.0.1, through `eipctl.sandbox.relay.ApiRelay`: a listening socket made inside the node's
namespace and served by the test's loop (no host link is touched, no route is added).
`relay.cut()` drops the path (fencing), `relay.heal()` restores it. The peer routes
203.0.113.0/24 on-link and plays the router: its neighbour table shows what the
announcements did, and a UDP echo through it measures traffic gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import re
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

import polling
from eipctl.core.naming import LABEL_NODE, claim_name_for
from eipctl.kube.client import IPCLAIMS, IPNODES, KubeApi, Obj
from eipctl.kube.errors import NotFound
from eipctl.net.netlink import NetlinkLinkBackend
from eipctl.sandbox.namespaces import Namespace, NamespaceSet, call_in_netns
from eipctl.sandbox.relay import NODE_API_PORT, ApiRelay
from eipctl.sandbox.testbed.processes import Process
from kubemu import ApiServer

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "deploy" / "crds"
NODE = "node-a"
NODE_IP = "192.0.2.2"
ECHO_PORT = 7007

# Fast but realistic timings; lifetimes are whole seconds in the kernel. The API heartbeat
# keeps its default (10 s: one write at start, then for kubectl only); the API reads every
# 200 ms prove the API reachable, and 500 ms without an answer fences.
TIMINGS = {
    "api-check-interval": "200ms",
    "fence-timeout": "500ms",
    "address-lifetime": "3s",
    "resync-interval": "2s",
    "probe-timeout": "150ms",
    "announce-count": "2",
    "announce-interval": "300ms",
}


eventually = partial(polling.eventually, step=0.02)
"""Checks here run `ip` in a namespace: poll a little less often."""


_ADDR = re.compile(r"inet6? (\S+) .*?valid_lft (\S+)")


def link_addresses(ns: Namespace, dev: str = "eth0") -> dict[str, str]:
    """ip/prefix -> valid_lft text ("forever" or "2sec") for every address on `dev`."""
    out = ns.ip(f"-o addr show dev {dev}")
    found = {}
    for line in out.splitlines():
        m = _ADDR.search(line)
        if m and not m.group(1).startswith("fe80:"):
            found[m.group(1)] = m.group(2)
    return found


def neighbour_mac(ns: Namespace, ip: str, dev: str) -> str | None:
    out = ns.ip(f"neigh show {ip} dev {dev}")
    m = re.search(r"lladdr ([0-9a-f:]{17})", out)
    return m.group(1) if m else None


def write_liveness_key(path: Path) -> Path:
    """A random liveness key file (one line, as the Secret eipctl-liveness holds it)."""
    path.write_text(secrets.token_urlsafe(32) + "\n")
    path.chmod(0o600)
    return path


@dataclass
class Rig:
    srv: ApiServer
    api: KubeApi
    node: Namespace
    peer: Namespace
    relay: ApiRelay
    kubeconfig: Path
    log_dir: Path
    key_file: Path
    procs: list[Process] = field(default_factory=list)

    def controller(self, name: str = "controller", **flags: str) -> Process:
        args = {**TIMINGS, **flags}
        argv = [
            sys.executable, "-m", "eipctl", "controller",
            "--kubeconfig", str(self.kubeconfig),
            "--node-name", NODE,
            "--iface", "eth0",
            "--metrics-bind-address", "0",
            "--health-probe-bind-address", "0",
            "--liveness-key-file", str(self.key_file),
            "--liveness-address", NODE_IP,
            *(f"--{k}={v}" for k, v in args.items()),
        ]  # fmt: skip
        proc = Process(name, argv, self.log_dir, netns=self.node.name)
        self.procs.append(proc)
        proc.start()
        return proc

    async def plant_managed(self, address: str, lifetime: int = 30) -> None:
        """A managed address as an earlier controller would have left it (iproute2 6.1
        cannot set IFA_PROTO, so the net layer's own backend adds it)."""
        ip, _, prefixlen = address.partition("/")
        backend = NetlinkLinkBackend(netns=self.node.name)
        try:
            await backend.add("eth0", ip, int(prefixlen), lifetime)
        finally:
            await backend.close()

    def addresses(self) -> dict[str, str]:
        return link_addresses(self.node)

    def has(self, address: str) -> bool:
        return address in self.addresses()

    async def heartbeat(self) -> int:
        try:
            obj = await self.api.get(IPNODES, NODE)
        except NotFound:
            return -1
        return int((obj.get("status") or {}).get("heartbeat") or 0)

    async def wait_beating(self, timeout: float = 15.0) -> int:
        """Until the IpNode's heartbeat moves (a controller writes one at start, then every
        --heartbeat-interval); returns the new value."""
        first = await self.heartbeat()
        return int(await eventually(lambda: self._moved(first), timeout=timeout))

    async def _moved(self, first: int) -> int | None:
        now = await self.heartbeat()
        return now if now > 0 and now != first else None

    async def claim(self, ip: str, node: str = NODE, **spec: Any) -> Obj:
        body: Obj = {
            "metadata": {"name": claim_name_for(ip), "labels": {LABEL_NODE: node}},
            "spec": {"ip": ip, "nodeName": node, **spec},
        }
        return await self.api.create(IPCLAIMS, body)

    async def move(self, ip: str, node: str) -> None:
        patch = {"metadata": {"labels": {LABEL_NODE: node}}, "spec": {"nodeName": node}}
        await self.api.patch(IPCLAIMS, claim_name_for(ip), patch)

    async def bound(self, ip: str) -> bool:
        status = (await self.api.get(IPCLAIMS, claim_name_for(ip))).get("status") or {}
        return status.get("phase") == "Bound" and status.get("boundNode") == NODE

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log_tail(60)}" for p in self.procs)


@contextlib.asynccontextmanager
async def rig(srv: ApiServer, api_client: Any, tmp_path: Path) -> AsyncIterator[Rig]:
    await srv.load_crds_from_dir(CRDS)
    with NamespaceSet() as bed:
        node, peer = bed.namespace("node"), bed.namespace("peer")
        bed.veth(node, "eth0", peer, "p0")
        node.ip(f"addr add {NODE_IP}/24 dev eth0")
        peer.ip("addr add 192.0.2.1/24 dev p0")
        peer.ip("route add 203.0.113.0/24 dev p0")
        peer.ip("-6 route add 2001:db8::/64 dev p0")
        relay = ApiRelay(node.name, (srv.host, srv.port))
        await relay.start()
        config = srv.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{NODE_API_PORT}"
        kubeconfig = tmp_path / "node.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        key = write_liveness_key(tmp_path / "liveness.key")
        r = Rig(srv, KubeApi(api_client), node, peer, relay, kubeconfig, tmp_path, key)
        try:
            yield r
        finally:
            for proc in r.procs:
                await asyncio.to_thread(proc.kill)
            await relay.stop()


def _udp_socket(bind: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(bind)
    sock.setblocking(False)
    return sock


class EchoTraffic:
    """UDP echo: a server on every node address, a client in the peer sending every `period`.

    `gaps()` gives the longest time without an answer, i.e. the traffic interruption.
    """

    def __init__(self, rig: Rig, target: str, period: float = 0.01) -> None:
        self.target = (str(ipaddress.ip_address(target)), ECHO_PORT)
        self.period = period
        self.server = call_in_netns(rig.node.name, _udp_socket, ("0.0.0.0", ECHO_PORT))
        self.client = call_in_netns(rig.peer.name, _udp_socket, ("192.0.2.1", 0))
        self.answers: list[float] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> EchoTraffic:
        self._tasks = [
            asyncio.create_task(self._serve()),
            asyncio.create_task(self._send()),
            asyncio.create_task(self._receive()),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.server.close()
        self.client.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            data, peer = await loop.sock_recvfrom(self.server, 64)
            with contextlib.suppress(OSError):
                self.server.sendto(data, peer)

    async def _send(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.client.sendto(b"x", self.target)
            await asyncio.sleep(self.period)

    async def _receive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await loop.sock_recv(self.client, 64)
            self.answers.append(time.monotonic())

    def longest_gap(self, since: float, until_: float) -> float:
        times = [since, *(t for t in self.answers if since <= t <= until_), until_]
        return max(b - a for a, b in itertools.pairwise(times))


@pytest_asyncio.fixture(name="r")
async def rig_fixture(apiserver: ApiServer, api_client: Any, tmp_path: Path) -> AsyncIterator[Rig]:
    """`rig` as a fixture (import it by this name): the rig's logs are shown on failure."""
    async with rig(apiserver, api_client, tmp_path) as made:
        try:
            yield made
        except BaseException:
            print(made.logs())
            raise
