"""Simulated nodes: the real controller on in-memory links, answering liveness probes over
real UDP on 127.1.x.y; kill silences it and drops everything, revive re-applies what is
placed on the node. No scheduler here: claims are placed by hand, probes sent by the test."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.net.liveness import LivenessProber
from eipctl.sandbox import nodes
from eipctl.sandbox.boot import node_names, seed
from eipctl.sandbox.nodes import Fleet, NodeError, NodeState, liveness_address
from kubemu import ApiServer
from polling import eventually

GROUP = "eipctl.io"
KEYRING = Keyring.from_text("sandbox-test-key-0123456789\n")


async def until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """Poll `check` (sync or async) until it returns something truthy; past `timeout` the
    test fails saying `what` (tests/polling.py)."""
    return await eventually(check, timeout=timeout, step=0.05, what=what)


def endpoint(srv: ApiServer, node: str) -> tuple[str, int] | None:
    """The liveness endpoint the node's IpNode publishes (what a scheduler probes)."""
    spec = (srv.store.find(GROUP, "ipnodes", node) or {}).get("spec") or {}
    if "livenessAddress" not in spec:
        return None
    return str(spec["livenessAddress"]), int(spec["livenessPort"])


class Scheduler:
    """A scheduler's prober, no more: probes every published endpoint, counts replies."""

    def __init__(self, srv: ApiServer, keyring: Keyring = KEYRING) -> None:
        self.srv = srv
        self.heard: Counter[str] = Counter()
        self.prober = LivenessProber(keyring, interval=0.05, on_reply=self._on_reply)

    def _on_reply(self, node: str, flags: Flag) -> None:
        self.heard[node] += 1

    async def run(self) -> None:
        task = asyncio.create_task(self.prober.run())
        try:
            while True:  # follow the IpNodes, as the scheduler's informer does
                names = node_names(2)
                found = {n: endpoint(self.srv, n) for n in names}
                self.prober.set_targets({n: e for n, e in found.items() if e is not None})
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.prober.close()

    async def silent(self, node: str, quiet: float = 0.5) -> bool:
        """Whether `node` sends no reply for `quiet` seconds."""
        before = self.heard[node]
        await asyncio.sleep(quiet)
        return self.heard[node] == before

    async def answering(self, node: str) -> None:
        before = self.heard[node]
        await until(lambda: self.heard[node] > before + 2, what=f"replies from {node}")


def place(srv: ApiServer, ip: str, node: str) -> None:
    srv.store.create(
        GROUP,
        "ipclaims",
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "IpClaim",
            "metadata": {
                "name": ip.replace(".", "-"),
                "labels": {"eipctl.io/pool": "sandbox", "eipctl.io/node": node},
            },
            "spec": {"ip": ip, "prefixLength": 32, "nodeName": node},
        },
    )


def phase(srv: ApiServer, ip: str) -> str:
    obj = srv.store.find(GROUP, "ipclaims", ip.replace(".", "-")) or {}
    return str((obj.get("status") or {}).get("phase") or "")


@pytest_asyncio.fixture
async def fleet(apiserver: ApiServer, tmp_path: Path) -> AsyncIterator[Fleet]:
    seed(apiserver, pool_cidr="203.0.113.0/24", nodes=node_names(2), services=0)
    config = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    fleet = Fleet(node_names(2), kubeconfig=config, keyring=KEYRING)
    fleet.boot_all()
    try:
        yield fleet
    finally:
        await fleet.stop()


@pytest_asyncio.fixture
async def scheduler(apiserver: ApiServer) -> AsyncIterator[Scheduler]:
    probes = Scheduler(apiserver)
    task = asyncio.create_task(probes.run())
    try:
        yield probes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_each_node_answers_on_its_own_loopback_address() -> None:
    assert liveness_address(1) == "127.1.0.1"
    assert liveness_address(256) == "127.1.1.0"
    assert liveness_address(1000) == "127.1.3.232"
    with pytest.raises(ValueError, match="out of range"):
        liveness_address(0)


async def test_node_applies_its_claims_and_answers_probes(
    apiserver: ApiServer, fleet: Fleet, scheduler: Scheduler
) -> None:
    place(apiserver, "203.0.113.10", "node-1")
    await until(lambda: fleet.holder_of("203.0.113.10") == "node-1", what="on node-1's link")
    await until(lambda: phase(apiserver, "203.0.113.10") == "Bound")
    await scheduler.answering("node-1")
    await scheduler.answering("node-2")
    address, port = endpoint(apiserver, "node-2") or ("", 0)
    assert address == "127.1.0.2" and port > 0
    assert fleet.holder_of("203.0.113.10") == "node-1"  # node-2 never took it
    assert fleet.holding == {"node-1"}  # the nodes a worker looks at for address changes
    status = {s.name: s for s in await fleet.statuses()}
    assert status["node-1"].addresses == ["203.0.113.10"]
    assert status["node-1"].mac == "02:e1:00:00:00:01"


async def test_kill_stops_replies_and_drops_addresses(
    apiserver: ApiServer, fleet: Fleet, scheduler: Scheduler
) -> None:
    place(apiserver, "203.0.113.11", "node-1")
    await until(lambda: fleet.holder_of("203.0.113.11") == "node-1")
    await scheduler.answering("node-1")
    node = fleet.get("node-1")
    dropped = await node.kill()
    assert dropped == ["203.0.113.11"]
    assert node.state is NodeState.KILLED
    assert fleet.holder_of("203.0.113.11") is None
    assert all(m[0] is not node.backend for m in fleet.segment.members)
    assert await scheduler.silent("node-1")  # ten probe intervals without a reply
    await scheduler.answering("node-2")  # the other node was not touched
    # a crash, not a clean restart: nothing asks the scheduler to wait before moving IPs
    ipnode = apiserver.store.find(GROUP, "ipnodes", "node-1") or {}
    assert not any("grace" in key.lower() for key in ipnode.get("status") or {})
    with pytest.raises(NodeError, match="not running"):
        await node.kill()


async def test_revive_boots_an_empty_link_and_reapplies(
    apiserver: ApiServer, fleet: Fleet, scheduler: Scheduler
) -> None:
    place(apiserver, "203.0.113.12", "node-1")
    node = fleet.get("node-1")
    await until(lambda: fleet.holder_of("203.0.113.12") == "node-1")
    await node.kill()
    assert await scheduler.silent("node-1")
    await node.revive()
    assert node.boots == 2
    with pytest.raises(NodeError, match="already up"):
        await node.revive()
    # the claim is still placed on node-1 (no scheduler here), so the new controller puts it back
    await until(lambda: fleet.holder_of("203.0.113.12") == "node-1")
    await scheduler.answering("node-1")  # on the endpoint the new controller published


async def test_kill_and_revive_at_once_do_not_overlap(
    apiserver: ApiServer, fleet: Fleet, scheduler: Scheduler
) -> None:
    node = fleet.get("node-2")
    await scheduler.answering("node-2")
    kill = asyncio.create_task(node.kill())
    await asyncio.sleep(0)  # the kill has started
    await node.revive()  # waits for the kill to finish, then boots
    await kill
    assert node.state is NodeState.UP and node.boots == 2
    assert sum(1 for m in fleet.segment.members if m[0] is node.backend) == 1
    await scheduler.answering("node-2")


async def test_a_prober_without_the_key_gets_no_reply(apiserver: ApiServer, fleet: Fleet) -> None:
    await until(lambda: endpoint(apiserver, "node-1"))
    stranger = Scheduler(apiserver, Keyring.from_text("not-the-sandbox-key-0123\n"))
    task = asyncio.create_task(stranger.run())
    try:
        assert await stranger.silent("node-1")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_unknown_node_names_the_known_ones(tmp_path: Path) -> None:
    fleet = Fleet(["node-1", "node-2"], kubeconfig=tmp_path / "none")
    with pytest.raises(NodeError, match=r"no node 'node-9' \(nodes: node-1, node-2\)"):
        fleet.get("node-9")
    many = Fleet(node_names(1000), kubeconfig=tmp_path / "none")
    with pytest.raises(NodeError, match=r"\(nodes: node-1, node-2, node-3, \.\.\., node-1000\)"):
        many.get("node-0")


async def test_nodes_boot_a_wave_at_a_time(
    apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nodes, "BOOT_WAVE", 1)
    seed(apiserver, pool_cidr="203.0.113.0/24", nodes=node_names(2), services=0)
    config = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    fleet = Fleet(node_names(2), kubeconfig=config, keyring=KEYRING)
    stopped = asyncio.Event()
    stopped.set()
    await fleet.start(stopped)  # asked to stop before the first wave: nothing boots
    assert all(n.state is NodeState.KILLED for n in fleet.nodes.values())
    try:
        await fleet.start()
        first, second = fleet.get("node-1"), fleet.get("node-2")
        # the second wave started only once the first had registered its IpNode
        assert first.controller is not None and first.controller.registered.is_set()
        assert second.state is NodeState.UP
        assert await second.wait_registered(15.0)
    finally:
        await fleet.stop()


async def test_the_nodes_share_one_client_that_trusts_no_environment(
    apiserver: ApiServer, fleet: Fleet, scheduler: Scheduler
) -> None:
    await scheduler.answering("node-1")
    await scheduler.answering("node-2")
    client = await fleet.kube.client()
    session = client.rest_client.pool_manager
    assert session.trust_env is False  # no thread hop per request for ~/.netrc and proxies
    assert session.connector.limit == 0  # every node's watch holds a connection
    controllers = [fleet.get(n).controller for n in ("node-1", "node-2")]
    apis = {id(c.reachability._api.api_client) for c in controllers if c is not None}
    assert apis == {id(client)}
    await fleet.stop()
    assert session.closed
