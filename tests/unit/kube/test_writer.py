"""SerializedWriter against the in-memory fake: nothing lost, nothing written twice."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from eipctl.kube.client import IPCLAIMS, Obj
from eipctl.kube.errors import AlreadyExists, ApiError, Invalid, NotFound, ServerError, error_for
from eipctl.kube.metrics import WRITER_COALESCED, WRITER_CONFLICTS, WRITER_RETRIES
from eipctl.kube.write_ids import WRITE_ID, unstamp
from eipctl.kube.writer import SerializedWriter, WriterSettings

from .kube_fakes import FakeApi


def claim(name: str = "c1", **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"n": 0, **spec}}


def incr(obj: Obj) -> None:
    obj["spec"]["n"] += 1


def counter(metric: Any) -> float:
    return float(metric.labels("ipclaims")._value.get())


def fast() -> WriterSettings:
    return WriterSettings(backoff_initial=0.001, backoff_max=0.01)


class RefusingApi(FakeApi):
    """`refuse[verb]`: errors raised, one each, by the next calls of that verb only, before
    anything is applied (`FakeApi.faults` hit whichever call comes next, a GET too)."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: dict[str, list[ApiError]] = {}

    def _fault(self, verb: str) -> None:
        super()._fault(verb)
        if self.refuse.get(verb):
            raise self.refuse[verb].pop(0)


async def test_concurrent_mutations_all_land_and_are_coalesced() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    coalesced0 = counter(WRITER_COALESCED)

    async def writer() -> None:
        for _ in range(25):
            await w.update(IPCLAIMS, "c1", incr)

    await asyncio.gather(*(writer() for _ in range(8)))
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 200
    assert counter(WRITER_COALESCED) > coalesced0
    assert api.calls.count("replace") < 200


async def test_conflicts_are_reread_and_reapplied_keeping_foreign_changes() -> None:
    class RogueApi(FakeApi):
        """Another process writes the object just before every other write of ours."""

        rogue = 0
        writes = 0

        async def replace(self, ref: Any, obj: Obj, *, status: bool = False) -> Obj:
            self.writes += 1
            if self.writes % 2:
                cur = self.objects[("ipclaims", "c1")]
                self.rogue += 1
                self.put(IPCLAIMS, {**cur, "spec": {**cur["spec"], "rogue": self.rogue}})
            return await super().replace(ref, obj, status=status)

    api = RogueApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    conflicts0 = counter(WRITER_CONFLICTS)
    for _ in range(50):
        await w.update(IPCLAIMS, "c1", incr)
    spec = api.objects[("ipclaims", "c1")]["spec"]
    assert spec == {"n": 50, "rogue": api.rogue}
    assert counter(WRITER_CONFLICTS) - conflicts0 >= 25


async def test_no_change_means_no_write() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    out = await w.update(IPCLAIMS, "c1", lambda o: None)
    assert out["spec"]["n"] == 0
    assert "replace" not in api.calls


async def test_status_writes_use_the_status_subresource() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())

    def bound(o: Obj) -> None:
        o["status"] = {"phase": "Bound"}

    await w.update_status(IPCLAIMS, "c1", bound)
    assert api.calls[-1] == "replace_status"
    assert api.objects[("ipclaims", "c1")]["status"] == {"phase": "Bound"}


async def test_retryable_errors_are_retried_and_ambiguous_writes_not_doubled() -> None:
    """Guards: a write refused with a 5xx/429 is retried until it lands, once; one applied but
    reported as failed is recognised by its write-id and not applied again. Kills: treating
    a refused write as landed (n stays 0), not retrying writes, and applying twice."""
    api = RefusingApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    retries0 = counter(WRITER_RETRIES)
    e500 = error_for(500, json.dumps({"reason": "InternalError"}))
    api.refuse["replace"] = [e500, error_for(429)]  # refused before applying
    await w.update(IPCLAIMS, "c1", incr)
    assert api.calls.count("replace") == 3  # both refusals hit a write, the third landed
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 1
    assert counter(WRITER_RETRIES) - retries0 == 2
    api.fault_after = [e500]  # applied, then reported as failed
    await w.update(IPCLAIMS, "c1", incr)
    obj = api.objects[("ipclaims", "c1")]
    assert obj["spec"]["n"] == 2
    assert WRITE_ID in obj["metadata"]["annotations"]


async def test_a_mutation_that_takes_the_write_id_off_gets_an_unstamped_write() -> None:
    """#33: the stamp stayed on an object eipctl had let go of. A mutation that removes it
    (`write_ids.unstamp`) is written without one; an ambiguous failure of that write is
    settled by re-applying the mutation to a fresh read, which then changes nothing."""
    api = RefusingApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    await w.update(IPCLAIMS, "c1", incr)
    assert WRITE_ID in api.objects[("ipclaims", "c1")]["metadata"]["annotations"]

    def let_go(obj: Obj) -> None:
        obj["spec"]["n"] = 0
        unstamp(obj)

    api.fault_after = [error_for(503)]  # applied, then reported as failed
    await w.update(IPCLAIMS, "c1", let_go)
    obj = api.objects[("ipclaims", "c1")]
    assert obj["spec"]["n"] == 0
    assert WRITE_ID not in (obj["metadata"].get("annotations") or {})
    assert api.calls.count("replace") == 2  # the re-read showed it landed: not sent again


async def test_ambiguous_create_is_recognised_as_ours_but_a_foreign_one_is_not() -> None:
    api = FakeApi()
    w = SerializedWriter(api, fast())
    api.fault_after = [error_for(503)]
    created = await w.create(IPCLAIMS, claim("mine"))
    assert created["metadata"]["name"] == "mine"
    api.put(IPCLAIMS, claim("taken"))
    with pytest.raises(AlreadyExists):
        await w.create(IPCLAIMS, claim("taken"))


async def test_a_refused_create_while_someone_else_takes_the_name_is_already_exists() -> None:
    """Guards: after a create failed with a 5xx, a later AlreadyExists is this writer's own
    create only if the stored object carries its write-id. Kills: `_create` counting any
    AlreadyExists after an ambiguous failure as ours; for the allocator that hands one IP
    to two Services (tests/integration/test_allocator_reservation.py tells that story).

    The create is refused (nothing stored); before the writer retries, another process
    creates an object of that name; the retry finds it."""

    class NameTakenMeanwhile(RefusingApi):
        async def create(self, ref: Any, obj: Obj, namespace: str | None = None) -> Obj:
            try:
                return await super().create(ref, obj, namespace)
            except ServerError:
                self.put(IPCLAIMS, claim("c1", holder="someone-else"))
                raise

    api = NameTakenMeanwhile()
    api.refuse["create"] = [error_for(503)]
    w = SerializedWriter(api, fast())
    with pytest.raises(AlreadyExists):
        await w.create(IPCLAIMS, claim("c1", holder="us"))
    assert api.calls == ["create", "create", "get"]  # refused, AlreadyExists, whose is it?
    theirs = api.objects[("ipclaims", "c1")]
    assert theirs["spec"]["holder"] == "someone-else"
    assert WRITE_ID not in (theirs["metadata"].get("annotations") or {})


async def test_a_name_taken_and_freed_again_during_a_retried_create_is_already_exists() -> None:
    """After an ambiguous failure the create finds the name taken, and by the re-read the
    object is gone again: the caller hears AlreadyExists (it handles that: the name was
    someone's), not a NotFound from a create."""

    class TakenThenFreed(RefusingApi):
        async def get(
            self, ref: Any, name: str, namespace: str | None = None, *, status: bool = False
        ) -> Obj:
            self.objects.pop(("ipclaims", name), None)  # deleted just before the re-read
            return await super().get(ref, name, namespace, status=status)

    api = TakenThenFreed()
    api.refuse["create"] = [error_for(503)]
    api.put(IPCLAIMS, claim("c1", holder="someone-else"))
    w = SerializedWriter(api, fast())
    with pytest.raises(AlreadyExists):
        await w.create(IPCLAIMS, claim("c1", holder="us"))
    assert api.calls[-1] == "get"


async def test_update_of_missing_object_and_delete_idempotence() -> None:
    api = FakeApi()
    w = SerializedWriter(api, fast())
    with pytest.raises(NotFound):
        await w.update(IPCLAIMS, "ghost", incr)
    api.put(IPCLAIMS, claim())
    assert await w.delete(IPCLAIMS, "c1") is True
    assert await w.delete(IPCLAIMS, "c1") is False


async def test_a_failing_mutation_fails_only_its_caller() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())

    def bad(o: Obj) -> None:
        raise ValueError("bad mutation")

    results = await asyncio.gather(
        w.update(IPCLAIMS, "c1", incr),
        w.update(IPCLAIMS, "c1", bad),
        w.update(IPCLAIMS, "c1", incr),
        return_exceptions=True,
    )
    assert isinstance(results[1], ValueError)
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 2


async def test_non_retryable_error_surfaces_and_lane_keeps_working() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    api.faults = [error_for(422)]
    with pytest.raises(Invalid):
        await w.update(IPCLAIMS, "c1", incr)
    await w.update(IPCLAIMS, "c1", incr)
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 1


async def test_starts_from_cache_copy_and_heals_a_stale_one() -> None:
    api = FakeApi()
    stale = api.put(IPCLAIMS, claim())
    api.put(IPCLAIMS, claim(n=5))

    class Cache:
        def get(self, key: str) -> Obj | None:
            return stale if key == "c1" else None

    w = SerializedWriter(api, fast())
    w.use_cache(IPCLAIMS, Cache())
    await w.update(IPCLAIMS, "c1", incr)
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 6
    assert api.calls[:2] == ["replace", "get"]  # cache first, 409, then re-read


async def test_patch_and_drain() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    task = asyncio.create_task(w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}}))
    await asyncio.sleep(0)
    await w.drain()
    assert task.done()
    assert api.objects[("ipclaims", "c1")]["metadata"]["labels"] == {"a": "b"}
    assert w.pending == 0


async def test_close_cancels_in_flight_and_queued_writes_and_refuses_new_ones() -> None:
    class StuckApi(FakeApi):
        """Writes to c1 hang until released, as a request to an unresponsive server would."""

        def __init__(self) -> None:
            super().__init__()
            self.release = asyncio.Event()
            self.sent = asyncio.Event()

        async def replace(self, ref: Any, obj: Obj, *, status: bool = False) -> Obj:
            if obj["metadata"]["name"] == "c1":
                self.sent.set()
                await self.release.wait()
            return await super().replace(ref, obj, status=status)

    api = StuckApi()
    api.put(IPCLAIMS, claim("c1"))
    api.put(IPCLAIMS, claim("c2"))
    w = SerializedWriter(api, fast())
    in_flight = asyncio.create_task(w.update(IPCLAIMS, "c1", incr))
    await api.sent.wait()
    queued = asyncio.create_task(w.delete(IPCLAIMS, "c1"))
    await asyncio.sleep(0)
    assert w.pending == 1
    done = await w.update(IPCLAIMS, "c2", incr)  # another lane is not held up
    assert done["spec"]["n"] == 1

    async with asyncio.timeout(1):
        await w.close()
        results = await asyncio.gather(in_flight, queued, return_exceptions=True)
    assert [type(r) for r in results] == [asyncio.CancelledError, asyncio.CancelledError]
    assert w.closed and w.pending == 0
    await w.drain()  # no lane task is left behind
    with pytest.raises(asyncio.CancelledError):
        await w.update(IPCLAIMS, "c2", incr)
    api.release.set()
    await asyncio.sleep(0)
    assert api.objects[("ipclaims", "c1")]["spec"]["n"] == 0  # withdrawn, never applied
    assert api.objects[("ipclaims", "c2")]["spec"]["n"] == 1
    assert ("ipclaims", "c1") in api.objects  # the queued delete never ran
