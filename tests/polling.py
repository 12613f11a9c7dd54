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
