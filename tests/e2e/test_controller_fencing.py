"""Self-fencing and address lifetimes with a real `eipctl controller` in a namespace.

No scheduler probes it here. Alone in the cluster, a controller cut off from the API keeps
its addresses: nobody could move them (it is more than half of the nodes by itself,
docs/liveness.md "Outages"). With a second IpNode whose controller does not answer (a peer
that cannot confirm the outage), it removes its addresses once its last API answer is
--fence-timeout old and nobody vouches for it, takes them back when the path returns, and
fences as fast on a second cut right after (it proves the API reachable with reads every
--api-check-interval); a frozen controller (SIGSTOP) cannot remove anything, so its addresses
expire in the kernel within --address-lifetime.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from test_controller_support import (
    TIMINGS,
    Rig,
    eventually,
    rig_fixture,  # noqa: F401 (the `r` fixture)
)

from eipctl.kube.client import IPNODES
from eipctl.sandbox.namespaces import why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

FENCE_TIMEOUT = 0.5
LIFETIME = 3.0
assert TIMINGS["fence-timeout"] == "500ms" and TIMINGS["address-lifetime"] == "3s"


SILENT_PEER = {
    "metadata": {"name": "node-b"},
    "spec": {"link": "eth0", "livenessAddress": "192.0.2.1", "livenessPort": 9473},
}
"""An IpNode whose liveness endpoint (the peer namespace, where nothing listens) never
answers: the controller counts two nodes and can confirm nothing alone."""
FENCE_MOST = FENCE_TIMEOUT + 0.2 + 0.2 + 0.5
"""--fence-timeout, then at the deadline one more API check (bounded by the check interval)
and the peers' round (half the probe silence), and slack for a busy machine."""


async def test_alone_and_cut_off_from_the_api_it_keeps_its_addresses(r: Rig) -> None:
    proc = r.controller()
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await eventually(lambda: r.has("203.0.113.7/32"))
    offset = proc.log_size()
    await r.relay.cut()
    await asyncio.sleep(FENCE_TIMEOUT * 6)
    assert r.has("203.0.113.7/32"), "nobody could move it: it holds"
    assert "outage.holding" in proc.log_since(offset)
    assert "node.fenced" not in proc.log_since(offset)
    await r.relay.heal()
    await eventually(lambda: "outage.over" in proc.log_since(offset), timeout=15)


async def test_cut_off_from_the_api_it_fences_then_restores(r: Rig) -> None:
    await r.api.create(IPNODES, SILENT_PEER)
    r.controller()
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await r.claim("2001:db8::7")
    await eventually(lambda: r.has("203.0.113.7/32") and r.has("2001:db8::7/128"))

    started = time.monotonic()
    await r.relay.cut()
    await eventually(lambda: not r.has("203.0.113.7/32") and not r.has("2001:db8::7/128"))
    fenced_in = time.monotonic() - started
    assert "192.0.2.2/24" in r.addresses()  # the admin's address is never fenced

    healed = time.monotonic()
    await r.relay.heal()
    await eventually(lambda: r.has("203.0.113.7/32") and r.has("2001:db8::7/128"), timeout=15)
    restored_in = time.monotonic() - healed
    print(f"fenced {fenced_in:.3f}s after the cut; restored {restored_in:.3f}s after heal")
    assert fenced_in < FENCE_MOST
    await eventually(lambda: r.bound("203.0.113.7"))

    # a second cut, soon after the restore, fences as fast: the watchdog is awake again
    await asyncio.sleep(1.0)
    again = time.monotonic()
    await r.relay.cut()
    await eventually(lambda: not r.has("203.0.113.7/32"))
    fenced_again_in = time.monotonic() - again
    await r.relay.heal()
    print(f"fenced {fenced_again_in:.3f}s after a second cut, 1 s after the restore")
    assert fenced_again_in < FENCE_MOST
    await eventually(lambda: r.has("203.0.113.7/32"), timeout=15)


async def test_the_api_pausing_fences_too(r: Rig) -> None:
    await r.api.create(IPNODES, SILENT_PEER)
    r.controller()
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await eventually(lambda: r.has("203.0.113.7/32"))
    started = time.monotonic()
    pause = r.srv.faults.pause(3.0)
    await eventually(lambda: not r.has("203.0.113.7/32"))
    fenced_in = time.monotonic() - started
    await pause
    await eventually(lambda: r.has("203.0.113.7/32"), timeout=15)
    print(f"fenced {fenced_in:.3f}s after the API paused")
    assert fenced_in < FENCE_MOST


async def test_a_frozen_controller_addresses_expire_in_the_kernel(r: Rig) -> None:
    proc = r.controller()
    await r.wait_beating()
    await r.claim("203.0.113.7")
    await r.claim("2001:db8::7")
    await eventually(lambda: r.has("203.0.113.7/32") and r.has("2001:db8::7/128"))

    started = time.monotonic()
    proc.freeze()
    await eventually(
        lambda: not r.has("203.0.113.7/32") and not r.has("2001:db8::7/128"),
        timeout=LIFETIME + 3,
    )
    expired_in = time.monotonic() - started
    print(f"frozen controller's addresses expired {expired_in:.2f}s after SIGSTOP")
    assert expired_in <= LIFETIME + 1.2  # the kernel checks lifetimes on whole seconds

    proc.thaw()  # it notices its last API answer is stale, fences, checks again and restores
    await eventually(lambda: r.has("203.0.113.7/32") and r.has("2001:db8::7/128"), timeout=15)
