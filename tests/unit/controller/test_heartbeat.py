"""controller/heartbeat.py with a fake API: writes, re-registration, and feeding the fence."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from heartbeat_patches import without_time

from eipctl.controller.heartbeat import Heartbeat
from eipctl.core.fence import Fence, FenceTransition
from eipctl.kube.client import Obj
from eipctl.kube.errors import NotFound, ServerError


class Api:
    def __init__(self) -> None:
        self.patches: list[Obj] = []
        self.fail: Exception | None = None
        self.hang = False

    async def get(self, *a: Any, **kw: Any) -> Obj:
        return {}

    async def patch(self, ref: Any, name: str, patch: Obj, *a: Any, **kw: Any) -> Obj:
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        assert kw.get("status") is True
        self.patches.append(without_time(patch))
        return {}


def make(api: Api, fence_timeout: float = 0.3) -> tuple[Heartbeat, list[FenceTransition]]:
    seen: list[FenceTransition] = []

    async def reregister() -> int:
        return 100

    hb = Heartbeat(
        api,
        "node-a",
        interval=0.05,
        fence=Fence(fence_timeout, time.monotonic),
        on_transition=seen.append,
        reregister=reregister,
        counter=7,
    )
    return hb, seen


async def test_each_beat_is_a_status_merge_patch_of_a_new_value() -> None:
    api = Api()
    hb, _ = make(api)
    assert await hb.beat() and await hb.beat()
    assert api.patches == [
        {"status": {"heartbeat": 8, "restartGraceSeconds": None}},
        {"status": {"heartbeat": 9, "restartGraceSeconds": None}},
    ]


async def test_a_deleted_ipnode_is_registered_again() -> None:
    api = Api()
    hb, _ = make(api)
    api.fail = NotFound(404, "NotFound", "gone")
    assert await hb.beat()
    assert api.patches == [{"status": {"heartbeat": 101, "restartGraceSeconds": None}}]


def test_errors_and_hangs_fail_the_beat(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock (tests/virtual_clock.py): a hung beat gives up at fence_timeout."""

    async def main() -> None:
        api = Api()
        hb, _ = make(api, fence_timeout=0.2)
        api.fail = ServerError(503, "ServiceUnavailable", "")
        assert not await hb.beat()
        api.hang = True
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert not await hb.beat()  # bounded by fence_timeout
        assert loop.time() - started == pytest.approx(0.2)

    run_virtual(main())


async def test_a_beat_feeds_the_fence_and_passes_its_answer_on() -> None:
    """Every success goes to on_transition (NONE included; `FenceWatch.report` drops it), a
    failure passes nothing on, and a success while fenced restores."""
    api = Api()
    hb, seen = make(api)
    assert await hb.beat()
    api.fail = ServerError(503, "ServiceUnavailable", "")
    assert not await hb.beat()
    assert hb.fence.lose() is FenceTransition.FENCE
    assert await hb.beat()
    assert seen == [FenceTransition.NONE, FenceTransition.RESTORE]
    assert not hb.fence.fenced
