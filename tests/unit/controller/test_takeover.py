"""controller/takeover.py: the previous holder judged like the scheduler judges it, on our
clock, from a fresh read of its IpNode."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from eipctl.controller.takeover import Takeover
from eipctl.core.conflict import ConflictDecision
from eipctl.core.ipnode import IpNode
from eipctl.core.link_plan import Address, PlacedClaim
from eipctl.core.resources import IpClaim
from eipctl.net.errors import SocketError
from eipctl.net.link import ProbeConflict

NODE = "node-a"
IP = "203.0.113.7"
MAC = b"\x02\x00\x00\x00\x00\x09"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Fakes:
    def __init__(self) -> None:
        self.clock = Clock()
        self.answer: ProbeConflict | Exception | None = ProbeConflict(
            ipaddress.ip_address(IP), MAC, 0.01
        )
        self.holder: dict[str, Any] | None = None
        self.owner: str | None = None
        self.conflicts: list[tuple[str, str]] = []
        self.failures: list[str] = []
        self.takeover = Takeover(
            NODE,
            node_timeout=1.0,
            prober=self.probe,
            mac_owner=self.mac_owner,
            holder_node=self.holder_node,
            clock=self.clock,
            report_conflict=lambda claim, reason, message: self.conflicts.append((reason, message)),
            report_failure=lambda op, exc, **fields: self.failures.append(op),
        )

    async def probe(self, link: str, ip: Any, /) -> ProbeConflict | None:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def mac_owner(self, mac: str) -> str | None:
        return self.owner

    async def holder_node(self, node: str) -> IpNode | None:
        return None if self.holder is None else IpNode.from_dict(self.holder)

    def beat(self, heartbeat: int, grace: float | None = None) -> None:
        status: dict[str, Any] = {"heartbeat": heartbeat}
        if grace is not None:
            status["restartGraceSeconds"] = grace
        self.holder = {"metadata": {"name": "node-old"}, "status": status}

    async def decide(self, *, shared: bool = False) -> ConflictDecision:
        claim = IpClaim.from_dict(
            {
                "metadata": {"name": "203-0-113-7"},
                "spec": {"ip": IP, "nodeName": NODE},
                "status": {"phase": "Bound", "boundNode": "node-old"},
            }
        )
        placed = PlacedClaim(claim.name, Address("eth0", ipaddress.ip_address(IP), 32), shared)
        return await self.takeover.decide(placed, claim)


@pytest.fixture
def f() -> Fakes:
    return Fakes()


async def test_a_silent_holder_is_taken_over_after_the_node_timeout(f: Fakes) -> None:
    f.beat(5)
    assert await f.decide() is ConflictDecision.WAIT  # first sight: live
    assert f.conflicts[-1][0] == "AddressInUse"
    assert "previous holder node-old is live" in f.conflicts[-1][1]
    f.clock.now += 0.9
    assert await f.decide() is ConflictDecision.WAIT
    f.clock.now += 0.1
    assert await f.decide() is ConflictDecision.TAKE_OVER  # no other node needed to judge
    f.beat(6)
    assert await f.decide() is ConflictDecision.WAIT  # it came back


async def test_a_holder_without_an_ipnode_is_dead_and_forgotten(f: Fakes) -> None:
    f.beat(5)
    assert await f.decide() is ConflictDecision.WAIT
    f.clock.now += 10.0
    f.holder = None
    assert await f.decide() is ConflictDecision.TAKE_OVER
    f.beat(5)  # back with the same counter: first sight again, not "unchanged for 10 s"
    assert await f.decide() is ConflictDecision.WAIT


async def test_a_holder_restarting_within_its_grace_is_waited_for(f: Fakes) -> None:
    """The scheduler keeps the claim on a node announcing a restart grace; so does this."""
    f.beat(8, grace=30.0)
    assert await f.decide() is ConflictDecision.WAIT
    f.clock.now += 29.9
    assert await f.decide() is ConflictDecision.WAIT
    f.clock.now += 0.1
    assert await f.decide() is ConflictDecision.TAKE_OVER


async def test_an_eipctl_mac_is_taken_over_without_judging_the_holder(f: Fakes) -> None:
    f.owner = "node-old"
    assert await f.decide() is ConflictDecision.TAKE_OVER
    f.answer = None
    assert await f.decide() is ConflictDecision.ADD


async def test_shared_claims_and_failed_probes_add(f: Fakes) -> None:
    assert await f.decide(shared=True) is ConflictDecision.ADD
    f.answer = SocketError("no CAP_NET_RAW")
    assert await f.decide() is ConflictDecision.ADD
    assert f.failures == ["probe"]
    assert f.conflicts == []
