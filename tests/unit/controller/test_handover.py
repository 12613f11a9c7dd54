"""Handover alone: how long a moved address is held, and how each hold is counted."""

from __future__ import annotations

import ipaddress

from eipctl.controller.handover import Handover
from eipctl.core.link_plan import Address
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import Obj
from eipctl.metrics import REGISTRY

ADDR = Address("eth0", ipaddress.ip_address("203.0.113.7"), 32)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def claim(node: str, bound: bool) -> Obj:
    status = {"phase": "Bound", "boundNode": node} if bound else {"phase": "Scheduled"}
    return {
        "metadata": {"name": claim_name_for("203.0.113.7")},
        "spec": {"ip": "203.0.113.7", "nodeName": node},
        "status": status,
    }


def count(result: str) -> float:
    value = REGISTRY.get_sample_value("eipctl_controller_handovers_total", {"result": result})
    return value or 0.0


def holds() -> float:
    return REGISTRY.get_sample_value("eipctl_controller_handover_seconds_count") or 0.0


async def test_held_until_the_new_node_binds_and_counted_bound() -> None:
    clock = Clock()
    current: dict[str, Obj | None] = {"c": claim("node-b", bound=False)}

    async def lookup(name: str) -> Obj | None:
        return current["c"]

    h = Handover("node-a", lookup, max_hold=2.0, clock=clock)
    bound, seconds = count("bound"), holds()
    assert await h.waiting(ADDR)
    clock.now = 0.4
    assert await h.waiting(ADDR)
    assert 1.5 < h.remaining(ADDR) <= 1.6
    current["c"] = claim("node-b", bound=True)
    clock.now = 0.5
    assert not await h.waiting(ADDR)
    assert (count("bound"), holds()) == (bound + 1, seconds + 1)
    assert h.remaining(ADDR) == 0.0


async def test_a_hold_that_runs_out_is_counted_expired() -> None:
    clock = Clock()

    async def lookup(name: str) -> Obj | None:
        return claim("node-b", bound=False)

    h = Handover("node-a", lookup, max_hold=2.0, clock=clock)
    expired = count("expired")
    assert await h.waiting(ADDR)
    clock.now = 2.0
    assert not await h.waiting(ADDR)
    assert count("expired") == expired + 1


async def test_a_claim_released_before_any_hold_counts_nothing() -> None:
    async def lookup(name: str) -> Obj | None:
        return None  # the Service went: the claim is deleted

    h = Handover("node-a", lookup, max_hold=2.0, clock=Clock())
    before = {r: count(r) for r in ("bound", "expired", "released", "unknown")}
    assert not await h.waiting(ADDR)
    assert {r: count(r) for r in before} == before
