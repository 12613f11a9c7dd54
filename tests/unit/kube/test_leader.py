"""LeaderElector with the in-memory fake: never two acting, prompt takeover.

Every story runs on a virtual clock (tests/virtual_clock.py, docs/testing.md "Time in
tests"): the elector is handed the loop's clock, its sleeps, waits and renew watchdog run on
the loop, so a takeover's delay is asserted exactly, without slack for a busy machine.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from eipctl.kube.client import LEASES, Obj
from eipctl.kube.errors import TransportError
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector
from virtual_clock import run_virtual

from .kube_fakes import FakeApi

CFG = {"lease_duration": 0.6, "renew_deadline": 0.35, "retry_period": 0.1}
Windows = dict[str, list[list[float]]]  # [start, end]; end is inf while acting


class Link:
    """One replica's view of the API: can be cut (partition) without touching others."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.cut = False

    def __getattr__(self, verb: str) -> Any:
        target = getattr(self.api, verb)

        async def call(*a: Any, **kw: Any) -> Any:
            if self.cut:
                await asyncio.sleep(0.01)
                raise TransportError("partitioned")
            return await target(*a, **kw)

        return call


def story(main: Callable[[], Coroutine[Any, Any, None]], limit: float = 60.0) -> None:
    """Run ``main`` on a virtual clock; it fails if it takes more than ``limit`` virtual s."""

    async def bounded() -> None:
        async with asyncio.timeout(limit):
            await main()

    run_virtual(bounded())


def now() -> float:
    return asyncio.get_running_loop().time()


def elector(api: Any, ident: str, **kw: Any) -> LeaderElector:
    cfg = LeaderElectionConfig("eipctl-test", "kube-system", ident, **{**CFG, **kw})
    return LeaderElector(api, cfg, clock=asyncio.get_running_loop().time)


def acting(windows: Windows, ident: str, started: asyncio.Event | None = None) -> Any:
    async def work() -> None:
        window = [now(), float("inf")]
        windows.setdefault(ident, []).append(window)
        if started:
            started.set()
        try:
            await asyncio.Event().wait()
        finally:
            window[1] = now()

    return work


def assert_never_two(windows: Windows) -> None:
    spans = sorted((s, e, who) for who, ws in windows.items() for s, e in ws)
    for (_s1, e1, w1), (s2, _e2, w2) in itertools.pairwise(spans):
        assert e1 <= s2, f"{w1} acted until {e1}, {w2} from {s2}"


def lease(api: FakeApi) -> Obj:
    return api.objects[(LEASES.plural, "kube-system/eipctl-test")]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig("l", "ns", "me", lease_duration=1, renew_deadline=1, retry_period=0.2)


def test_acquires_runs_work_and_releases_on_clean_stop() -> None:
    async def main() -> None:
        api = FakeApi()
        a = elector(api, "a")
        windows: Windows = {}
        started = asyncio.Event()
        task = asyncio.create_task(a.run(acting(windows, "a", started)))
        await asyncio.wait_for(started.wait(), 2)
        assert a.is_leader
        spec = lease(api)["spec"]
        assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 1
        assert spec["renewTime"].endswith("Z")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert windows["a"]  # work ended before...
        assert lease(api)["spec"]["holderIdentity"] == ""  # ...the release

    story(main)


def test_clean_handover_within_one_retry_period() -> None:
    """A released Lease is taken at the standby's next retry: b tries at 0, 0.1, 0.2, 0.3 s
    of its run, a lets go at 0.25 s, b acts at 0.3 s, 0.05 s later."""

    async def main() -> None:
        api = FakeApi()
        windows: Windows = {}
        a_started, b_started = asyncio.Event(), asyncio.Event()
        ta = asyncio.create_task(elector(api, "a").run(acting(windows, "a", a_started)))
        await asyncio.wait_for(a_started.wait(), 2)
        tb = asyncio.create_task(elector(api, "b").run(acting(windows, "b", b_started)))
        await asyncio.sleep(0.25)
        assert not b_started.is_set()
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        stopped = now()
        await asyncio.wait_for(b_started.wait(), 2)
        took = windows["b"][-1][0] - stopped
        assert 0 < took <= CFG["retry_period"]
        assert took == pytest.approx(0.05)
        assert lease(api)["spec"]["leaseTransitions"] == 1
        tb.cancel()
        await asyncio.gather(tb, return_exceptions=True)
        assert_never_two(windows)

    story(main)


def test_killed_leader_replaced_within_lease_duration_plus_retry() -> None:
    """a dies without releasing. b last saw a's Lease change within a retry period of the
    death (a renews, b reads, every 0.1 s), then waits out the duration as written (whole
    seconds: 1) plus the elector's 2 ms margin from that sighting: no sooner, no later."""

    async def main() -> None:
        api = FakeApi()
        windows: Windows = {}
        a_started, b_started = asyncio.Event(), asyncio.Event()
        a = elector(api, "a", release_on_stop=False)
        ta = asyncio.create_task(a.run(acting(windows, "a", a_started)))
        await asyncio.wait_for(a_started.wait(), 2)
        tb = asyncio.create_task(elector(api, "b").run(acting(windows, "b", b_started)))
        await asyncio.sleep(0.25)
        ta.cancel()  # dies without releasing
        await asyncio.gather(ta, return_exceptions=True)
        killed = now()
        await asyncio.wait_for(b_started.wait(), 3)
        took = windows["b"][-1][0] - killed
        retry = CFG["retry_period"]
        assert 1.0 - retry <= took <= 1.0 + retry + 0.002, took
        tb.cancel()
        await asyncio.gather(tb, return_exceptions=True)
        assert_never_two(windows)

    story(main)


def test_partitioned_leader_stops_acting_before_anyone_takes_over() -> None:
    async def main() -> None:
        api = FakeApi()
        windows: Windows = {}
        link_a = Link(api)
        a_started, b_started = asyncio.Event(), asyncio.Event()
        ta = asyncio.create_task(elector(link_a, "a").run(acting(windows, "a", a_started)))
        await asyncio.wait_for(a_started.wait(), 2)
        tb = asyncio.create_task(elector(api, "b").run(acting(windows, "b", b_started)))
        await asyncio.sleep(0.2)
        link_a.cut = True
        cut = now()
        await asyncio.wait_for(b_started.wait(), 3)
        # a stops at its renew deadline, b waits out the whole Lease (1 s as written)
        assert windows["a"][0][1] <= cut + CFG["renew_deadline"]
        assert windows["a"][0][1] < windows["b"][0][0]
        link_a.cut = False  # a comes back: it must not act while b holds the lease
        await asyncio.sleep(0.5)
        assert len(windows["a"]) == 1
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)
        assert_never_two(windows)

    story(main)


@pytest.mark.parametrize("seed", range(5))
def test_many_races_never_two_leaders(seed: int) -> None:
    """Cuts and clean restarts at random moments (a seeded schedule: the virtual clock makes
    each run the same, so the seeds are the variety)."""
    rnd = random.Random(seed)

    async def main() -> None:
        api = FakeApi()
        windows: Windows = {}
        links = {n: Link(api) for n in "abc"}
        tasks = {
            n: asyncio.create_task(elector(links[n], n).run(acting(windows, n))) for n in "abc"
        }
        end = now() + 10.0  # virtual: free
        while now() < end:
            n = rnd.choice("abc")
            links[n].cut = not links[n].cut
            if rnd.random() < 0.25:  # and sometimes a clean restart
                tasks[n].cancel()
                await asyncio.gather(tasks[n], return_exceptions=True)
                tasks[n] = asyncio.create_task(elector(links[n], n).run(acting(windows, n)))
            await asyncio.sleep(rnd.uniform(0.01, 0.3))
        for t in tasks.values():
            t.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        assert sum(len(w) for w in windows.values()) >= 3
        assert_never_two(windows)

    story(main)
