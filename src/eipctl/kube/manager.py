"""One lifecycle for the leader-elected processes, in the mould of controller-runtime's Manager.

Caches first: every replica, leader or not, runs the informers and the runnables added with
`add_runnable` from `start` to `stop`, so a standby that takes the Lease already knows the
cluster. Nothing acts before every cache has synced. Only the Lease holder runs a *term*: a
fresh work queue and serialized writer, the key handler the process builds for them
(`TermWork.start_term`, which loads its state from the caches and queues the first keys),
and the runnables added with `add_leader_runnable`.

A term ends when the Lease is lost, at stop, or when one of its runnables fails (the failure
then ends the process too, as controller-runtime's does). At the end the writer is closed at
once (a deposed leader's queued writes must not land after the next leader acts), the
workers get a short drain, the runnables are cancelled, and `TermWork.end_term` drops the
term's state: the next term starts again from the caches, the API's truth.

The Lease is renewed on a connection of its own (`clients`): a burst of writes and Events on
the shared connection must never queue a renewal behind it, or a busy leader fences itself
and its work starts over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog

from eipctl.kube import heap
from eipctl.kube.client import KubeApi, Obj, ResourceRef, connect
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import IndexFunc, Informer, ListWatchApi
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector, LeaseApi
from eipctl.kube.metrics import LEADER
from eipctl.kube.workqueue import Handler, WorkQueue, run_workers
from eipctl.kube.writer import SerializedWriter

log = structlog.get_logger(__name__)

K = TypeVar("K", bound=Hashable)
Runnable = Callable[[], Coroutine[Any, Any, None]]
"""A coroutine function that runs until cancelled (returning early is allowed)."""
FLUSH_TIMEOUT = 2.0
"""Seconds the Events still being posted get at stop."""


@dataclass(frozen=True)
class Clients:
    api: KubeApi
    """Informers, writes and Events."""
    lease_api: KubeApi
    """The Lease only (see the module docstring)."""


@contextlib.asynccontextmanager
async def clients(kubeconfig: str | None) -> AsyncIterator[Clients]:
    """The process's API connection and the Lease's own; both closed on exit."""
    api = await connect(kubeconfig)
    try:
        lease_api = await connect(kubeconfig)
        try:
            yield Clients(api, lease_api)
        finally:
            await lease_api.close()
    finally:
        await api.close()


class HealthChecks(Protocol):
    """Where the manager registers its probes (`runtime.health.Health` satisfies it)."""

    def add_liveness_check(self, name: str, check: Callable[[], bool]) -> None: ...
    def add_readiness_check(self, name: str, check: Callable[[], bool]) -> None: ...


@dataclass(frozen=True)
class LeaderTerm(Generic[K]):
    """What one leadership term acts through; made fresh for each term."""

    number: int
    """1 for this replica's first term."""
    queue: WorkQueue[K]
    writer: SerializedWriter


class TermWork(Protocol[K]):
    """The process's part of a term."""

    async def start_term(self, term: LeaderTerm[K]) -> Handler[K]:
        """Build the term's state from the (synced) caches, queue the first keys; return the
        handler the workers call for each key. A long build yields to the loop
        (`kube.slices`): the Lease is renewed on the same loop."""
        ...

    async def end_term(self, term: LeaderTerm[K]) -> None:
        """The term is over (its writer closed, its workers stopped): drop its state."""
        ...


@dataclass(frozen=True)
class Component:
    """Who a process is to the manager."""

    name: str
    """The queue's name and the `component` label of `eipctl_leader`."""
    lease: str
    """The Lease it contends for."""
    event_source: str
    """`source.component` of its Events."""
    publish_leader: bool = True
    """Set `eipctl_leader{component=name}` (0 standing by, 1 leading)."""


class ManagerSettings(Protocol):
    """What the manager reads from a process's settings (`runtime.config.LeaderSettings`)."""

    @property
    def identity(self) -> str:
        """This replica: the Lease holder and the host of its Events."""
        ...

    @property
    def workers(self) -> int: ...
    @property
    def leader_elect(self) -> bool:
        """False: no Lease, the replica leads at once."""
        ...

    def election(self, lease_name: str) -> LeaderElectionConfig: ...


class Manager(Generic[K]):
    """Caches on every replica; a queue, a writer and the leader runnables per term."""

    def __init__(
        self,
        component: Component,
        api: KubeApi,
        work: TermWork[K],
        settings: ManagerSettings,
        *,
        lease_api: LeaseApi | None = None,
        watch_api: ListWatchApi | None = None,
        drain_timeout: float = 0.1,
    ) -> None:
        """`lease_api` defaults to `api` (tests); `watch_api` is what the informers list and
        watch (default `api`)."""
        self.name = component.name
        self.api = api
        self.lease_api: LeaseApi = lease_api or api
        self.watch_api: ListWatchApi = watch_api or api
        self.work = work
        self.workers = settings.workers
        self.election = settings.election(component.lease) if settings.leader_elect else None
        self.recorder = EventRecorder(api, component.event_source, host=settings.identity)
        """The process's Events; flushed at stop."""
        self.publish_leader = component.publish_leader
        self.drain_timeout = drain_timeout
        self._settle_heap = False
        """Freeze the heap once the caches have synced (`run`'s ``settle_heap``)."""
        self.informers: list[Informer] = []
        self._writer_caches: list[tuple[ResourceRef, Informer]] = []
        self._runnables: list[tuple[str, Runnable]] = []
        self._leader_runnables: list[tuple[str, Runnable]] = []
        self._running: list[asyncio.Task[None]] = []
        self._ending: set[asyncio.Task[None]] = set()
        self.elector: LeaderElector | None = None
        self.term: LeaderTerm[K] | None = None
        """The current term; None while standing by."""
        self.terms = 0
        """Terms this replica has led."""

    # --- registering (before start) -------------------------------------------------------
    def informer(
        self,
        ref: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        writer_cache: bool = False,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> Informer:
        """A cache of `ref` (in ``namespace`` only, if given) that runs on every replica.
        `writer_cache`: each term's writer starts updates of `ref` objects from it instead
        of a GET."""
        informer = Informer(
            self.watch_api,
            ref,
            namespace=namespace,
            label_selector=label_selector,
            indexers=indexers,
            transform=transform,
        )
        self.informers.append(informer)
        if writer_cache:
            self._writer_caches.append((ref, informer))
        return informer

    def add_runnable(self, name: str, run: Runnable) -> None:
        """Runs on every replica from `start` to `stop`; /healthz fails if it ends."""
        self._runnables.append((name, run))

    def add_leader_runnable(self, name: str, run: Runnable) -> None:
        """Runs during each term, started after `TermWork.start_term`; its failure ends
        the term."""
        self._leader_runnables.append((name, run))

    # --- state ------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return all(i.has_synced for i in self.informers)

    @property
    def leading(self) -> bool:
        return self.term is not None

    def enqueue(self, key: K) -> None:
        """Queue `key` in the current term; dropped while standing by (the next term starts
        with a full pass anyway)."""
        if self.term is not None:
            self.term.queue.add(key)

    def enqueue_after(self, key: K, delay: float) -> None:
        """`enqueue` in ``delay`` seconds (at once when <= 0; the earliest request wins)."""
        if self.term is not None:
            self.term.queue.add_after(key, delay)

    # --- lifecycle --------------------------------------------------------------------------
    async def run(
        self, *, health: HealthChecks | None = None, stop: asyncio.Event, settle_heap: bool = False
    ) -> None:
        """Start, contend for the Lease once synced, lead while holding it; until `stop` is
        set (the Lease is released on the way out) or a term fails (raised).

        ``settle_heap``: the process's own (its entry point's), not a test's: once the caches
        have synced, freeze the heap and time the collector's pauses (`kube.heap`).
        """
        self._settle_heap = settle_heap
        if settle_heap:
            heap.observe_pauses()
        self.start()
        if health is not None:
            health.add_readiness_check("informers-synced", lambda: self.synced)
            for task in self._running:
                health.add_liveness_check(task.get_name(), _alive(task))
        try:
            await _until_stopped(self._contend(), stop)
        finally:
            await self.stop()

    def start(self) -> None:
        """Start the caches, then the runnables of every replica."""
        if self.publish_leader:
            LEADER.labels(self.name).set(0)
        for informer in self.informers:
            informer.start()
        for name, run in self._runnables:
            self._running.append(asyncio.create_task(run(), name=name))

    async def wait_synced(self) -> None:
        for informer in self.informers:
            await informer.wait_synced()

    async def stop(self) -> None:
        """Stop everything `start` started, after a term still ending; post the last Events."""
        await asyncio.gather(*list(self._ending), return_exceptions=True)
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._running.clear()
        for informer in self.informers:
            await informer.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FLUSH_TIMEOUT):
                await self.recorder.flush()

    async def _contend(self) -> None:
        await self.wait_synced()
        log.info(
            "caches.synced",
            component=self.name,
            objects={i.ref.plural: len(i) for i in self.informers},
        )
        if self._settle_heap:
            heap.settle()  # the caches out of the collector's way
            self._running.append(asyncio.create_task(self._resettle(), name="heap-settle"))
        if self.election is None:
            await self.lead()
            return
        self.elector = LeaderElector(self.lease_api, self.election)
        await self.elector.run(self.lead)

    async def _resettle(self) -> None:
        """Settle the heap again whenever the caches have grown by half (`kube.heap`)."""
        grown = heap.SettleWhenGrown(sum(len(i) for i in self.informers))
        while True:
            await asyncio.sleep(heap.RECHECK)
            if grown.due(sum(len(i) for i in self.informers)):
                heap.settle()

    async def lead(self) -> None:
        """One term: act until cancelled (the Lease is lost, or stop) or a runnable fails."""
        await self.wait_synced()
        self.terms += 1
        writer = SerializedWriter(self.api)
        for ref, cache in self._writer_caches:
            writer.use_cache(ref, cache)
        term: LeaderTerm[K] = LeaderTerm(self.terms, WorkQueue(self.name), writer)
        tasks: list[asyncio.Task[None]] = []
        began = time.monotonic()
        try:
            handle = await self.work.start_term(term)
            self.term = term
            if self.publish_leader:
                LEADER.labels(self.name).set(1)
            workers = asyncio.create_task(
                run_workers(
                    term.queue, handle, workers=self.workers, drain_timeout=self.drain_timeout
                ),
                name=f"{self.name}-workers",
            )
            tasks.append(workers)
            tasks += [asyncio.create_task(run(), name=n) for n, run in self._leader_runnables]
            tasks.append(asyncio.create_task(self._caught_up(term, began), name="caught-up"))
            await _until_done(workers, tasks)
        finally:
            # shielded, and awaited again by `stop`: a second cancel must not cut it short;
            # also when the term was lost while it started (`end_term` drops what it built)
            ending = asyncio.create_task(self._end(term, tasks), name=f"{self.name}-term-end")
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)
            await asyncio.shield(ending)

    async def _caught_up(self, term: LeaderTerm[K], began: float) -> None:
        """Log once the term's first keys are all done (its queue idle for the first time):
        a new leader has looked at everything, e.g. after an upgrade."""
        await term.queue.wait_idle()
        log.info(
            "term.caught_up",
            component=self.name,
            term=term.number,
            seconds=round(time.monotonic() - began, 3),
        )

    async def _end(self, term: LeaderTerm[K], tasks: list[asyncio.Task[None]]) -> None:
        self.term = None
        if self.publish_leader:
            LEADER.labels(self.name).set(0)
        for task in tasks:
            task.cancel()  # the workers drain for `drain_timeout`
        term.queue.shutdown()  # (no workers yet if the term was lost as it started)
        await term.writer.close()  # meanwhile: nothing queued lands after the term
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.work.end_term(term)


async def _until_done(workers: asyncio.Task[None], tasks: list[asyncio.Task[None]]) -> None:
    """Until the workers return or any task fails (raised); a leader runnable that returns
    is just done."""
    pending = set(tasks)
    while workers in pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                task.result()


async def _until_stopped(work: Awaitable[None], stop: asyncio.Event) -> None:
    """Run `work` until it returns (or raises) or `stop` is set, then cancel it."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        task.cancel()  # the elector releases the Lease on its way out
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _alive(task: asyncio.Task[None]) -> Callable[[], bool]:
    return lambda: not task.done()
