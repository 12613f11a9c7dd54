"""Simulated nodes: the real controller on in-memory links; kill drops everything, revive
re-applies what is placed on the node. No scheduler here: claims are placed by hand."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eipctl.sandbox.apiserver import ApiServer
from eipctl.sandbox.boot import node_names, seed
from eipctl.sandbox.nodes import Fleet, NodeError, NodeState

GROUP = "eipctl.io"


async def until(check: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """Poll `check` (sync or async) until it returns something truthy."""
    async with asyncio.timeout(timeout):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(0.05)


def heartbeat(srv: ApiServer, node: str) -> int:
    obj = srv.store.find(GROUP, "ipnodes", node)
    return int(((obj or {}).get("status") or {}).get("heartbeat") or 0)


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
    fleet = Fleet(node_names(2), kubeconfig=config)
    fleet.boot_all()
    try:
        yield fleet
    finally:
        await fleet.stop()


async def test_node_applies_its_claims_and_heartbeats(apiserver: ApiServer, fleet: Fleet) -> None:
    place(apiserver, "203.0.113.10", "node-1")
    await until(lambda: fleet.holder_of("203.0.113.10") == "node-1", what="on node-1's link")
    await until(lambda: phase(apiserver, "203.0.113.10") == "Bound")
    first = await until(lambda: heartbeat(apiserver, "node-2"))
    await until(lambda: heartbeat(apiserver, "node-2") > first + 2)
    assert fleet.holder_of("203.0.113.10") == "node-1"  # node-2 never took it
    status = {s.name: s for s in await fleet.statuses()}
    assert status["node-1"].addresses == ["203.0.113.10"]
    assert status["node-1"].mac == "02:e1:00:00:00:01"


async def test_kill_stops_heartbeat_and_drops_addresses(apiserver: ApiServer, fleet: Fleet) -> None:
    place(apiserver, "203.0.113.11", "node-1")
    await until(lambda: fleet.holder_of("203.0.113.11") == "node-1")
    node = fleet.get("node-1")
    dropped = await node.kill()
    assert dropped == ["203.0.113.11"]
    assert node.state is NodeState.KILLED
    assert fleet.holder_of("203.0.113.11") is None
    assert all(m[0] is not node.backend for m in fleet.segment.members)
    frozen = heartbeat(apiserver, "node-1")
    await asyncio.sleep(1.0)  # four heartbeat intervals
    assert heartbeat(apiserver, "node-1") == frozen
    # a crash, not a clean restart: nothing asks the scheduler to wait before moving IPs
    ipnode = apiserver.store.find(GROUP, "ipnodes", "node-1") or {}
    assert not any("grace" in key.lower() for key in ipnode.get("status") or {})
    with pytest.raises(NodeError, match="not running"):
        await node.kill()


async def test_revive_boots_an_empty_link_and_reapplies(apiserver: ApiServer, fleet: Fleet) -> None:
    place(apiserver, "203.0.113.12", "node-1")
    node = fleet.get("node-1")
    await until(lambda: fleet.holder_of("203.0.113.12") == "node-1")
    await node.kill()
    frozen = heartbeat(apiserver, "node-1")
    await node.revive()
    assert node.boots == 2
    with pytest.raises(NodeError, match="already up"):
        await node.revive()
    # the claim is still placed on node-1 (no scheduler here), so the new controller puts it back
    await until(lambda: fleet.holder_of("203.0.113.12") == "node-1")
    await until(lambda: heartbeat(apiserver, "node-1") > frozen)


async def test_kill_and_revive_at_once_do_not_overlap(apiserver: ApiServer, fleet: Fleet) -> None:
    node = fleet.get("node-2")
    await until(lambda: heartbeat(apiserver, "node-2"))
    kill = asyncio.create_task(node.kill())
    await asyncio.sleep(0)  # the kill has started
    await node.revive()  # waits for the kill to finish, then boots
    await kill
    assert node.state is NodeState.UP and node.boots == 2
    assert sum(1 for m in fleet.segment.members if m[0] is node.backend) == 1
    frozen = heartbeat(apiserver, "node-2")
    await until(lambda: heartbeat(apiserver, "node-2") > frozen)


def test_unknown_node_names_the_known_ones(tmp_path: Path) -> None:
    fleet = Fleet(["node-1", "node-2"], kubeconfig=tmp_path / "none")
    with pytest.raises(NodeError, match=r"no node 'node-9' \(nodes: node-1, node-2\)"):
        fleet.get("node-9")
