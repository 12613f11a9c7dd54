"""ClaimWrites: which writes are in flight, when a pass must follow one, which copy to use."""

from __future__ import annotations

import asyncio

from eipctl.core.fields import Obj
from eipctl.core.placement import Decision, Reason
from eipctl.scheduler.claim_writes import ClaimWrites

MOVE = Decision("c", "node-1", "node-2", Reason.NODE_DEAD)
ELSEWHERE = Decision("c", "node-1", "node-3", Reason.NODE_DEAD)


class Claims:
    def __init__(self, *objs: Obj) -> None:
        self.objs = list(objs)

    def objects(self) -> list[Obj]:
        return list(self.objs)


def claim(name: str, rv: int, node: str = "") -> Obj:
    return {"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": {"nodeName": node}}


async def run_write(gate: asyncio.Event, fail: bool = False) -> None:
    await gate.wait()
    if fail:
        raise RuntimeError("write failed")


async def started(
    decision: Decision | None = MOVE, fail: bool = False
) -> tuple[ClaimWrites, list[float], asyncio.Event]:
    kicks: list[float] = []
    writes = ClaimWrites(Claims(), kicks.append)
    gate = asyncio.Event()
    writes.start("c", decision, run_write(gate, fail))
    return writes, kicks, gate


async def finish(writes: ClaimWrites, gate: asyncio.Event) -> None:
    gate.set()
    for _ in range(10):
        if not len(writes):
            return
        await asyncio.sleep(0)
    raise AssertionError("the write did not finish")


async def test_a_pass_deciding_what_the_write_does_asks_for_no_pass_after_it() -> None:
    writes, kicks, gate = await started()
    writes.defer("c", MOVE)
    await finish(writes, gate)
    assert kicks == []


async def test_a_pass_deciding_otherwise_gets_a_pass_right_after_the_write() -> None:
    writes, kicks, gate = await started()
    writes.defer("c", ELSEWHERE)
    assert writes.pending == {"c": MOVE}
    await finish(writes, gate)
    assert kicks == [0.0]
    assert writes.pending == {}


async def test_a_deferral_without_a_decision_always_asks_for_a_pass() -> None:
    writes, kicks, gate = await started(decision=None)
    writes.defer("c")
    await finish(writes, gate)
    assert kicks == [0.0]


async def test_a_failed_write_asks_for_a_pass_a_little_later() -> None:
    writes, kicks, gate = await started(fail=True)
    writes.defer("c", ELSEWHERE)
    await finish(writes, gate)
    assert kicks == [1.0]


async def test_close_cancels_the_writes_in_flight_and_asks_for_nothing() -> None:
    writes, kicks, _ = await started()
    writes.defer("c", ELSEWHERE)
    await writes.close()
    assert kicks == []


def test_our_stored_copy_is_used_until_the_cache_has_caught_up() -> None:
    cache = Claims(claim("c", 5, "node-1"))
    writes = ClaimWrites(cache, lambda _: None)
    ours = claim("c", 7, "node-2")
    writes.remember(ours)
    assert writes.claim_objects() == [ours]
    assert writes.is_echo(claim("c", 7, "node-2"))
    assert not writes.is_echo(claim("c", 5, "node-1"))
    cache.objs = [claim("c", 8, "node-2")]
    assert writes.claim_objects() == cache.objs
    assert not writes.is_echo(ours)  # forgotten once the cache had it


def test_a_claim_deleted_since_our_write_is_forgotten() -> None:
    writes = ClaimWrites(Claims(), lambda _: None)
    writes.remember(claim("c", 7))
    assert writes.claim_objects() == []
    assert not writes.is_echo(claim("c", 7))


def unversioned(name: str, node: str = "") -> Obj:
    """A claim without a resourceVersion: not from the API (a test's, a hand-made copy)."""
    return {"metadata": {"name": name}, "spec": {"nodeName": node}}


def test_a_claim_without_a_version_is_never_our_own_echo() -> None:
    """Versions say which copy is newer; without one there is nothing to compare, and a
    pass must look at the claim rather than take it for what our write stored."""
    writes = ClaimWrites(Claims(), lambda _: None)
    writes.remember(unversioned("c", "node-2"))
    assert writes.is_echo(unversioned("c", "node-2")) is False
    writes.remember(claim("c", 7, "node-2"))
    assert writes.is_echo(claim("c", 7, "node-2")) is True


def test_without_a_version_on_either_side_the_cached_copy_wins_and_ours_is_forgotten() -> None:
    """Ours is laid over the cache only while both versions say it is newer."""
    for cached, ours in (
        (unversioned("c", "node-1"), claim("c", 9, "node-2")),
        (claim("c", 3, "node-1"), unversioned("c", "node-2")),
    ):
        writes = ClaimWrites(Claims(cached), lambda _: None)
        writes.remember(ours)
        assert writes.claim_objects() == [cached]
        writes.claims = Claims(claim("c", 1, "node-1"))  # an older copy: ours is gone anyway
        assert writes.claim_objects() == [claim("c", 1, "node-1")]
