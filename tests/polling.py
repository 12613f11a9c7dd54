"""Waiting in tests: poll a check until it holds, and fail saying what never happened."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any], *, timeout: float = 10.0, step: float = 0.01, what: str = ""
) -> Any:
    """Poll ``check()`` (sync or async) until it returns a truthy value; return that value.

    After ``timeout`` seconds the test fails with an AssertionError naming ``what`` (or the
    check) and the last value seen. Options are keywords, so suites can bind their own pace
    with ``functools.partial``.
    """
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                last = check()
                if inspect.isawaitable(last):
                    last = await last
                if last:
                    return last
                await asyncio.sleep(step)
    except TimeoutError:
        raise AssertionError(f"not within {timeout}s: {what or check} (last: {last!r})") from None


@contextlib.asynccontextmanager
async def within(timeout: float, what: str) -> AsyncIterator[None]:
    """Bound a block (a loop that waits for something) by ``timeout`` seconds; past it the
    test fails with an AssertionError saying ``what`` did not happen, not a bare
    TimeoutError."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError:
        raise AssertionError(f"not within {timeout}s: {what}") from None


class LoopTurns:
    """``async with LoopTurns() as turns: ...``: how many turns of the loop a task beside the
    block got while it ran (``turns.during``); a block that never gives the loop back lets
    it run none."""

    def __init__(self) -> None:
        self.during = 0
        self._ticks = 0
        self._running = True
        self._task: asyncio.Task[None] | None = None

    async def _beside(self) -> None:
        while self._running:
            await asyncio.sleep(0)
            self._ticks += 1

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.create_task(self._beside())
        await asyncio.sleep(0)  # started, and waiting for its first turn
        self._ticks = 0
        return self

    async def __aexit__(self, *_: object) -> None:
        self.during = self._ticks
        self._running = False
        if self._task is not None:
            await self._task
