"""scheduler/pass_claims.py: a pass's walk over the claims, in slices of the loop's time.

Writes of the term end while the walk has yielded; what they stored must be what the walk
reads from then on, and a walk cut short (the term ended) must leave nothing half-done."""

from __future__ import annotations

import asyncio

import pytest

from eipctl.core.fields import Obj
from eipctl.kube.slices import Timeslice
from eipctl.scheduler.claim_facts import ClaimFactsMemo
from eipctl.scheduler.claim_writes import ClaimWrites
from eipctl.scheduler.pass_claims import gather


def claim(n: int, rv: int, node: str = "") -> Obj:
    labels = {"eipctl.io/pool": "p"}
    spec: Obj = {"ip": f"192.0.2.{n}", "prefixLength": 32}
    if node:
        labels["eipctl.io/node"] = node
        spec["nodeName"] = node
    return {
        "metadata": {"name": f"192-0-2-{n}", "labels": labels, "resourceVersion": str(rv)},
        "spec": spec,
    }


class Cache:
    def __init__(self, objs: list[Obj]) -> None:
        self.objs = objs

    def objects(self) -> list[Obj]:
        return list(self.objs)


class EveryItem:
    """A clock that makes a `Timeslice` of 1 s end after every item."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def every_item() -> Timeslice:
    return Timeslice(1.0, EveryItem())


async def test_a_write_that_ends_while_the_walk_has_yielded_is_what_the_walk_reads() -> None:
    cache = Cache([claim(1, 10), claim(2, 10), claim(3, 10)])
    writes = ClaimWrites(cache, lambda _: None)
    stored = claim(3, 11, node="n1")

    async def write_ends() -> None:
        writes.remember(stored)  # claim 3 placed on n1, the cache still has version 10

    asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(write_ends()))
    got = await gather(writes, ClaimFactsMemo(), every_item())
    assert [f.view.node for f in got.facts] == ["", "", "n1"]
    assert got.by_name["192-0-2-3"] is stored


async def test_a_copy_stored_during_the_walk_is_kept_for_the_next_pass() -> None:
    """A claim created (or written) after the walk took its list is not "deleted since": the
    next pass must still lay our copy over a cache that has not caught up."""
    cache = Cache([claim(1, 10)])
    writes = ClaimWrites(cache, lambda _: None)
    writes.remember(claim(9, 5))  # ours, and the cache no longer has it: deleted since
    created = claim(2, 12, node="n2")
    asyncio.get_running_loop().call_soon(writes.remember, created)
    await gather(writes, ClaimFactsMemo(), every_item())
    cache.objs.append(claim(2, 11))  # the cache, one version behind our write
    assert [o["metadata"]["resourceVersion"] for o in writes.claim_objects()] == ["10", "12"]


async def test_a_walk_cut_short_leaves_the_memo_as_the_last_pass_left_it() -> None:
    cache = Cache([claim(n, 10) for n in range(1, 6)])
    writes = ClaimWrites(cache, lambda _: None)
    memo = ClaimFactsMemo()
    await gather(writes, memo, every_item())
    assert memo.read == 5
    cache.objs = [claim(n, 11) for n in range(1, 6)]  # every claim changed
    walk = asyncio.create_task(gather(writes, memo, every_item()))
    for _ in range(3):
        await asyncio.sleep(0)
    walk.cancel()
    with pytest.raises(asyncio.CancelledError):
        await walk
    assert memo.read == 5
    cache.objs = [claim(n, 10) for n in range(1, 6)]  # what the memo knows: nothing to read
    await gather(writes, memo, every_item())
    assert memo.read == 0


async def test_the_walk_splits_the_claims_as_the_pass_needs_them() -> None:
    copy_on_n1 = claim(4, 10, node="n1")
    copy_on_n1["metadata"]["name"] = "192-0-2-4.n1"
    copy_on_n1["metadata"]["labels"]["eipctl.io/node-bound"] = "true"
    cache = Cache([claim(1, 10), copy_on_n1])
    writes = ClaimWrites(cache, lambda _: None)
    got = await gather(writes, ClaimFactsMemo(), every_item())
    assert [f.name for f in got.facts] == ["192-0-2-1"] == list(got.by_name)
    assert len(got.phases) == 2
