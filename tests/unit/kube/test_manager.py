"""The Manager's lifecycle with the in-memory API: caches first, then the Lease, then terms.

Each test runs a `Manager` over `FakeApi` (informers, writer) and a second `FakeApi` for the
Lease, with a `Work` that records what the manager asked of it, and checks the order of
things: nothing acts before the caches have synced; leader runnables run exactly while a
term does; a term that ends has its queue shut down and its writer closed before the
process's `end_term`; `stop` leaves no task behind; a runnable that fails ends the term and
the run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import structlog.testing

from eipctl.kube.client import IPCLAIMS, LEASES, ObjectList, ResourceRef
from eipctl.kube.leader import LeaderElectionConfig
from eipctl.kube.manager import Component, LeaderTerm, Manager
from eipctl.kube.workqueue import DONE, Handler, Result
from polling import eventually

from .kube_fakes import FakeApi

LEASE = "kube-system/eipctl-test"


TEST = Component("test", "eipctl-test", "eipctl-test", publish_leader=False)


@dataclass(frozen=True)
class Settings:
    """What the manager reads from a process's settings."""

    leader_elect: bool = True
    identity: str = "me"
    workers: int = 1

    def election(self, lease_name: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            lease_name,
            "kube-system",
            self.identity,
            lease_duration=0.6,
            renew_deadline=0.35,
            retry_period=0.05,
        )


class GatedApi(FakeApi):
    """A FakeApi whose lists wait for `gate`: the caches cannot sync before the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def list(self, ref: ResourceRef, namespace: str | None = None, **kw: Any) -> ObjectList:
        await self.gate.wait()
        return await super().list(ref, namespace, **kw)


class Work:
    """A process's part of a term: records every call, in order, into `log`."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.handled: list[str] = []
        self.ended: list[LeaderTerm[str]] = []
        self.at_end: list[tuple[bool, bool]] = []
        """(queue shut down, writer closed) as `end_term` found them."""
        self.starting: asyncio.Event | None = None
        """Set: `start_term` waits for it (a long term start, as the allocator's rebuild)."""

    async def start_term(self, term: LeaderTerm[str]) -> Handler[str]:
        self.log.append(f"start_term {term.number}")
        if self.starting is not None:
            await self.starting.wait()
        term.queue.add(f"first of {term.number}")
        return self.handle

    async def handle(self, key: str) -> Result:
        self.handled.append(key)
        return DONE

    async def end_term(self, term: LeaderTerm[str]) -> None:
        self.log.append(f"end_term {term.number}")
        self.at_end.append((term.queue.shutting_down, term.writer.closed))
        self.ended.append(term)


def runnable(log: list[str], name: str) -> Callable[[], Any]:
    """Records its start and its cancellation; otherwise waits forever."""

    async def run() -> None:
        log.append(f"{name} started")
        try:
            await asyncio.Event().wait()
        finally:
            log.append(f"{name} stopped")

    return run


def a_term(number: int) -> list[str]:
    """What one whole term leaves in the log, in order."""
    return [f"start_term {number}", "leader started", "leader stopped", f"end_term {number}"]


class Checks:
    """Stands in for runtime.health.Health."""

    def __init__(self) -> None:
        self.live: dict[str, Callable[[], bool]] = {}
        self.ready: dict[str, Callable[[], bool]] = {}

    def add_liveness_check(self, name: str, check: Callable[[], bool]) -> None:
        self.live[name] = check

    def add_readiness_check(self, name: str, check: Callable[[], bool]) -> None:
        self.ready[name] = check


@contextlib.asynccontextmanager
async def running(manager: Manager[str], **kw: Any) -> AsyncIterator[asyncio.Task[None]]:
    """`manager.run` in a task; stopped (and awaited) on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(manager.run(stop=stop, **kw))
    try:
        yield task
    finally:
        stop.set()
        async with asyncio.timeout(5):
            await asyncio.gather(task, return_exceptions=True)


def make(
    api: FakeApi | None = None, *, elect: bool = True, lease_api: FakeApi | None = None
) -> tuple[Manager[str], Work, list[str]]:
    log: list[str] = []
    work = Work(log)
    settings = Settings(leader_elect=elect)
    manager: Manager[str] = Manager(TEST, api or FakeApi(), work, settings, lease_api=lease_api)
    manager.informer(IPCLAIMS, writer_cache=True)
    manager.add_runnable("always", runnable(log, "always"))
    manager.add_leader_runnable("leader", runnable(log, "leader"))
    return manager, work, log


async def test_caches_and_replica_runnables_start_first_and_nothing_leads_before_sync() -> None:
    api = GatedApi()
    lease_api = FakeApi()
    manager, work, log = make(api, lease_api=lease_api)
    checks = Checks()
    async with running(manager, health=checks):
        await eventually(lambda: "always started" in log)
        await asyncio.sleep(0.2)  # time enough to lead, were the caches not in the way
        assert log == ["always started"]
        assert not manager.synced and not checks.ready["informers-synced"]()
        assert (LEASES.plural, LEASE) not in lease_api.objects  # not even contending yet

        api.gate.set()
        await eventually(lambda: work.handled == ["first of 1"])
        assert checks.ready["informers-synced"]()
        assert log == ["always started", "start_term 1", "leader started"]
        assert manager.leading and manager.terms == 1
    assert log[3:] == ["leader stopped", "end_term 1", "always stopped"]


async def test_the_lease_lives_on_its_own_connection_and_is_released_at_stop() -> None:
    api, lease_api = FakeApi(), FakeApi()
    manager, work, _ = make(api, lease_api=lease_api)
    async with running(manager):
        await eventually(lambda: work.handled)
        assert lease_api.objects[(LEASES.plural, LEASE)]["spec"]["holderIdentity"] == "me"
        assert not [key for key in api.objects if key[0] == LEASES.plural]
    assert lease_api.objects[(LEASES.plural, LEASE)]["spec"]["holderIdentity"] == ""


async def test_leader_runnables_run_exactly_while_each_term_does() -> None:
    """A foreign holder takes the Lease: the term ends (runnable stopped, queue shut down,
    writer closed), the replica contends again and its next term starts them afresh."""
    lease_api = FakeApi()
    manager, work, log = make(lease_api=lease_api)
    async with running(manager):
        await eventually(lambda: work.handled == ["first of 1"])
        lease = lease_api.objects[(LEASES.plural, LEASE)]
        lease_api.put(LEASES, {**lease, "spec": {**lease["spec"], "holderIdentity": "rogue"}})
        await eventually(lambda: work.ended, what="term 1 ended")
        assert not manager.leading
        manager.enqueue("while standing by")  # dropped: no term to take it
        await eventually(lambda: work.handled[-1:] == ["first of 2"], timeout=5)
        assert manager.terms == 2
    assert log == ["always started", *a_term(1), *a_term(2), "always stopped"]
    assert work.at_end == [(True, True), (True, True)]
    assert "while standing by" not in work.handled
    first = work.ended[0]
    first.queue.add("late")
    assert len(first.queue) == 0  # a queue that is shut down takes no more keys
    with pytest.raises(asyncio.CancelledError):
        await first.writer.update(IPCLAIMS, "c", lambda obj: obj)  # nor does its writer


async def test_a_term_lost_while_it_starts_is_ended_and_the_next_one_starts_afresh() -> None:
    """A term start yields to the loop (the allocator's rebuild): the Lease is renewed
    meanwhile, and if it is lost anyway, what the start built is dropped (`end_term`), its
    queue and writer closed, no worker or leader runnable started; the next term is whole."""
    lease_api = FakeApi()
    manager, work, log = make(lease_api=lease_api)
    work.starting = asyncio.Event()
    async with running(manager):
        await eventually(lambda: log[-1:] == ["start_term 1"])
        await asyncio.sleep(0.5)  # beyond the renew deadline (0.35 s): renewed meanwhile
        assert manager.elector is not None and manager.elector.is_leader
        lease = lease_api.objects[(LEASES.plural, LEASE)]
        lease_api.put(LEASES, {**lease, "spec": {**lease["spec"], "holderIdentity": "rogue"}})
        await eventually(lambda: work.ended, what="term 1 ended while it started")
        assert log[1:] == ["start_term 1", "end_term 1"]
        assert work.at_end == [(True, True)]
        assert not work.handled and not manager.leading
        work.starting.set()
        await eventually(lambda: work.handled == ["first of 2"], timeout=5)
    assert log == ["always started", "start_term 1", "end_term 1", *a_term(2), "always stopped"]


async def test_without_election_it_leads_at_once_and_stop_cancels_everything() -> None:
    lease_api = FakeApi()
    manager, work, log = make(elect=False, lease_api=lease_api)
    async with running(manager) as task:
        await eventually(lambda: work.handled == ["first of 1"])
        assert manager.elector is None and not lease_api.objects
    assert task.done() and task.exception() is None
    assert log[-3:] == ["leader stopped", "end_term 1", "always stopped"]
    left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert not [n for n in left if n.startswith(("informer-", "test-", "always", "leader"))]
    assert manager.term is None and not manager.leading


async def test_a_key_queued_for_later_is_handled_then_and_dropped_while_standing_by() -> None:
    manager, work, _ = make(elect=False)
    manager.enqueue_after("before leading", 0.0)  # no term: dropped
    async with running(manager):
        await eventually(lambda: work.handled == ["first of 1"])
        manager.enqueue_after("later", 0.3)
        manager.enqueue_after("now", 0.0)
        await eventually(lambda: "now" in work.handled)
        assert "later" not in work.handled
        await eventually(lambda: "later" in work.handled, timeout=2)
    assert "before leading" not in work.handled


async def test_a_term_says_when_it_has_caught_up_with_its_first_keys() -> None:
    manager, work, _ = make(elect=False)
    with structlog.testing.capture_logs() as logs:
        async with running(manager):
            await eventually(lambda: any(e["event"] == "term.caught_up" for e in logs))
            assert work.handled == ["first of 1"]  # said after its first keys were done
    (said,) = [e for e in logs if e["event"] == "term.caught_up"]
    assert said["component"] == "test" and said["term"] == 1 and said["seconds"] >= 0


async def test_a_failing_leader_runnable_ends_the_term_and_the_run() -> None:
    manager, work, log = make(elect=False)

    async def crash() -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("boom")

    manager.add_leader_runnable("crash", crash)
    checks = Checks()
    stop = asyncio.Event()
    with pytest.raises(RuntimeError, match="boom"):
        async with asyncio.timeout(5):
            await manager.run(health=checks, stop=stop)
    assert work.at_end == [(True, True)]
    assert log == ["always started", *a_term(1), "always stopped"]
    assert not checks.live["always"]()  # stopped with the rest


async def test_a_replica_runnable_that_ends_fails_liveness() -> None:
    manager, work, _ = make(elect=False)

    async def gives_up() -> None:
        return

    manager.add_runnable("gives-up", gives_up)
    checks = Checks()
    async with running(manager, health=checks):
        await eventually(lambda: work.handled)
        await eventually(lambda: not checks.live["gives-up"]())
        assert checks.live["always"]()
        assert manager.leading  # the process stays up; the probe tells the kubelet
