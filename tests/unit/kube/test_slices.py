"""`in_slices`: long walks give the loop back, short ones do not pay for it.

The walks run on a fake clock that each item's "work" moves (`Work`), so where the yields
fall is exact: a real busy loop on a busy machine is preempted, and its slices then end
after fewer items (it was `4 <= ticks <= 12` for ~8)."""

from __future__ import annotations

import asyncio

from eipctl.kube.slices import Timeslice, in_slices
from polling import LoopTurns


class Work:
    """The monotonic clock of a walk whose every item takes ``seconds``: it moves only when
    an item is worked on."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def item(self) -> None:
        self.now += self.seconds


async def _walk(items: range, work: float, slice_seconds: float) -> tuple[list[int], int]:
    """Walk ``items`` spending ``work`` seconds on each (on the fake clock); returns the
    items seen and how often a task beside the walk got the loop meanwhile."""
    clock = Work(work)
    seen = []
    async with LoopTurns() as turns:
        async for item in in_slices(items, slice_seconds, clock=clock):
            clock.item()
            seen.append(item)
    return seen, turns.during


async def test_a_long_walk_gives_the_loop_back_once_per_slice_and_misses_nothing() -> None:
    # 40 items of 1/1024 s (binary fractions: exact sums) in slices of 5/1024 s: a yield after
    # every fifth item, 8 turns for the task beside
    seen, ticks = await _walk(range(40), work=1 / 1024, slice_seconds=5 / 1024)
    assert seen == list(range(40))
    assert ticks == 8


async def test_a_walk_shorter_than_a_slice_does_not_yield() -> None:
    seen, ticks = await _walk(range(100), work=0.0, slice_seconds=10.0)
    assert seen == list(range(100))
    assert ticks == 0


async def test_a_timeslice_counts_the_work_not_the_loops_turns_between() -> None:
    """A placement pass paces itself by `busy`: what other tasks do while it has yielded
    must not count, or a busy loop would make the pass rest for the loop's own work."""
    clock = Work(1 / 1024)
    budget = Timeslice(4 / 1024, clock)
    working = True

    async def beside() -> None:
        while working:
            await asyncio.sleep(0)
            clock.now += 1.0  # the loop's other work: a whole second per turn

    other = asyncio.create_task(beside())
    for _ in range(10):
        clock.item()
        await budget.spent()
    working = False
    assert budget.done() == 10 / 1024
    assert budget.longest == 4 / 1024
    assert budget.yields == 2
    await other
