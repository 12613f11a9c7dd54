"""controller/reachability.py: reads prove the API; probes that stop trigger a check, and a
check that fails then fences at once instead of after the node timeout."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from eipctl.controller.reachability import ApiReachability
from eipctl.core.fence import Fence, FenceTransition
from eipctl.kube.errors import NotFound, ServerError
from eipctl.metrics import REGISTRY
from polling import eventually


class Api:
    """GETs answer, fail, hang or say NotFound as the test sets `mode`."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.gets = 0
        self.options: list[dict[str, Any]] = []

    async def get(self, ref: Any, name: str, **kw: Any) -> dict[str, Any]:
        self.gets += 1
        self.options.append(kw)
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "error":
            raise ServerError(503, "ServiceUnavailable", "")
        if self.mode == "gone":
            raise NotFound(404, "NotFound", "")
        return {"metadata": {"name": name}}


class Bed:
    def __init__(self, *, node_timeout: float = 30.0) -> None:
        self.api = Api()
        self.fence = Fence(node_timeout, time.monotonic)
        self.transitions: list[FenceTransition] = []
        self.last_probe: float | None = None
        self.reach = ApiReachability(
            self.api,
            "node-a",
            interval=0.2,
            probe_silence=0.2,
            fence=self.fence,
            on_transition=self._transition,
            last_probe=lambda: self.last_probe,
            clock=time.monotonic,
        )

    def _transition(self, t: FenceTransition) -> None:
        if t is not FenceTransition.NONE:
            self.transitions.append(t)

    def probed(self) -> None:
        self.last_probe = time.monotonic()


@contextlib.asynccontextmanager
async def running(bed: Bed) -> Any:
    task = asyncio.create_task(bed.reach.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def checks(result: str) -> float:
    return REGISTRY.get_sample_value("eipctl_controller_api_checks_total", {"result": result}) or 0


async def test_a_read_or_a_not_found_is_an_answer_an_error_or_a_hang_is_not() -> None:
    bed = Bed()
    ok, errors = checks("ok"), checks("error")
    assert await bed.reach.check(0.5)
    bed.api.mode = "gone"
    assert await bed.reach.check(0.5)
    bed.api.mode = "error"
    assert not await bed.reach.check(0.5)
    bed.api.mode = "hang"
    assert not await bed.reach.check(0.05)
    assert (checks("ok"), checks("error")) == (ok + 2, errors + 2)


async def test_the_check_may_be_answered_from_the_servers_watch_cache() -> None:
    """resourceVersion=0: no etcd quorum read per node per second on a real cluster."""
    bed = Bed()
    assert await bed.reach.check(0.5)
    assert bed.api.options == [{"resource_version": "0"}]


async def test_a_check_restores_a_fenced_node() -> None:
    bed = Bed()
    bed.fence.lose()
    assert await bed.reach.check(0.5)
    assert bed.transitions == [FenceTransition.RESTORE]


async def test_reads_every_interval_keep_the_fence_fed() -> None:
    bed = Bed(node_timeout=0.5)
    async with running(bed):
        await asyncio.sleep(1.0)
    assert bed.api.gets >= 3
    assert bed.fence.api_silence() < 0.5
    assert bed.transitions == []


async def test_probes_stopping_with_the_api_gone_fence_at_once() -> None:
    """Cut off from both: no waiting for the 30 s node timeout."""
    bed = Bed()
    bed.probed()
    async with running(bed):
        await asyncio.sleep(0.05)
        bed.api.mode = "hang"
        started = time.monotonic()
        await eventually(lambda: bed.transitions or None, timeout=5)
        assert time.monotonic() - started < 5.0
    assert bed.transitions == [FenceTransition.FENCE]
    assert bed.fence.fenced


async def test_probes_stopping_with_the_api_answering_fence_nothing() -> None:
    """The scheduler declared us dead (or none runs): the moves come through our watch."""
    bed = Bed()
    bed.probed()
    async with running(bed):
        await asyncio.sleep(0.8)
    assert bed.reach.probes_silent() is not None
    assert bed.transitions == []
    assert not bed.fence.fenced


async def test_no_probes_ever_is_not_a_silence() -> None:
    """A controller no scheduler probes yet (none started) keeps its addresses."""
    bed = Bed()
    assert bed.reach.probes_silent() is None
    bed.api.mode = "error"
    async with running(bed):
        await asyncio.sleep(0.5)
    assert bed.transitions == []


@pytest.mark.parametrize("mode", ["error", "hang"])
async def test_one_immediate_check_per_silence(mode: str) -> None:
    bed = Bed()
    bed.probed()
    bed.api.mode = mode
    async with running(bed):
        await asyncio.sleep(0.6)
        gets = bed.api.gets
        assert bed.transitions == [FenceTransition.FENCE]
    assert gets <= 1 + 3  # the immediate one and at most the regular ones (every 0.2 s)
