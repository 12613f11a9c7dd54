"""Heartbeat in detail: the grace announcement, failure counting and its logs, and the beat
cadence, on a fake clock and a scripted `asyncio.sleep` (the fence watchdog: test_fencing.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import structlog
from heartbeat_patches import without_time

from eipctl.controller import heartbeat as heartbeat_module
from eipctl.controller.heartbeat import Heartbeat
from eipctl.core.fence import Fence, FenceTransition
from eipctl.kube.client import IPNODES, Obj
from eipctl.kube.errors import NotFound, ServerError
from eipctl.metrics import REGISTRY

NODE = "node-a"


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Api:
    """Records every status patch as (ref, name, status, body); can fail, hang or take time."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.calls: list[tuple[Any, str, Any, Obj]] = []
        self.fail_once: Exception | None = None
        self.failing: Exception | None = None
        self.hang = False
        self.takes = 0.0  # fake seconds each write takes
        self.clock = clock

    async def get(self, *a: Any, **kw: Any) -> Obj:
        return {}

    async def patch(self, ref: Any, name: str, patch: Obj, *a: Any, **kw: Any) -> Obj:
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail_once is not None:
            exc, self.fail_once = self.fail_once, None
            raise exc
        if self.failing is not None:
            raise self.failing
        if self.clock is not None:
            self.clock.now += self.takes
        self.calls.append((ref, name, kw.get("status"), without_time(patch)))
        return {}


def make(
    api: Api,
    clock: Clock,
    *,
    fence_timeout: float = 0.5,
    interval: float = 0.25,
    counter: int | None = 7,
) -> tuple[Heartbeat, list[FenceTransition]]:
    seen: list[FenceTransition] = []

    async def reregister() -> int:
        return 100

    kwargs: dict[str, Any] = {} if counter is None else {"counter": counter}
    hb = Heartbeat(
        api,
        NODE,
        interval=interval,
        fence=Fence(fence_timeout, clock),
        on_transition=seen.append,
        reregister=reregister,
        **kwargs,
    )
    return hb, seen


class EndOfScriptError(Exception):
    """Ends a loop under test from inside the scripted sleep."""


class FakeAsyncio:
    """Stands in for the `asyncio` module inside heartbeat.py: `sleep` records the delay
    and moves the fake clock by it; `loop.time()` is the fake clock."""

    timeout = staticmethod(asyncio.timeout)

    def __init__(self, clock: Clock, limit: int) -> None:
        self.clock = clock
        self.limit = limit
        self.sleeps: list[float] = []

    def get_running_loop(self) -> FakeAsyncio:
        return self

    def time(self) -> float:
        return self.clock()

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.clock.now += delay
        if len(self.sleeps) >= self.limit:
            raise EndOfScriptError


@pytest.fixture
def fake_asyncio(monkeypatch: pytest.MonkeyPatch) -> Callable[[Clock, int], FakeAsyncio]:
    def install(clock: Clock, limit: int) -> FakeAsyncio:
        fake = FakeAsyncio(clock, limit)
        monkeypatch.setattr(heartbeat_module, "asyncio", fake)
        return fake

    return install


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


# -- what is written ---------------------------------------------------------------------


async def test_a_new_heartbeat_starts_counting_from_zero() -> None:
    api = Api()
    hb, _ = make(api, Clock(), counter=None)
    assert await hb.beat()
    assert [body for *_, body in api.calls] == [
        {"status": {"heartbeat": 1, "restartGraceSeconds": None}}
    ]


async def test_the_grace_announcement_is_a_new_heartbeat_value_carrying_the_grace() -> None:
    """The scheduler only reads an IpNode whose counter moved: the announcement bumps it,
    and the next beat goes on from there (clearing the grace)."""
    api = Api()
    hb, _ = make(api, Clock(), counter=7)
    await hb.announce_grace(30.0)
    assert hb.counter == 8
    assert await hb.beat()
    assert api.calls == [
        (IPNODES, NODE, True, {"status": {"heartbeat": 8, "restartGraceSeconds": 30.0}}),
        (IPNODES, NODE, True, {"status": {"heartbeat": 9, "restartGraceSeconds": None}}),
    ]


async def test_a_deleted_ipnode_is_logged_registered_again_and_its_status_patched() -> None:
    api = Api()
    hb, _ = make(api, Clock())
    api.fail_once = NotFound(404, "NotFound", "gone")
    with structlog.testing.capture_logs() as logs:
        assert await hb.beat()
    assert api.calls == [
        (IPNODES, NODE, True, {"status": {"heartbeat": 101, "restartGraceSeconds": None}})
    ]
    assert events(logs, "ipnode.missing") == [
        {"event": "ipnode.missing", "node": NODE, "log_level": "warning"}
    ]


# -- failures ----------------------------------------------------------------------------


async def test_failures_are_counted_and_logged_on_the_first_then_every_twentieth() -> None:
    clock = Clock()
    api = Api()
    hb, _ = make(api, clock, fence_timeout=3600.0)
    clock.now = 0.12345
    error = ServerError(503, "ServiceUnavailable", "")
    api.failing = error
    errors = sample("eipctl_controller_heartbeats_total", result="error")
    with structlog.testing.capture_logs() as logs:
        for _ in range(41):
            assert not await hb.beat()
    failed = events(logs, "heartbeat.failed")
    assert [e["failures"] for e in failed] == [1, 20, 40]
    assert failed[0] == {
        "event": "heartbeat.failed",
        "log_level": "warning",
        "node": NODE,
        "failures": 1,
        "api_silence": 0.123,
        "error": repr(error),
    }
    assert sample("eipctl_controller_heartbeats_total", result="error") == errors + 41


async def test_a_write_that_outlives_the_fence_timeout_is_logged_as_a_timeout() -> None:
    api = Api()
    hb, _ = make(api, Clock(), fence_timeout=0.02)
    api.hang = True
    with structlog.testing.capture_logs() as logs:
        assert not await hb.beat()
    assert [e["error"] for e in events(logs, "heartbeat.failed")] == ["timeout"]


async def test_recovery_is_logged_once_and_the_next_outage_is_counted_afresh() -> None:
    api = Api()
    hb, _ = make(api, Clock(), fence_timeout=3600.0)
    ok = sample("eipctl_controller_heartbeats_total", result="ok")
    with structlog.testing.capture_logs() as logs:
        assert await hb.beat()  # nothing failed yet: nothing recovered
        api.failing = ServerError(503, "ServiceUnavailable", "")
        assert not await hb.beat()
        assert not await hb.beat()
        api.failing = None
        assert await hb.beat()
        assert await hb.beat()
        api.failing = ServerError(503, "ServiceUnavailable", "")
        assert not await hb.beat()
    assert events(logs, "heartbeat.recovered") == [
        {"event": "heartbeat.recovered", "log_level": "info", "node": NODE, "failures": 2}
    ]
    assert [e["failures"] for e in events(logs, "heartbeat.failed")] == [1, 1]
    assert sample("eipctl_controller_heartbeats_total", result="ok") == ok + 3


# -- the beat cadence --------------------------------------------------------------------


async def test_run_beats_at_a_fixed_cadence_a_slow_write_shortens_the_sleep(
    fake_asyncio: Callable[[Clock, int], FakeAsyncio],
) -> None:
    clock = Clock(8.0)
    api = Api(clock)
    api.takes = 0.25
    hb, _ = make(api, clock, fence_timeout=3600.0, interval=1.0)
    fake = fake_asyncio(clock, 3)
    with pytest.raises(EndOfScriptError):
        await hb.run()
    assert fake.sleeps == [0.75, 0.75, 0.75]
    assert len(api.calls) == 3


async def test_run_does_not_sleep_after_a_write_slower_than_the_interval(
    fake_asyncio: Callable[[Clock, int], FakeAsyncio],
) -> None:
    clock = Clock(8.0)
    api = Api(clock)
    api.takes = 1.5
    hb, _ = make(api, clock, fence_timeout=3600.0, interval=1.0)
    fake = fake_asyncio(clock, 2)
    with pytest.raises(EndOfScriptError):
        await hb.run()
    assert fake.sleeps == [0.0, 0.0]
