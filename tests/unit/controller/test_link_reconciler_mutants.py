"""The purge pass in detail: which links are inspected, the order and completeness of the
removals, hand-overs, the reasons logged, and the bookkeeping across passes."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import structlog

from eipctl.controller import link_reconciler as link_reconciler_module
from eipctl.controller.link_reconciler import LinkReconciler
from eipctl.controller.settings import AddressSettings
from eipctl.controller.status import StatusReporter
from eipctl.core.fence import Fence
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import Obj
from eipctl.metrics import REGISTRY
from eipctl.net.link import IPAddress, LinkAddress, ProbeConflict
from eipctl.net.memory import MemoryLinkBackend

NODE = "node-a"


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Backend(MemoryLinkBackend):
    """Records adds and removes in order; listing a link may take (fake) time."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.ops: list[tuple[str, str, str]] = []
        self.list_clock: Clock | None = None
        self.list_takes = 0.0

    async def add(self, ifname: str, ip: str | IPAddress, prefixlen: int, valid_lft: int) -> None:
        await super().add(ifname, ip, prefixlen, valid_lft)
        self.ops.append(("add", ifname, str(ip)))

    async def remove(self, ifname: str, ip: str | IPAddress, prefixlen: int) -> bool:
        removed = await super().remove(ifname, ip, prefixlen)
        self.ops.append(("remove", ifname, str(ip)))
        return removed

    async def list_all(self, ifname: str) -> list[LinkAddress]:
        if self.list_clock is not None:
            self.list_clock.now += self.list_takes
        return await super().list_all(ifname)


class Claims:
    def __init__(self) -> None:
        self.items: list[Obj] = []
        self.has_synced = True
        self.generation = 0

    def objects(self) -> list[Obj]:
        return self.items

    def place(self, ip: str, *, node: str = NODE, **spec: Any) -> Obj:
        obj: Obj = {
            "apiVersion": "eipctl.io/v1alpha1",
            "kind": "IpClaim",
            "metadata": {"name": claim_name_for(ip)},
            "spec": {"ip": ip, "nodeName": node, **spec},
        }
        self.items.append(obj)
        return obj

    def get(self, ip: str) -> Obj:
        return next(o for o in self.items if o["spec"]["ip"] == ip)

    def delete(self, ip: str) -> None:
        self.items.remove(self.get(ip))

    async def lookup(self, name: str) -> Obj | None:
        return next((o for o in self.items if o["metadata"]["name"] == name), None)


class Writer:
    async def update_status(self, ref: Any, name: str, mutate: Any, **kw: Any) -> Obj:
        return {}

    async def patch(self, ref: Any, name: str, patch: Obj, **kw: Any) -> Obj:
        return {}


class Events:
    def emit(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        pass


class Harness:
    def __init__(self) -> None:
        self.clock = Clock()
        self.backend = Backend(self.clock)
        self.backend.create_link("eth0")
        self.backend.create_link("eth1")
        self.claims = Claims()
        self.fence = Fence(1.0, self.clock)
        self.probe_answer: ProbeConflict | None = None
        self.status = StatusReporter(Writer(), Events(), NODE)
        self.reconciler = LinkReconciler(
            NODE,
            "eth0",
            AddressSettings(lifetime=2.5, resync_interval=30.0),
            backend=self.backend,
            claims=self.claims,
            fence=self.fence,
            status=self.status,
            announcer=self.announce,
            prober=self.probe,
            claim_lookup=self.claims.lookup,
        )

    async def announce(
        self, link: str, ip: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        if on_round is not None:
            on_round()
        return 1

    async def probe(self, link: str, ip: Any, /) -> ProbeConflict | None:
        return self.probe_answer

    async def lifetimes(self, link: str = "eth0") -> dict[str, float | None]:
        return {f"{a.ip}/{a.prefixlen}": a.valid_lft for a in await self.backend.list_managed(link)}

    async def managed(self, link: str = "eth0") -> set[str]:
        return {f"{a.ip}/{a.prefixlen}" for a in await self.backend.list_managed(link)}


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.reconciler.close()
    harness.status.cancel()


@pytest.fixture
def fake_monotonic(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """link_reconciler.py's `time.monotonic` (pass start, time to bound) on a fake clock."""
    clock = Clock(10.0)
    monkeypatch.setattr(link_reconciler_module, "time", SimpleNamespace(monotonic=clock))
    return clock


def removals(logs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["address"], e["reason"]) for e in logs if e["event"] == "address.removed"]


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


# -- what a pass inspects and removes ----------------------------------------------------


async def test_a_link_used_before_is_purged_when_no_claim_uses_it_any_more(h: Harness) -> None:
    """Not only the default link and the claims' links: a link this process put an address
    on is still inspected after its last claim went, so the address is removed at once."""
    h.claims.place("203.0.113.1", link="eth1")
    await h.reconciler.reconcile()
    assert await h.managed("eth1") == {"203.0.113.1/32"}
    h.claims.delete("203.0.113.1")
    with structlog.testing.capture_logs() as logs:
        await h.reconciler.reconcile()
    assert await h.managed("eth1") == set()
    assert removals(logs) == [("203.0.113.1/32@eth1", "not-placed-here")]


async def test_a_move_between_links_is_make_before_break_and_other_removals_still_happen(
    h: Harness,
) -> None:
    """A claim moving eth0 -> eth1 is added on eth1 before it leaves eth0; an address sorted
    after it that is simply no longer placed here goes in the same pass."""
    h.claims.place("203.0.113.1")
    h.claims.place("203.0.113.2")
    await h.reconciler.reconcile()
    h.backend.ops.clear()
    h.claims.get("203.0.113.1")["spec"]["link"] = "eth1"
    h.claims.delete("203.0.113.2")
    with structlog.testing.capture_logs() as logs:
        await h.reconciler.reconcile()
    assert h.backend.ops == [
        ("remove", "eth0", "203.0.113.2"),
        ("add", "eth1", "203.0.113.1"),
        ("remove", "eth0", "203.0.113.1"),
    ]
    assert await h.managed("eth0") == set()
    assert await h.managed("eth1") == {"203.0.113.1/32"}
    assert removals(logs) == [
        ("203.0.113.2/32@eth0", "not-placed-here"),
        ("203.0.113.1/32@eth0", "moved-to-another-link"),
    ]


async def test_with_a_stale_heartbeat_a_moved_claim_leaves_its_old_link_without_an_add(
    h: Harness,
) -> None:
    """Not yet fenced but no longer allowed to hold: nothing is added, and the old address
    goes as any address no longer placed here (it is not a move)."""
    h.claims.place("203.0.113.1")
    await h.reconciler.reconcile()
    h.backend.ops.clear()
    h.claims.get("203.0.113.1")["spec"]["link"] = "eth1"
    h.clock.now += 1.0  # heartbeat exactly fence_timeout old: may not hold, not fenced yet
    assert not h.fence.fenced
    with structlog.testing.capture_logs() as logs:
        await h.reconciler.reconcile()
    assert h.backend.ops == [("remove", "eth0", "203.0.113.1")]
    assert removals(logs) == [("203.0.113.1/32@eth0", "not-placed-here")]


async def test_with_a_stale_heartbeat_held_addresses_are_not_renewed(h: Harness) -> None:
    """Renewing is holding: once the heartbeat is fence_timeout old the lifetimes run down
    even before the watchdog fences; a successful heartbeat renews them again."""
    h.claims.place("203.0.113.1")
    await h.reconciler.reconcile()
    assert await h.lifetimes() == {"203.0.113.1/32": 3.0}
    h.clock.now += 1.0
    await h.reconciler.reconcile()
    assert await h.lifetimes() == {"203.0.113.1/32": 2.0}
    h.fence.succeeded()
    await h.reconciler.reconcile()
    assert await h.lifetimes() == {"203.0.113.1/32": 3.0}


async def test_an_address_held_for_a_handover_does_not_hold_back_later_removals(
    h: Harness,
) -> None:
    """.1 moved to node-b, which has not bound it yet: it stays, and the pass asks to look
    again in HANDOVER_RECHECK. .2, sorted after it, was deleted: it goes in the same pass."""
    h.claims.place("203.0.113.1")
    h.claims.place("203.0.113.2")
    await h.reconciler.reconcile()
    h.claims.get("203.0.113.1")["spec"]["nodeName"] = "node-b"
    h.claims.delete("203.0.113.2")
    retry = await h.reconciler.reconcile()
    assert await h.managed() == {"203.0.113.1/32"}
    assert retry == link_reconciler_module.HANDOVER_RECHECK
    h.claims.get("203.0.113.1")["status"] = {"phase": "Bound", "boundNode": "node-b"}
    assert await h.reconciler.reconcile() is None
    assert await h.managed() == set()


async def test_each_removal_logs_why_it_happened(h: Harness) -> None:
    h.claims.place("203.0.113.1")
    h.claims.place("203.0.113.2")
    await h.reconciler.reconcile()
    with structlog.testing.capture_logs() as logs:
        h.claims.delete("203.0.113.2")
        await h.reconciler.reconcile()
        h.clock.now += 1.0
        h.fence.check()
        await h.reconciler.reconcile()
        h.fence.succeeded()
        await h.reconciler.reconcile()
        assert await h.managed() == {"203.0.113.1/32"}
        await h.reconciler.release_all()
    assert removals(logs) == [
        ("203.0.113.2/32@eth0", "not-placed-here"),
        ("203.0.113.1/32@eth0", "fenced"),
        ("203.0.113.1/32@eth0", "released"),
    ]
    assert await h.managed() == set()


# -- bookkeeping across passes -----------------------------------------------------------


async def test_a_conflict_unchanged_between_passes_is_warned_about_once(h: Harness) -> None:
    h.claims.place("203.0.113.1")
    h.probe_answer = ProbeConflict(ipaddress.ip_address("203.0.113.1"), b"\x02" * 6, 0.01)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert await h.reconciler.reconcile() is not None
    warned = [e for e in logs if e["event"] == "address.conflict" and e["log_level"] == "warning"]
    assert len(warned) == 1
    assert await h.managed() == set()


async def test_time_to_bound_counts_from_the_first_pass_that_saw_the_claim(
    fake_monotonic: Clock, h: Harness
) -> None:
    count = sample("eipctl_time_to_bound_seconds_count")
    total = sample("eipctl_time_to_bound_seconds_sum")
    h.claims.place("203.0.113.1")
    h.probe_answer = ProbeConflict(ipaddress.ip_address("203.0.113.1"), b"\x02" * 6, 0.01)
    await h.reconciler.reconcile()  # seen at 10, waits
    fake_monotonic.now = 13.0
    await h.reconciler.reconcile()  # still waiting
    fake_monotonic.now = 15.0
    h.probe_answer = None
    await h.reconciler.reconcile()  # added at 15
    assert await h.managed() == {"203.0.113.1/32"}
    assert sample("eipctl_time_to_bound_seconds_count") == count + 1
    assert sample("eipctl_time_to_bound_seconds_sum") == total + 5.0


async def test_the_pass_duration_is_observed(fake_monotonic: Clock, h: Harness) -> None:
    h.backend.list_clock = fake_monotonic
    h.backend.list_takes = 0.25  # each link listed takes a quarter second
    count = sample("eipctl_controller_pass_seconds_count")
    total = sample("eipctl_controller_pass_seconds_sum")
    await h.reconciler.reconcile()  # lists eth0 only
    assert sample("eipctl_controller_pass_seconds_count") == count + 1
    assert sample("eipctl_controller_pass_seconds_sum") == total + 0.25
