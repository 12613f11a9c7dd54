"""`in_slices`: long walks give the loop back, short ones do not pay for it."""

from __future__ import annotations

import asyncio
import time

from eipctl.kube.slices import in_slices


async def _walk(items: range, work: float, slice_seconds: float) -> tuple[list[int], int]:
    """Walk ``items`` spending ``work`` seconds on each (busy, as a parse is); returns the
    items seen and how often a task beside the walk got the loop meanwhile."""
    ticks = 0
    walking = True

    async def beside() -> None:
        nonlocal ticks
        while walking:
            await asyncio.sleep(0)
            ticks += 1

    other = asyncio.create_task(beside())
    await asyncio.sleep(0)
    ticks = 0
    seen = []
    async for item in in_slices(items, slice_seconds):
        until = time.perf_counter() + work
        while time.perf_counter() < until:
            pass
        seen.append(item)
    during = ticks
    walking = False
    await other
    return seen, during


async def test_a_long_walk_gives_the_loop_back_once_per_slice_and_misses_nothing() -> None:
    seen, ticks = await _walk(range(40), work=0.001, slice_seconds=0.005)
    assert seen == list(range(40))
    assert 4 <= ticks <= 12  # 40 ms of work in 5 ms slices: ~8 turns for the task beside


async def test_a_walk_shorter_than_a_slice_does_not_yield() -> None:
    seen, ticks = await _walk(range(100), work=0.0, slice_seconds=10.0)
    assert seen == list(range(100))
    assert ticks == 0
