"""An asyncio event loop on a virtual clock, for unit tests that assert how long things take.

`VirtualLoop.time()` moves only when nothing is ready to run: where the loop would wait for
its next timer, the clock jumps to it. So `asyncio.sleep(0.05)` takes exactly 0.05 virtual
seconds and no real time, whatever else the machine is doing, and a test asserts a schedule
exactly instead of with slack that flakes on a busy machine (docs/testing.md, "Time in
tests"). A loop where every task waits and no timer is left fails at once ("deadlock").

Only for code that waits on timers and on other coroutines: real I/O (sockets,
subprocesses) would see the clock race ahead of it. Code under test must read time through
the loop (`loop.time()`, `asyncio.sleep`, `asyncio.timeout`) or be handed `loop.time` as its
clock; `time.monotonic()` is not virtual.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _VirtualSelector(selectors.BaseSelector):
    """Never blocks: when the loop would wait for its next timer, the clock jumps to it."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("deadlock: every task waits, and no timer is left to fire")
        self._loop.now += timeout
        return []

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()


class VirtualLoop(asyncio.SelectorEventLoop):
    """A selector loop whose clock starts at ``start`` and jumps to the next timer."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now


def run_virtual(main: Coroutine[Any, Any, T], start: float = 0.0) -> T:
    """Run ``main`` to completion on a fresh `VirtualLoop` whose clock starts at ``start``."""
    with asyncio.Runner(loop_factory=lambda: VirtualLoop(start)) as runner:
        return runner.run(main)
