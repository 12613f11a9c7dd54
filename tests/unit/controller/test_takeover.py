"""controller/takeover.py: the previous holder as the scheduler judged it (its IpNode's Live
condition, read fresh), the probe skipped when the holder is declared dead."""

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


class Fakes:
    def __init__(self, claim_lookup: Any = None) -> None:
        self.answer: ProbeConflict | Exception | None = ProbeConflict(
            ipaddress.ip_address(IP), MAC, 0.01
        )
        self.holder: dict[str, Any] | None = None
        self.holder_error: Exception | None = None
        self.owner: str | None = None
        self.probes = 0
        self.holder_reads = 0
        self.conflicts: list[tuple[str, str]] = []
        self.failures: list[str] = []
        self.takeover = Takeover(
            NODE,
            prober=self.probe,
            mac_owner=self.mac_owner,
            holder_node=self.holder_node,
            report_conflict=lambda claim, reason, message: self.conflicts.append((reason, message)),
            report_failure=lambda op, exc, **fields: self.failures.append(op),
            claim_lookup=claim_lookup,
        )

    async def probe(self, link: str, ip: Any, /) -> ProbeConflict | None:
        self.probes += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def mac_owner(self, mac: str) -> str | None:
        return self.owner

    async def holder_node(self, node: str) -> IpNode | None:
        self.holder_reads += 1
        if self.holder_error is not None:
            raise self.holder_error
        return None if self.holder is None else IpNode.from_dict(self.holder)

    def judged(self, live: str | None, reason: str = "NoReply") -> None:
        """The holder's IpNode with the scheduler's Live condition (None: no verdict yet)."""
        status: dict[str, Any] = {"heartbeat": 5}
        if live is not None:
            status["conditions"] = [
                {
                    "type": "Live",
                    "status": live,
                    "reason": reason,
                    "lastTransitionTime": "2026-12-01T10:00:00Z",
                }
            ]
        self.holder = {"metadata": {"name": "node-old"}, "status": status}

    async def decide(
        self, *, shared: bool = False, bound: str = "node-old", previous: str = ""
    ) -> ConflictDecision:
        status: dict[str, Any] = {"phase": "Bound", "boundNode": bound} if bound else {}
        if previous:
            status = {"phase": "Scheduled", "previousNode": previous}
        claim = IpClaim.from_dict(
            {
                "metadata": {"name": "203-0-113-7"},
                "spec": {"ip": IP, "nodeName": NODE},
                "status": status,
            }
        )
        placed = PlacedClaim(claim.name, Address("eth0", ipaddress.ip_address(IP), 32), shared)
        return await self.takeover.decide(placed, claim)


@pytest.fixture
def f() -> Fakes:
    return Fakes()


async def test_a_holder_declared_dead_is_replaced_without_a_probe(f: Fakes) -> None:
    """The failover path: the scheduler moved the claim off a dead node; no 200 ms probe."""
    f.judged("False")
    assert await f.decide() is ConflictDecision.ADD
    assert f.probes == 0
    assert f.conflicts == []


async def test_the_move_s_previous_node_counts_as_the_holder(f: Fakes) -> None:
    """The scheduler's move clears boundNode and keeps it as previousNode: the claim may reach
    us with either, and both must skip the probe when that node is declared dead."""
    f.judged("False")
    assert await f.decide(bound="", previous="node-old") is ConflictDecision.ADD
    assert (f.probes, f.holder_reads) == (0, 1)


async def test_a_live_holder_that_answers_is_waited_for(f: Fakes) -> None:
    f.judged("True", reason="Replying")
    assert await f.decide() is ConflictDecision.WAIT
    assert f.probes == 1
    assert f.conflicts[-1][0] == "AddressInUse"
    assert "previous holder node-old is live" in f.conflicts[-1][1]
    f.judged("False")  # the scheduler declares it dead: the next retry adds
    assert await f.decide() is ConflictDecision.ADD


async def test_a_holder_not_judged_yet_is_probed_and_an_answer_waited_for(f: Fakes) -> None:
    for verdict in (None, "Unknown"):
        f.judged(verdict)
        assert await f.decide() is ConflictDecision.WAIT
        assert "no previous holder is known" in f.conflicts[-1][1]
    f.answer = None  # nobody answers: add
    assert await f.decide() is ConflictDecision.ADD


async def test_a_holder_without_an_ipnode_is_dead(f: Fakes) -> None:
    f.holder = None
    assert await f.decide() is ConflictDecision.ADD
    assert f.probes == 0


async def test_a_failed_holder_read_is_no_verdict(f: Fakes) -> None:
    f.holder_error = TimeoutError()
    assert await f.decide() is ConflictDecision.WAIT  # unknown: never taken over on a guess
    assert f.probes == 1


async def test_no_holder_read_without_another_previous_holder(f: Fakes) -> None:
    f.answer = None
    assert await f.decide(bound="") is ConflictDecision.ADD
    assert await f.decide(bound=NODE) is ConflictDecision.ADD
    assert f.holder_reads == 0
    assert f.probes == 2


async def test_an_eipctl_mac_is_taken_over_from_a_live_holder(f: Fakes) -> None:
    f.judged("True", reason="Replying")
    f.owner = "node-old"
    assert await f.decide() is ConflictDecision.TAKE_OVER
    f.answer = None
    assert await f.decide() is ConflictDecision.ADD


async def test_shared_claims_and_failed_probes_add(f: Fakes) -> None:
    f.judged("True", reason="Replying")
    assert await f.decide(shared=True) is ConflictDecision.ADD
    assert f.holder_reads == 0
    f.answer = SocketError("no CAP_NET_RAW")
    assert await f.decide() is ConflictDecision.ADD
    assert f.failures == ["probe"]
    assert f.conflicts == []


@pytest.mark.parametrize(
    ("fresh", "decision"),
    [
        ({"spec": {"ip": IP, "nodeName": NODE}}, ConflictDecision.TAKE_OVER),
        ({"spec": {"ip": IP, "nodeName": "node-b"}}, ConflictDecision.WAIT),  # moved away
        (None, ConflictDecision.WAIT),  # deleted
        (TimeoutError(), ConflictDecision.WAIT),  # unknown: not on a guess
    ],
)
async def test_a_take_over_needs_the_api_to_still_place_the_claim_here(
    fresh: Any, decision: ConflictDecision
) -> None:
    """Soak seed 1505: a controller thawed after 3 s probed with its stale cache, found the
    new holder answering and took the IP back. The take-over rule now reads the claim fresh."""
    reads: list[str] = []

    async def lookup(name: str) -> dict[str, Any] | None:
        reads.append(name)
        if isinstance(fresh, Exception):
            raise fresh
        return None if fresh is None else {"metadata": {"name": name}, **fresh}

    f = Fakes(claim_lookup=lookup)
    f.judged("True", reason="Replying")
    f.owner = "node-b"  # another eipctl node answers for the IP
    assert await f.decide(bound=NODE) is decision
    assert reads == ["203-0-113-7"]
    assert f.conflicts == []  # a stale view is no conflict to report on the claim
