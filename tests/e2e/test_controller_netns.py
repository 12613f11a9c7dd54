"""A real `eipctl controller` process on a real link in a network namespace.

Stories: at start it purges what is no longer its own and keeps what is; a claim placed on
the node lands on the link (v4 and v6), is announced and reported Bound; drift is repaired;
a claim that moves away leaves; a restart never interrupts traffic.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from test_controller_support import (
    NODE,
    EchoTraffic,
    Rig,
    eventually,
    neighbour_mac,
    rig_fixture,  # noqa: F401 (the `r` fixture)
)

from eipctl.kube.client import IPNODES
from eipctl.sandbox.namespaces import why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))


async def test_claims_follow_placement_on_a_real_link(r: Rig) -> None:
    await r.plant_managed("203.0.113.50/32")  # left by an earlier controller, not placed here
    r.peer.ip("neigh replace 203.0.113.7 lladdr 02:00:00:00:00:99 dev p0 nud stale")
    r.controller()
    await r.wait_beating()

    # start-up purge: the stale managed address goes, the admin's address stays
    await eventually(lambda: not r.has("203.0.113.50/32"))
    assert "192.0.2.2/24" in r.addresses()

    # placed here: added with a finite lifetime, announced (the router's entry moves), Bound
    await r.claim("203.0.113.7")
    lft = await eventually(lambda: r.addresses().get("203.0.113.7/32"))
    assert lft != "forever" and int(lft.removesuffix("sec")) <= 3
    mac = r.node.mac("eth0").hex(":")
    await eventually(lambda: neighbour_mac(r.peer, "203.0.113.7", "p0") == mac)
    await eventually(lambda: r.bound("203.0.113.7"))

    await r.claim("2001:db8::7", prefixLength=64)
    await eventually(lambda: r.has("2001:db8::7/64"))

    async def reported() -> bool:
        status = (await r.api.get(IPNODES, NODE)).get("status") or {}
        return set(status.get("addresses") or []) == {"203.0.113.7/32", "2001:db8::7/64"}

    await eventually(reported)

    # drift: deleted by hand -> back; a stray managed address -> gone
    started = time.monotonic()
    r.node.ip("addr del 203.0.113.7/32 dev eth0")
    await eventually(lambda: r.has("203.0.113.7/32"))
    repaired_in = time.monotonic() - started
    await r.plant_managed("203.0.113.60/32")
    await eventually(lambda: not r.has("203.0.113.60/32"))
    print(f"drift repaired in {repaired_in:.2f}s")
    assert repaired_in < 2.5

    # moved to another node: removed
    await r.move("203.0.113.7", "node-b")
    await eventually(lambda: not r.has("203.0.113.7/32"))
    assert r.has("2001:db8::7/64") and "192.0.2.2/24" in r.addresses()


async def test_sigterm_keeps_addresses_and_cleanup_on_exit_removes_them(r: Rig) -> None:
    proc = r.controller()
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await eventually(lambda: r.has("203.0.113.7/32"))
    assert await asyncio.to_thread(proc.terminate) == 0
    assert r.has("203.0.113.7/32")

    proc = r.controller("controller-cleanup", **{"cleanup-on-exit": "true"})
    await r.wait_beating()
    assert await asyncio.to_thread(proc.terminate) == 0
    assert not r.has("203.0.113.7/32")
    assert "192.0.2.2/24" in r.addresses()


async def test_restart_does_not_interrupt_traffic(r: Rig) -> None:
    # The restart must finish within the lifetime the old process last renewed (imports
    # alone take 1-2 s on this loaded 2-core machine), so this story uses 6 s.
    lifetime = {"address-lifetime": "6s"}
    first = r.controller("controller-1", **lifetime)
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await eventually(lambda: r.has("203.0.113.7/32"))
    await eventually(lambda: r.bound("203.0.113.7"))
    absent: list[float] = []

    async def watch_link() -> None:
        while True:
            if not await asyncio.to_thread(r.has, "203.0.113.7/32"):
                absent.append(time.monotonic())
            await asyncio.sleep(0.02)

    async with EchoTraffic(r, "203.0.113.7") as traffic:
        await eventually(lambda: len(traffic.answers) > 5)
        watcher = asyncio.create_task(watch_link())
        started = time.monotonic()
        assert await asyncio.to_thread(first.terminate) == 0
        stopped_in = time.monotonic() - started
        second = r.controller("controller-2", **lifetime)
        await r.wait_beating()
        restarted_in = time.monotonic() - started
        await asyncio.sleep(2.0)  # several renewals by the new process
        ended = time.monotonic()
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        gap = traffic.longest_gap(started, ended)
    print(
        f"restart: old process exited after {stopped_in:.2f}s, heartbeat back after "
        f"{restarted_in:.2f}s, longest traffic gap {gap:.3f}s"
    )
    assert absent == []
    assert gap < 0.25
    log = second.log_tail(400)
    assert "address.removed" not in log and "address.added" not in log  # kept, only renewed
    lft = r.addresses()["203.0.113.7/32"]
    assert int(lft.removesuffix("sec")) >= 1  # renewed by the new process
