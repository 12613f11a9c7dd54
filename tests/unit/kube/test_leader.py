"""LeaderElector with the in-memory fake: never two acting, prompt takeover."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from eipctl.kube.client import LEASES, Obj
from eipctl.kube.errors import TransportError
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector

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


def elector(api: Any, ident: str, **kw: Any) -> LeaderElector:
    cfg = LeaderElectionConfig("eipctl-test", "kube-system", ident, **{**CFG, **kw})
    return LeaderElector(api, cfg)


def acting(windows: Windows, ident: str, started: asyncio.Event | None = None) -> Any:
    async def work() -> None:
        window = [time.monotonic(), float("inf")]
        windows.setdefault(ident, []).append(window)
        if started:
            started.set()
        try:
            await asyncio.Event().wait()
        finally:
            window[1] = time.monotonic()

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


async def test_acquires_runs_work_and_releases_on_clean_stop() -> None:
    api = FakeApi()
    a = elector(api, "a")
    windows: Windows = {}
    started = asyncio.Event()
    task = asyncio.create_task(a.run(acting(windows, "a", started)))
    async with asyncio.timeout(2):
        await started.wait()
    assert a.is_leader
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 1
    assert spec["renewTime"].endswith("Z")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert windows["a"]  # work ended before...
    assert lease(api)["spec"]["holderIdentity"] == ""  # ...the release


async def test_clean_handover_within_one_retry_period() -> None:
    api = FakeApi()
    windows: Windows = {}
    a_started, b_started = asyncio.Event(), asyncio.Event()
    ta = asyncio.create_task(elector(api, "a").run(acting(windows, "a", a_started)))
    await asyncio.wait_for(a_started.wait(), 2)
    tb = asyncio.create_task(elector(api, "b").run(acting(windows, "b", b_started)))
    await asyncio.sleep(0.3)
    assert not b_started.is_set()
    ta.cancel()
    await asyncio.gather(ta, return_exceptions=True)
    stopped = time.monotonic()
    await asyncio.wait_for(b_started.wait(), 2)
    assert windows_start(windows, "b") - stopped <= CFG["retry_period"] + 0.1
    assert lease(api)["spec"]["leaseTransitions"] == 1
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    assert_never_two(windows)


def windows_start(windows: Windows, ident: str) -> float:
    return windows[ident][-1][0] if ident in windows else time.monotonic()


async def test_killed_leader_replaced_within_lease_duration_plus_retry() -> None:
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
    killed = time.monotonic()
    await asyncio.wait_for(b_started.wait(), 3)
    took = windows_start(windows, "b") - killed
    # lease duration as written (whole seconds) + retry period, plus scheduling slack
    assert took <= 1.0 + CFG["retry_period"] + 0.15, took
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    assert_never_two(windows)


async def test_partitioned_leader_stops_acting_before_anyone_takes_over() -> None:
    api = FakeApi()
    windows: Windows = {}
    link_a = Link(api)
    a_started, b_started = asyncio.Event(), asyncio.Event()
    ta = asyncio.create_task(elector(link_a, "a").run(acting(windows, "a", a_started)))
    await asyncio.wait_for(a_started.wait(), 2)
    tb = asyncio.create_task(elector(api, "b").run(acting(windows, "b", b_started)))
    await asyncio.sleep(0.2)
    link_a.cut = True
    await asyncio.wait_for(b_started.wait(), 3)
    assert windows["a"][0][1] < windows["b"][0][0]
    link_a.cut = False  # a comes back: it must not act while b holds the lease
    await asyncio.sleep(0.5)
    assert len(windows["a"]) == 1
    for t in (ta, tb):
        t.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)
    assert_never_two(windows)


async def test_many_races_never_two_leaders() -> None:
    api = FakeApi()
    windows: Windows = {}
    links = {n: Link(api) for n in "abc"}
    tasks = {n: asyncio.create_task(elector(links[n], n).run(acting(windows, n))) for n in "abc"}
    loop = asyncio.get_running_loop()
    end = loop.time() + 2.5
    i = 0
    while loop.time() < end:
        n = "abc"[i % 3]
        links[n].cut = not links[n].cut
        if i % 4 == 3:  # and sometimes a clean restart
            tasks[n].cancel()
            await asyncio.gather(tasks[n], return_exceptions=True)
            tasks[n] = asyncio.create_task(elector(links[n], n).run(acting(windows, n)))
        i += 1
        await asyncio.sleep(0.15)
    for t in tasks.values():
        t.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert sum(len(w) for w in windows.values()) >= 3
    assert_never_two(windows)
