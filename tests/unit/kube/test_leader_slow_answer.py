"""A leader whose last write was answered late, then cut off, stops before anyone takes over.

Guarantee (docs/leader-election.md, "The holder stops early"): the renew deadline counts
from when the winning write was *sent*. The server stores a write before it answers it, and
a candidate may take over only `leaseDurationSeconds` after it first saw the stored record.
So a leader that stops at `sent + renew_deadline` has stopped before
`stored + lease_duration`, however late the answer came.

Mutant killed: counting the deadline from when the answer *arrived*
(`sent = self._clock()` moved after the `await` in `_try_acquire_or_renew` or `_create`).
With the processes' defaults (lease 1 s, renew deadline 0.8 s, retry 0.2 s) a write stored
at once but answered 0.5 s late, followed by a partition, then leaves the old leader acting
until `stored + 1.3 s` while a standby may act from `stored + 1.0 s`: about 0.3 s with two
leaders. The older tests use a 0.6 / 0.35 s config, which hides this: its lease is written
rounded up to 1 s, so even a leader that kept acting 0.5 s too long stopped in time.

Everything is timed on the elector's own clock, which the tests hand to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from eipctl.kube.client import LEASES, Obj
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector
from eipctl.runtime.config import LeaderSettings
from polling import eventually

from .kube_fakes import FakeApi

LEASE = "eipctl-test"
NAMESPACE = "kube-system"
SLOW_ANSWER = 0.5
"""How long after the server stored it the slow write is answered."""
clock = time.monotonic
"""The clock every elector here runs on; the acting windows and the wire use it too."""


def defaults(identity: str) -> LeaderElectionConfig:
    """The election config the processes run with when no timing flag is given."""
    return LeaderSettings(identity=identity, lease_namespace=NAMESPACE).election(LEASE)


class Wire:
    """One replica's path to the API. Armed with `answer_late_then_cut()`, its next write is
    stored at once, answered late, and then the path goes dark: nothing sent afterwards is
    ever answered (a partition that drops packets)."""

    def __init__(self, api: FakeApi, config: LeaderElectionConfig) -> None:
        self.api = api
        self.config = config
        self.armed = False
        self.dark = False
        self.last_write_sent: float | None = None
        self.stored = asyncio.Event()
        self.stored_at = 0.0
        self.stored_lease: Obj = {}
        self.answered_at: float | None = None

    def answer_late_then_cut(self) -> None:
        self.armed = True

    async def get(self, *args: Any, **kwargs: Any) -> Obj:
        await self._through()
        return await self.api.get(*args, **kwargs)

    async def create(self, *args: Any, **kwargs: Any) -> Obj:
        return await self._write(self.api.create, *args, **kwargs)

    async def replace(self, *args: Any, **kwargs: Any) -> Obj:
        return await self._write(self.api.replace, *args, **kwargs)

    async def _through(self) -> None:
        if self.dark:
            await asyncio.Event().wait()  # never answered; the caller's timeout ends it

    async def _write(self, call: Callable[..., Awaitable[Obj]], *args: Any, **kw: Any) -> Obj:
        await self._through()
        previous, self.last_write_sent = self.last_write_sent, clock()
        answer = await call(*args, **kw)  # stored now
        if not self.armed:
            return answer
        self.armed = False
        self.stored_at, self.stored_lease = clock(), answer
        self.stored.set()
        delay = SLOW_ANSWER
        if previous is not None:
            # a renewal: the leader gives up on it at previous + renew_deadline; answer 0.1 s
            # before that (0.5 s late when the loop is on time) so that it still counts
            delay = min(delay, previous + self.config.renew_deadline - 0.1 - clock())
        await asyncio.sleep(delay)
        self.dark = True
        self.answered_at = clock()
        return answer


class Replica:
    """An elector on the processes' defaults whose work records when it acted."""

    def __init__(self, api: Any, identity: str) -> None:
        self.identity = identity
        self.elector = LeaderElector(api, defaults(identity), clock=clock)
        self.windows: list[list[float]] = []  # [from, until]; until is inf while acting
        self.acting = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.work))

    async def work(self) -> None:
        window = [clock(), float("inf")]
        self.windows.append(window)
        self.acting.set()
        try:
            await asyncio.Event().wait()
        finally:
            window[1] = clock()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


def put_lease_of_a_dead_holder(api: FakeApi) -> None:
    """A Lease whose holder died without releasing it: it expires, and may be taken over."""
    now = "2024-01-01T00:00:00.000000Z"
    api.put(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": "gone",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        },
    )


def test_the_defaults_are_the_processes_defaults() -> None:
    """These stories are about the timings the processes really run with."""
    cfg = defaults("a")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (1.0, 0.8, 0.2)


@pytest.mark.parametrize("late_write", ["create", "takeover", "renewal"])
async def test_leader_answered_late_then_partitioned_stops_before_anyone_can_take_over(
    late_write: str,
) -> None:
    """The write that made (or kept) `a` leader is stored at once but answered 0.5 s late,
    and then `a` is cut off from the API. A standby `b` that sees the stored record at once
    may take over `leaseDurationSeconds` later; `a` must have stopped acting by then.

    `create`: `a` creates the Lease; `takeover`: `a` takes over a dead holder's expired
    Lease; `renewal`: `a` already leads and renews. Kills the mutant that counts the renew
    deadline from the answer instead of the send (it overlaps `b` by about 0.3 s)."""
    api = FakeApi()
    wire = Wire(api, defaults("a"))
    a, b = Replica(wire, "a"), Replica(api, "b")
    if late_write == "takeover":
        put_lease_of_a_dead_holder(api)
    try:
        if late_write == "renewal":
            a.start()
            await asyncio.wait_for(a.acting.wait(), 3)
        wire.answer_late_then_cut()
        if late_write != "renewal":
            a.start()
        await asyncio.wait_for(wire.stored.wait(), 3)
        b.start()  # a standby that reads the stored record right away
        await asyncio.wait_for(b.acting.wait(), 4)
        await eventually(lambda: a.windows[-1][1] < float("inf"), timeout=2, what="`a` stops")

        assert wire.answered_at is not None, "the late answer must reach `a` (scenario)"
        assert wire.answered_at - wire.stored_at >= 0.3, "answered late (scenario)"
        earliest_takeover = wire.stored_at + wire.stored_lease["spec"]["leaseDurationSeconds"]
        (_, a_until) = a.windows[-1]
        (b_from, _) = b.windows[0]
        assert a_until > wire.answered_at  # `a` acted on the late answer...
        assert a_until < earliest_takeover, (  # ...and stopped before anyone could take over
            f"`a` acted until stored+{a_until - wire.stored_at:.3f}s, but a standby may take "
            f"over from stored+{earliest_takeover - wire.stored_at:.3f}s"
        )
        assert a_until <= b_from, f"two leaders for {a_until - b_from:.3f}s"
        assert not a.elector.is_leader and b.elector.is_leader
        print(
            f"{late_write}: a stopped at stored+{a_until - wire.stored_at:.3f}s, "
            f"b acted from stored+{b_from - wire.stored_at:.3f}s"
        )
    finally:
        await a.stop()
        await b.stop()
