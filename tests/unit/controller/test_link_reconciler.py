"""LinkReconciler alone: in-memory links, a fixed claim list, recorded status writes."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

import pytest

from eipctl.controller.link_reconciler import LinkReconciler
from eipctl.controller.settings import AddressSettings
from eipctl.controller.status import StatusReporter
from eipctl.core.fence import Fence
from eipctl.core.naming import claim_name_for, node_claim_name_for
from eipctl.kube.client import Obj
from eipctl.net.errors import NetlinkError, SocketError
from eipctl.net.link import ProbeConflict
from eipctl.net.memory import MemoryLinkBackend

NODE = "node-a"


class Claims:
    def __init__(self) -> None:
        self.items: list[Obj] = []
        self.has_synced = True
        self.generation = 0

    def objects(self) -> list[Obj]:
        return self.items

    async def lookup(self, name: str) -> Obj | None:
        return next((o for o in self.items if o["metadata"]["name"] == name), None)

    def place(self, ip: str, *, name: str | None = None, **spec: Any) -> None:
        self.items.append(
            {
                "apiVersion": "eipctl.io/v1alpha1",
                "kind": "IpClaim",
                "metadata": {"name": name or claim_name_for(ip)},
                "spec": {"ip": ip, "nodeName": NODE, **spec},
            }
        )


class Writer:
    def __init__(self) -> None:
        self.updates: list[str] = []
        self.patches: list[Obj] = []

    async def update_status(self, ref: Any, name: str, mutate: Any, **kw: Any) -> Obj:
        self.updates.append(name)
        return {}

    async def patch(self, ref: Any, name: str, patch: Obj, **kw: Any) -> Obj:
        self.patches.append(patch)
        return {}


class Events:
    def __init__(self) -> None:
        self.emitted: list[str] = []

    def emit(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        self.emitted.append(reason)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self) -> None:
        self.clock = Clock()
        self.backend = MemoryLinkBackend()
        self.backend.create_link("eth0")
        self.claims = Claims()
        self.writer = Writer()
        self.events = Events()
        self.fence = Fence(1.0, self.clock)
        self.announced: list[str] = []
        self.guards: list[Any] = []
        self.probed: list[str] = []
        self.probe_answer: ProbeConflict | Exception | None = None
        self.reconciler = LinkReconciler(
            NODE,
            "eth0",
            AddressSettings(lifetime=2.5, resync_interval=30.0),
            backend=self.backend,
            claims=self.claims,
            fence=self.fence,
            status=StatusReporter(self.writer, self.events, NODE),
            announcer=self.announce,
            prober=self.probe,
            claim_lookup=self.claims.lookup,
        )

    async def announce(
        self, link: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        self.announced.append(str(ip))
        self.guards.append(still_ours)
        if on_round is not None:
            on_round()
        return 1

    async def probe(self, link: str, ip: Any, /) -> ProbeConflict | None:
        self.probed.append(str(ip))
        if isinstance(self.probe_answer, Exception):
            raise self.probe_answer
        return self.probe_answer

    async def managed(self, link: str = "eth0") -> dict[str, float | None]:
        return {f"{a.ip}/{a.prefixlen}": a.valid_lft for a in await self.backend.list_managed(link)}


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_adds_with_whole_second_lifetime_and_reports(h: Harness) -> None:
    h.claims.place("203.0.113.7")
    h.claims.place("2001:db8::7", prefixLength=64)
    assert await h.reconciler.reconcile() is None
    got = await h.managed()
    assert set(got) == {"203.0.113.7/32", "2001:db8::7/64"}
    assert all(lft is not None and 2.5 < lft <= 3 for lft in got.values())  # ceil(2.5) = 3
    await h.reconciler.close()
    assert h.probed == ["203.0.113.7", "2001:db8::7"]


async def test_a_claim_back_before_its_handover_ended_is_announced_again(h: Harness) -> None:
    """The claim moved to node-b (which announced it, but never bound it: cut off from the
    API) and came back here while the handover still kept the address: clients may hold
    node-b's MAC now, so this node announces again. A plain renewal does not."""
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    await h.reconciler.reconcile()
    assert h.announced == ["203.0.113.7"]
    claim = h.claims.items[0]
    claim["spec"]["nodeName"] = "node-b"
    await h.reconciler.reconcile()  # waiting for node-b to bind it: kept, not announced
    assert "203.0.113.7/32" in await h.managed()
    claim["spec"]["nodeName"] = NODE
    await h.reconciler.reconcile()
    await h.reconciler.reconcile()
    await asyncio.sleep(0)  # the announcement runs in the background
    await h.reconciler.close()
    assert h.announced == ["203.0.113.7", "203.0.113.7"]
    assert h.probed == ["203.0.113.7"]  # renewed in place: no probe, no remove-then-add


async def test_an_address_found_on_the_link_is_announced_once_when_first_placed_here(
    h: Harness,
) -> None:
    """Left by an earlier process (or kept while the claim was elsewhere): clients may have
    learnt another node's MAC meanwhile, so the first pass announces it; renewals do not."""
    await h.backend.add("eth0", "203.0.113.7", 32, 30)
    h.claims.place("203.0.113.7")
    for _ in range(3):
        await h.reconciler.reconcile()
        await asyncio.sleep(0)
    await h.reconciler.close()
    assert h.announced == ["203.0.113.7"]
    assert h.probed == []


async def test_announcements_ask_the_fence_before_every_round(h: Harness) -> None:
    """The guard handed to the announcer is the fence's may_hold: a stale heartbeat (a
    process frozen between two rounds) ends the schedule."""
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    await asyncio.sleep(0)
    assert h.guards and h.guards[-1]() is True
    h.clock.now += 1.0  # heartbeat older than the fence timeout: may no longer hold
    assert h.guards[-1]() is False
    await h.reconciler.close()


async def test_not_synced_never_purges(h: Harness) -> None:
    await h.backend.add("eth0", "203.0.113.9", 32, 30)
    h.claims.has_synced = False
    await h.reconciler.reconcile()
    assert "203.0.113.9/32" in await h.managed()


async def test_failed_add_asks_for_a_retry_then_heals(h: Harness) -> None:
    h.claims.place("203.0.113.7")
    h.backend.fail_next = NetlinkError("boom", errno=16)
    retry = await h.reconciler.reconcile()
    assert retry is not None and retry <= 1.0
    assert await h.reconciler.reconcile() is None
    assert "203.0.113.7/32" in await h.managed()


async def test_probe_failure_adds_anyway(h: Harness) -> None:
    h.claims.place("203.0.113.7")
    h.probe_answer = SocketError("no raw socket")
    await h.reconciler.reconcile()
    assert "203.0.113.7/32" in await h.managed()


async def test_conflict_waits_and_reports_once(h: Harness) -> None:
    h.claims.place("203.0.113.7")
    h.probe_answer = ProbeConflict(ipaddress.ip_address("203.0.113.7"), b"\x02" * 6, 0.01)
    retry = await h.reconciler.reconcile()
    assert retry is not None
    assert await h.managed() == {}
    assert h.events.emitted == ["AddressInUse"]


async def test_shared_claims_are_not_probed(h: Harness) -> None:
    h.claims.place("203.0.113.7", name=node_claim_name_for("203.0.113.7", NODE))
    h.claims.place("203.0.113.8", nodeBound=True)
    h.probe_answer = ProbeConflict(ipaddress.ip_address("203.0.113.7"), b"\x02" * 6, 0.01)
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/32", "203.0.113.8/32"}
    assert h.probed == []


async def test_prefix_change_replaces_in_place(h: Harness) -> None:
    await h.backend.add("eth0", "203.0.113.7", 32, 30)
    h.claims.place("203.0.113.7", prefixLength=24)
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/24"}
    h.claims.items[0]["spec"]["prefixLength"] = 25  # replaced by us: not drift
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/25"}
    assert "AddressRestored" not in h.events.emitted
    await h.backend.remove("eth0", "203.0.113.7", 25)  # gone behind our back: drift
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/25"}
    assert h.events.emitted.count("AddressRestored") == 1


async def test_claim_changing_link_is_added_before_it_leaves(h: Harness) -> None:
    h.backend.create_link("eth1")
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    h.claims.items[0]["spec"]["link"] = "eth1"
    await h.reconciler.reconcile()
    assert await h.managed("eth0") == {}
    assert set(await h.managed("eth1")) == {"203.0.113.7/32"}


async def test_fenced_removes_and_stale_heartbeat_stops_adds(h: Harness) -> None:
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    h.clock.now += 0.99
    h.claims.place("203.0.113.8")
    h.clock.now += 0.02  # heartbeat now stale, not yet fenced: hold nothing new
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/32"}
    h.fence.check()
    assert h.fence.fenced
    await h.reconciler.reconcile()
    assert await h.managed() == {}
    h.fence.succeeded()
    await h.reconciler.reconcile()
    assert set(await h.managed()) == {"203.0.113.7/32", "203.0.113.8/32"}


async def test_a_node_that_may_not_hold_does_not_even_probe_for_a_new_claim(h: Harness) -> None:
    """A stale heartbeat (not fenced yet): a claim newly placed here is neither probed for
    nor added; the first pass after a heartbeat does both."""
    h.clock.now += 1.0
    assert not h.fence.may_hold() and not h.fence.fenced
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    assert h.probed == []
    assert await h.managed() == {}
    h.fence.succeeded()
    await h.reconciler.reconcile()
    assert h.probed == ["203.0.113.7"]
    assert set(await h.managed()) == {"203.0.113.7/32"}


async def test_release_all_and_admin_addresses(h: Harness) -> None:
    h.backend.add_foreign("eth0", "192.0.2.2", 24)
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    await h.reconciler.release_all()
    assert await h.managed() == {}
    assert [str(a.ip) for a in await h.backend.list_all("eth0")] == ["192.0.2.2"]


async def test_an_add_decided_before_a_relist_is_dropped(h: Harness) -> None:
    """A thawed node: the pass plans from its old cache, probes, and meanwhile the claims
    are relisted (fence, restore). The add must not happen (nor its announcement): the
    claim may have moved away while the node was frozen. The next pass decides afresh."""
    h.claims.place("203.0.113.7")

    async def probe_during_a_relist(link: str, ip: Any, /) -> ProbeConflict | None:
        h.claims.generation += 1  # what ClaimCache.start_refresh does
        h.claims.items = []  # the fresh list: the claim is no longer ours
        return None

    h.reconciler._takeover._prober = probe_during_a_relist
    await h.reconciler.reconcile()
    assert await h.managed() == {}
    assert h.announced == []
    await h.reconciler.reconcile()  # the next pass: nothing placed here, nothing added
    assert await h.managed() == {}


async def test_renewals_do_not_wait_behind_a_handover_read(h: Harness) -> None:
    """An address that moved away waits for a fresh read of its claim (the handover); with
    the API slow that read may take up to the fence timeout, longer than the addresses that
    stay here can go unrenewed. They are renewed first."""
    h.claims.place("203.0.113.7")
    h.claims.place("203.0.113.8")
    await h.reconciler.reconcile()
    await h.backend.add("eth0", "203.0.113.7", 32, 1)  # lifetime nearly spent
    h.claims.items[1]["spec"]["nodeName"] = "node-b"  # .8 moved: a handover read follows
    read_started = asyncio.Event()

    async def slow_lookup(name: str) -> Obj | None:
        read_started.set()
        await asyncio.sleep(3600)
        return None

    h.reconciler._handover._lookup = slow_lookup
    task = asyncio.create_task(h.reconciler.reconcile())
    try:
        await asyncio.wait_for(read_started.wait(), 1)
        lifetimes = await h.managed()
        assert lifetimes["203.0.113.7/32"] is not None and lifetimes["203.0.113.7/32"] > 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await h.reconciler.close()


async def test_announcements_stop_when_the_claim_moves_away(h: Harness) -> None:
    """A claim moved within the announcement schedule (3 x 1.1 s): the rounds still to come
    would repoint the neighbours back here while the new holder announces; they stop at
    once, also while the address stays for the handover."""
    rounds_started = asyncio.Event()
    cancelled: list[str] = []

    async def slow_announce(
        link: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        rounds_started.set()
        try:
            await asyncio.sleep(3600)  # rounds still to come
        except asyncio.CancelledError:
            cancelled.append(str(ip))
            raise
        return 3

    h.reconciler._modes.by_name("l2")._announcements._announcer = slow_announce
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    await asyncio.wait_for(rounds_started.wait(), 1)
    h.claims.items[0]["spec"]["nodeName"] = "node-b"  # moved, node-b not Bound yet
    await h.reconciler.reconcile()
    await asyncio.sleep(0)
    assert "203.0.113.7/32" in await h.managed()  # still held for the handover
    assert cancelled == ["203.0.113.7"]
    await h.reconciler.close()


async def test_a_moved_address_is_kept_alive_for_its_handover_and_no_longer(h: Harness) -> None:
    """Until the new holder binds, the address must not lapse (a slow bind would be a gap):
    its lifetime is renewed to what is left of the hold, never beyond it."""
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    await h.backend.add("eth0", "203.0.113.7", 32, 1)  # the last renewal, nearly spent
    h.claims.items[0]["spec"]["nodeName"] = "node-b"  # moved; node-b has not bound it yet
    await h.reconciler.reconcile()
    lifetime = (await h.managed())["203.0.113.7/32"]
    assert lifetime is not None and 1 < lifetime <= 2.5  # the hold is one lifetime (2.5 s)
    await h.reconciler.close()


async def test_bound_is_reported_only_once_the_first_announcement_is_out(h: Harness) -> None:
    """The old holder lets go when the claim is Bound here: the clients that still point at
    it must have had this node's first gratuitous ARP by then (the 50-IP maintenance gaps)."""
    first_round = asyncio.Event()

    async def slow(link: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None) -> int:
        still_ours()  # before round 1
        await first_round.wait()  # the packet socket is slow to open under load
        on_round()  # round 1 is out
        await asyncio.sleep(10)  # round 2 is 1.1 s away: Bound must not wait for it
        return 2

    h.reconciler._modes.by_name("l2")._announcements._announcer = slow
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    for _ in range(20):
        await asyncio.sleep(0)
    assert h.writer.updates == []  # on the link, not yet announced: not Bound
    first_round.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert h.writer.updates == [claim_name_for("203.0.113.7")]
    await h.reconciler.close()


async def test_an_address_gone_before_its_first_announcement_is_never_reported_bound(
    h: Harness,
) -> None:
    async def never(link: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None) -> int:
        still_ours()
        await asyncio.sleep(10)
        return 0

    h.reconciler._modes.by_name("l2")._announcements._announcer = never
    h.claims.place("203.0.113.7")
    await h.reconciler.reconcile()
    h.claims.items.clear()  # moved away before anything was sent
    await h.reconciler.reconcile()
    for _ in range(20):
        await asyncio.sleep(0)
    await h.reconciler.close()
    assert h.writer.updates == []
