"""controller/fencing.py: the watchdog fences exactly at the deadline (on real time, and on a
fake clock with a scripted `asyncio.sleep` inside the module), and every transition is
counted, logged and passed on once, whoever noticed it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import structlog

from eipctl.controller import fencing as fencing_module
from eipctl.controller.fencing import FenceWatch
from eipctl.core.fence import Fence, FenceTransition
from eipctl.metrics import REGISTRY

NODE = "node-a"


def make(
    fence_timeout: float, clock: Callable[[], float] = time.monotonic
) -> tuple[FenceWatch, list[FenceTransition]]:
    seen: list[FenceTransition] = []
    watch = FenceWatch(NODE, fence=Fence(fence_timeout, clock), on_transition=seen.append)
    return watch, seen


def api_answered(watch: FenceWatch) -> None:
    """What a heartbeat or an API check does when the API answers."""
    watch.report(watch.fence.succeeded())


class EndOfScriptError(Exception):
    """Ends the watchdog from inside the scripted sleep."""


class ScriptedSleep:
    """Stands in for the `asyncio` module inside fencing.py. Its `sleep` records the delay,
    moves the fake clock (`now`, the fence's clock) by it, then runs what `after` holds for
    that sleep (counted from 1); the `limit`-th sleep ends the loop."""

    def __init__(self, limit: int) -> None:
        self.now = 0.0
        self.limit = limit
        self.sleeps: list[float] = []
        self.after: dict[int, Callable[[], None]] = {}

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay
        if (then := self.after.get(len(self.sleeps))) is not None:
            then()
        if len(self.sleeps) >= self.limit:
            raise EndOfScriptError


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], ScriptedSleep]:
    def install(limit: int) -> ScriptedSleep:
        script = ScriptedSleep(limit)
        monkeypatch.setattr(fencing_module, "asyncio", script)
        return script

    return install


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def transitions() -> tuple[float, float]:
    """The fence and restore counts so far."""
    counter = "eipctl_controller_fence_transitions_total"
    return sample(counter, kind="fence"), sample(counter, kind="restore")


def logged(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


def test_watchdog_fences_at_the_deadline_and_an_api_success_restores(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock (tests/virtual_clock.py), the fence's clock being the loop's: the
    fence comes at the deadline, to the 5 ms the test polls at."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        watch, seen = make(fence_timeout=0.3, clock=loop.time)
        watchdog = asyncio.create_task(watch.watchdog())
        try:
            async with asyncio.timeout(2):
                while not seen:
                    await asyncio.sleep(0.005)
            assert seen == [FenceTransition.FENCE]
            assert 0.3 <= loop.time() - started <= 0.3 + 0.005 + 1e-9
            api_answered(watch)
            assert seen == [FenceTransition.FENCE, FenceTransition.RESTORE]
        finally:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)

    run_virtual(main())


async def test_watchdog_fences_at_the_exact_deadline_and_keeps_watching_after_a_restore(
    scripted: Callable[[int], ScriptedSleep],
) -> None:
    """It sleeps until the deadline, fences when the age equals fence_timeout, looks again
    every tenth of fence_timeout while fenced (not a 10 s heartbeat interval: a second outage
    right after a restore must fence on time), and fences again at the next deadline."""
    script = scripted(4)
    watch, seen = make(fence_timeout=0.5, clock=script.clock)
    script.after[2] = lambda: api_answered(watch)
    with pytest.raises(EndOfScriptError):
        await watch.watchdog()
    assert script.sleeps == [0.5, 0.05, 0.5, 0.05]
    assert seen == [FenceTransition.FENCE, FenceTransition.RESTORE, FenceTransition.FENCE]


async def test_fence_and_restore_set_the_gauge_count_and_log(
    scripted: Callable[[int], ScriptedSleep],
) -> None:
    script = scripted(2)
    watch, seen = make(fence_timeout=0.5, clock=script.clock)
    script.now = 0.51237  # the watchdog first looks after the deadline
    fences, restores = transitions()
    gauge: list[float] = []

    def restore() -> None:
        gauge.append(sample("eipctl_controller_fenced"))
        api_answered(watch)
        gauge.append(sample("eipctl_controller_fenced"))

    script.after[1] = restore
    before = time.time()
    with structlog.testing.capture_logs() as logs, pytest.raises(EndOfScriptError):
        await watch.watchdog()
    assert seen == [FenceTransition.FENCE, FenceTransition.RESTORE]
    assert gauge == [1.0, 0.0]
    assert transitions() == (fences + 1, restores + 1)
    fenced, restored = logged(logs, "node.fenced"), logged(logs, "node.restored")
    assert len(fenced) == 1 and len(restored) == 1
    assert before <= fenced[0].pop("at") <= time.time()
    assert before <= restored[0].pop("at") <= time.time()
    assert fenced == [
        {"event": "node.fenced", "log_level": "warning", "node": NODE, "api_silence": 0.512}
    ]
    assert restored == [{"event": "node.restored", "log_level": "warning", "node": NODE}]


async def test_no_transition_is_not_reported() -> None:
    """The heartbeat and the checks hand over every answer of the fence; NONE goes no further."""
    watch, seen = make(fence_timeout=30.0)
    before = transitions()
    with structlog.testing.capture_logs() as logs:
        api_answered(watch)
        watch.report(FenceTransition.NONE)
    assert seen == []
    assert logs == []
    assert transitions() == before
