"""The scheduler judges nodes by their answers to its UDP liveness probes (real sockets on
127.0.0.1), publishes the verdict as the Live condition, and moves a silent or fenced
node's claims. No API heartbeat is written by these nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from scheduler_harness import GROUP, add_claims, placements, scheduler

from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.net.liveness import LivenessResponder
from kubemu import ApiServer
from polling import eventually

KEYRING = Keyring([b"the scheduler tests' shared key"])


class UdpNodes:
    """IpNodes whose controllers are just liveness responders on loopback."""

    def __init__(self, srv: ApiServer) -> None:
        self.srv = srv
        self.responders: dict[str, LivenessResponder] = {}
        self.fenced: set[str] = set()

    async def add(self, name: str, keyring: Keyring = KEYRING) -> None:
        responder = LivenessResponder(name, keyring, flags=lambda n=name: self._flags(n))
        await responder.start("127.0.0.1", 0)
        self.responders[name] = responder
        self.srv.store.create(
            GROUP,
            "ipnodes",
            {
                "apiVersion": "eipctl.io/v1alpha1",
                "kind": "IpNode",
                "metadata": {"name": name},
                "spec": {
                    "link": "eth0",
                    "livenessAddress": "127.0.0.1",
                    "livenessPort": responder.port,
                },
            },
        )

    def _flags(self, name: str) -> Flag:
        return Flag.FENCED if name in self.fenced else Flag.NONE

    def kill(self, name: str) -> None:
        self.responders.pop(name).close()

    def live_condition(self, name: str) -> tuple[str, str] | None:
        obj = self.srv.store.get(GROUP, "ipnodes", name)
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] == "Live":
                return c["status"], c.get("reason", "")
        return None

    def close(self) -> None:
        for responder in self.responders.values():
            responder.close()


@pytest_asyncio.fixture
async def udp_nodes(srv: ApiServer) -> AsyncIterator[UdpNodes]:
    nodes = UdpNodes(srv)
    try:
        yield nodes
    finally:
        nodes.close()


def on(srv: ApiServer, node: str) -> set[str]:
    return {claim for claim, where in placements(srv).items() if where == node}


async def test_a_silent_node_is_declared_dead_and_its_claims_move(
    srv: ApiServer, kubeconfig: Path, udp_nodes: UdpNodes
) -> None:
    for i in range(3):
        await udp_nodes.add(f"node-{i}")
    add_claims(srv, 9)
    async with scheduler(kubeconfig, KEYRING, liveness_timeout=0.4, liveness_interval=0.1):
        await eventually(lambda: all(placements(srv).values()), what="every claim placed")
        for i in range(3):
            await eventually(
                lambda n=f"node-{i}": udp_nodes.live_condition(n) == ("True", "Replying"),
                what="Live=True",
            )
        victims = on(srv, "node-1")
        assert victims
        udp_nodes.kill("node-1")
        await eventually(lambda: not on(srv, "node-1"), what="node-1's claims moved")
        assert udp_nodes.live_condition("node-1") == ("False", "NoReply")
        moved = placements(srv)
        assert {moved[c] for c in victims} <= {"node-0", "node-2"}


async def test_a_fenced_reply_moves_the_claims_at_once(
    srv: ApiServer, kubeconfig: Path, udp_nodes: UdpNodes
) -> None:
    """FENCED: no timeout to wait (a long one here would show it)."""
    for i in range(2):
        await udp_nodes.add(f"node-{i}")
    add_claims(srv, 4)
    async with scheduler(kubeconfig, KEYRING, liveness_timeout=30.0, liveness_interval=0.1):
        await eventually(lambda: all(placements(srv).values()), what="every claim placed")
        udp_nodes.fenced.add("node-0")
        await eventually(lambda: not on(srv, "node-0"), what="node-0's claims moved", timeout=5)
        assert udp_nodes.live_condition("node-0") == ("False", "Fenced")
        udp_nodes.fenced.clear()
        await eventually(lambda: udp_nodes.live_condition("node-0") == ("True", "Replying"))


async def test_replies_under_another_key_do_not_count(
    srv: ApiServer, kubeconfig: Path, udp_nodes: UdpNodes
) -> None:
    await udp_nodes.add("node-0")
    await udp_nodes.add("node-x", keyring=Keyring([b"somebody else's key entirely"]))
    add_claims(srv, 4)
    async with scheduler(kubeconfig, KEYRING, liveness_timeout=0.4, liveness_interval=0.1):
        await eventually(lambda: udp_nodes.live_condition("node-x") == ("False", "NoReply"))
        # a node listed but never heard has one timeout from first sight, like every node
        # when a replica starts; then nothing stays on it
        await eventually(lambda: set(placements(srv).values()) == {"node-0"})
