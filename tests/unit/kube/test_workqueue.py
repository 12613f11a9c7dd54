"""WorkQueue: dedup, one worker per key, re-run of keys changed in flight, backoff, drain."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from eipctl.kube.workqueue import (
    DONE,
    Backoff,
    Result,
    ShutDown,
    TerminalError,
    WorkQueue,
    requeue_after,
    retry,
    run_workers,
)
from polling import within


async def test_pending_keys_are_deduplicated() -> None:
    q: WorkQueue[str] = WorkQueue()
    for k in ["a", "b", "a", "a", "b"]:
        q.add(k)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_key_added_while_processing_runs_again_after_done_not_concurrently() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # changed while in flight
    assert len(q) == 0  # not handed to a second worker
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    q.done(key)
    assert await asyncio.wait_for(getter, 1) == "a"


def test_add_after_fires_once_at_earliest_deadline(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock (tests/virtual_clock.py): the earliest deadline exactly."""

    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        q.add_after("a", 0.2)
        q.add_after("a", 0.05)
        q.add_after("a", 0.3)
        assert await asyncio.wait_for(q.get(), 1) == "a"
        assert loop.time() - t0 == pytest.approx(0.05)
        q.done("a")
        await asyncio.sleep(0.3)  # past the two later deadlines: they were merged, not queued
        assert len(q) == 0

    run_virtual(main())


async def test_rate_limited_retries_back_off_per_key_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue(backoff=Backoff(base=0.01, cap=1.0, jitter=0.0))
    assert [q.backoff.delay(n) for n in range(4)] == [0.01, 0.02, 0.04, 0.08]
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    assert q.failures("a") == 2
    q.forget("a")
    assert q.failures("a") == 0
    assert q.backoff.delay(100) == 1.0


async def test_workers_never_process_one_key_twice_at_once_and_converge() -> None:
    q: WorkQueue[int] = WorkQueue()
    active: set[int] = set()
    overlaps = 0
    seen_version: dict[int, int] = {}
    version: dict[int, int] = {}

    async def handler(key: int) -> Result:
        nonlocal overlaps
        if key in active:
            overlaps += 1
        active.add(key)
        v = version[key]
        await asyncio.sleep(0.001)
        seen_version[key] = v
        active.discard(key)
        return DONE

    runner = asyncio.create_task(run_workers(q, handler, workers=8))
    for round_ in range(20):
        for key in range(30):
            version[key] = round_
            q.add(key)
        await asyncio.sleep(0.0005)
    async with asyncio.timeout(5):
        await q.wait_idle()
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert overlaps == 0
    assert seen_version == {k: 19 for k in range(30)}  # every key processed at its final state


async def test_a_burst_of_keys_with_nothing_to_do_gives_the_loop_back() -> None:
    """Handlers that find nothing to do never wait on anything: 10,000 such keys at a term's
    start held the loop, and the Lease's renewal, until the last was done. The workers give
    the loop back once a slice (`kube.slices.SLICE`, 5 ms) is used up."""
    q: WorkQueue[int] = WorkQueue()
    done: list[int] = []
    turns_beside: list[int] = []  # how many keys were done each time another task ran

    async def nothing_to_do(key: int) -> Result:
        until = time.perf_counter() + 0.0002  # a cache read and a compare, busy
        while time.perf_counter() < until:
            pass
        done.append(key)
        return DONE

    async def beside() -> None:
        while len(done) < 500:
            turns_beside.append(len(done))
            await asyncio.sleep(0)

    for key in range(500):  # 100 ms of work in all
        q.add(key)
    runner = asyncio.create_task(run_workers(q, nothing_to_do, workers=2))
    async with asyncio.timeout(5):
        await asyncio.gather(beside(), q.wait_idle())
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert sorted(done) == list(range(500))
    assert len(turns_beside) >= 10  # ~20 slices of 5 ms: the loop came back between them
    gaps = [b - a for a, b in itertools.pairwise(turns_beside)]
    assert max(gaps) <= 100  # never more than ~25 keys (5 ms) per worker in one go, with slack


async def test_handler_results_retry_requeue_and_exceptions() -> None:
    q: WorkQueue[str] = WorkQueue(backoff=Backoff(base=0.001, jitter=0.0))
    runs: Counter[str] = Counter()

    async def handler(key: str) -> Result:
        runs[key] += 1
        if key == "flaky" and runs[key] < 4:
            return retry(RuntimeError("not yet"))
        if key == "boom" and runs[key] < 3:
            raise ValueError("handler crashed")
        if key == "poll" and runs[key] < 3:
            return requeue_after(0.01)
        return DONE

    runner = asyncio.create_task(run_workers(q, handler, workers=2))
    for k in ["flaky", "boom", "poll", "once"]:
        q.add(k)
    async with within(5, "every key run its expected number of times"):
        while runs != Counter(flaky=4, boom=3, poll=3, once=1):
            await asyncio.sleep(0.005)
        await q.wait_idle()
    assert q.failures("flaky") == 0  # forgotten after success
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_a_terminal_error_is_not_retried_until_the_key_is_added_again() -> None:
    q: WorkQueue[str] = WorkQueue(backoff=Backoff(base=0.001, jitter=0.0))
    runs: Counter[str] = Counter()

    async def handler(key: str) -> Result:
        runs[key] += 1
        if key == "bad" and runs[key] == 1:
            raise TerminalError("BadProviderID", "a user must fix the Node")
        return DONE

    runner = asyncio.create_task(run_workers(q, handler, workers=1))
    q.add("bad")
    async with within(5, "the bad key run once and the queue idle"):
        while runs["bad"] < 1:
            await asyncio.sleep(0.001)
        await q.wait_idle()
        await asyncio.sleep(0.05)  # 50 backoff bases: a retry would have run by now
        assert runs["bad"] == 1 and q.failures("bad") == 0 and len(q) == 0
        q.add("bad")  # the Node changed
        while runs["bad"] < 2:
            await asyncio.sleep(0.001)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


async def test_shutdown_drains_queued_and_in_flight_work() -> None:
    q: WorkQueue[int] = WorkQueue()
    finished: list[int] = []

    async def handler(key: int) -> None:
        await asyncio.sleep(0.01)
        finished.append(key)

    for k in range(10):
        q.add(k)
    runner = asyncio.create_task(run_workers(q, handler, workers=2, drain_timeout=5))
    await asyncio.sleep(0.005)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert sorted(finished) == list(range(10))
    q.add(99)  # ignored after shutdown
    with pytest.raises(ShutDown):
        await q.get()


async def test_drain_timeout_cancels_stuck_work() -> None:
    q: WorkQueue[int] = WorkQueue()
    cancelled = asyncio.Event()

    async def handler(key: int) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    q.add(1)
    runner = asyncio.create_task(run_workers(q, handler, workers=1, drain_timeout=0.05))
    await asyncio.sleep(0.01)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
    assert cancelled.is_set()
