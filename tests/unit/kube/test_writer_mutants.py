"""SerializedWriter, the guarantees tests/unit/kube/test_writer.py leaves unpinned.

Namespaced objects, delete preconditions, status patches, retry counting and backoff, the
conflict limit, ambiguous writes that landed, writers without write-ids, the per-lane memo,
coalescing, and shutdown (drain/close). Against `ScopedApi`, the shared fake plus the
real client's scoping and the server's preconditions.
"""

from __future__ import annotations

import asyncio
import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from eipctl.kube import writer as writer_module
from eipctl.kube.client import IPCLAIMS, SERVICES, Obj, ResourceRef, object_key
from eipctl.kube.errors import AlreadyExists, ApiError, Conflict, NotFound, ServerError, error_for
from eipctl.kube.metrics import WRITER_COALESCED, WRITER_CONFLICTS, WRITER_RETRIES, WRITER_WRITES
from eipctl.kube.write_ids import WRITE_ID
from eipctl.kube.writer import SerializedWriter, WriterSettings

from .kube_fakes import FakeApi


def e503() -> ApiError:
    return error_for(503, json.dumps({"reason": "ServiceUnavailable"}))


def e409() -> ApiError:
    return error_for(409, json.dumps({"reason": "Conflict"}))


def _scope(ref: ResourceRef, namespace: str | None) -> str | None:
    return namespace if ref.namespaced else None


class ScopedApi(FakeApi):
    """`FakeApi` with what the real client and server add:

    - a namespace given for a cluster-scoped kind is ignored (`ResourceRef.path` drops it);
    - a delete with a resourceVersion precondition that no longer matches gets 409 Conflict;
    - a patch of the status subresource changes only `status`, one of the main resource
      everything but `status`;
    - `refuse[verb]`: errors raised, one each, by the next calls of that verb, before
      anything is applied;
    - writes (create, replace, patch) of the object keys in `hold` wait for `release`;
      `held` is set once one waits, `abandoned` lists those cancelled while waiting.
    """

    def __init__(self) -> None:
        super().__init__()
        self.refuse: dict[str, list[ApiError]] = {}
        self.hold: set[str] = set()
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.abandoned: list[str] = []

    def _fault(self, verb: str) -> None:
        super()._fault(verb)
        if self.refuse.get(verb):
            raise self.refuse[verb].pop(0)

    async def _gate(self, key: str) -> None:
        if key in self.hold:
            self.held.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.abandoned.append(key)
                raise

    async def get(
        self, ref: ResourceRef, name: str, namespace: str | None = None, *, status: bool = False
    ) -> Obj:
        return await super().get(ref, name, _scope(ref, namespace), status=status)

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        await self._gate(object_key(obj))
        return await super().create(ref, obj, namespace)

    async def replace(self, ref: ResourceRef, obj: Obj, *, status: bool = False) -> Obj:
        await self._gate(object_key(obj))
        return await super().replace(ref, obj, status=status)

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        namespace: str | None = None,
        *,
        status: bool = False,
    ) -> Obj:
        ns = _scope(ref, namespace)
        await self._gate(f"{ns}/{name}" if ns else name)
        if status:
            patch = {"status": patch["status"]} if "status" in patch else {}
        else:
            patch = {k: v for k, v in patch.items() if k != "status"}
        return await super().patch(ref, name, patch, ns, status=status)

    async def delete(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Obj:
        await asyncio.sleep(0)
        self._fault("delete")
        ns = _scope(ref, namespace)
        key = f"{ns}/{name}" if ns else name
        current = self.objects.get((ref.plural, key))
        if current is None:
            raise error_for(404, json.dumps({"reason": "NotFound"}))
        if resource_version and current["metadata"]["resourceVersion"] != resource_version:
            raise e409()
        self.remove(ref, key)
        return {}


def claim(name: str = "c1", **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"n": 0, **spec}}


def service(namespace: str, name: str = "web", **spec: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"n": 0, **spec}}


def incr(obj: Obj) -> None:
    obj["spec"]["n"] += 1


def incr_status(obj: Obj) -> None:
    status = obj.setdefault("status", {})
    status["n"] = status.get("n", 0) + 1


def fast(**kw: Any) -> WriterSettings:
    return WriterSettings(**{"backoff_initial": 0.001, "backoff_max": 0.002, **kw})


def stored(api: FakeApi, ref: ResourceRef, key: str) -> Obj:
    return api.objects[(ref.plural, key)]


def count(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


# --- namespaced objects ------------------------------------------------------------------
async def test_updates_of_a_namespaced_object_read_and_write_only_that_namespace() -> None:
    """The allocator writes Services: an update or status update given a namespace reads
    and writes that namespace's object, not a same-named one elsewhere."""
    api = ScopedApi()
    api.put(SERVICES, service("a"))
    api.put(SERVICES, service("b"))
    w = SerializedWriter(api, fast())
    out = await w.update(SERVICES, "web", incr, namespace="a")
    assert out["metadata"]["namespace"] == "a" and out["spec"]["n"] == 1
    await w.update_status(SERVICES, "web", incr_status, namespace="b")
    assert stored(api, SERVICES, "a/web")["spec"]["n"] == 1
    assert "status" not in stored(api, SERVICES, "a/web")
    assert stored(api, SERVICES, "b/web")["status"] == {"n": 1}
    assert stored(api, SERVICES, "b/web")["spec"]["n"] == 0


async def test_patch_and_delete_of_a_namespaced_object_reach_that_namespace() -> None:
    api = ScopedApi()
    api.put(SERVICES, service("a"))
    api.put(SERVICES, service("b"))
    w = SerializedWriter(api, fast())
    await w.patch(SERVICES, "web", {"metadata": {"labels": {"x": "y"}}}, namespace="b")
    assert stored(api, SERVICES, "b/web")["metadata"]["labels"] == {"x": "y"}
    assert "labels" not in stored(api, SERVICES, "a/web")["metadata"]
    assert await w.delete(SERVICES, "web", namespace="a") is True
    assert ("services", "a/web") not in api.objects
    assert ("services", "b/web") in api.objects


async def test_an_ambiguous_create_of_a_namespaced_object_is_recognised_as_ours() -> None:
    """A create applied but reported failed (503) is found again in its namespace on the
    retry's AlreadyExists, by its write-id, and returned as created."""
    api = ScopedApi()
    api.fault_after = [e503()]
    w = SerializedWriter(api, fast())
    created = await w.create(SERVICES, service("a"))
    assert created == stored(api, SERVICES, "a/web")
    assert api.calls == ["create", "create", "get"]


async def test_the_namespace_of_a_cached_copy_is_part_of_its_key() -> None:
    """An update of a namespaced object starts from the cache's "namespace/name" copy."""
    api = ScopedApi()
    copy_a = api.put(SERVICES, service("a"))
    asked: list[str] = []

    class Cache:
        def get(self, key: str) -> Obj | None:
            asked.append(key)
            return copy_a if key == "a/web" else None

    w = SerializedWriter(api, fast())
    w.use_cache(SERVICES, Cache())
    await w.update(SERVICES, "web", incr, namespace="a")
    assert asked == ["a/web"]
    assert api.calls == ["replace"]  # no GET: the cached copy was current


async def test_same_name_in_two_namespaces_and_two_names_in_one_do_not_wait_for_each_other() -> (
    None
):
    """Each object has its own lane: a create that hangs holds up neither the create of the
    same name in another namespace nor that of another name in its namespace."""
    api = ScopedApi()
    api.hold = {"a/web"}
    w = SerializedWriter(api, fast())
    stuck = asyncio.create_task(w.create(SERVICES, service("a")))
    await api.held.wait()
    async with asyncio.timeout(2):
        other_ns = await w.create(SERVICES, service("b"))
        other_name = await w.create(SERVICES, service("a", "api"))
    assert object_key(other_ns) == "b/web" and object_key(other_name) == "a/api"
    assert not stuck.done()
    api.release.set()
    assert object_key(await stuck) == "a/web"


async def test_a_cluster_scoped_object_has_one_lane_whatever_namespace_is_passed() -> None:
    """The server ignores a namespace given for a cluster-scoped kind, and so do the lanes:
    two updates of one IpClaim, one given a stray namespace, fold into one write."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    await asyncio.gather(
        w.update(IPCLAIMS, "c1", incr, namespace="stray"), w.update(IPCLAIMS, "c1", incr)
    )
    assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 2
    assert api.calls == ["get", "replace"]


# --- delete preconditions ----------------------------------------------------------------
async def test_a_delete_with_a_stale_resource_version_is_refused_and_deletes_nothing() -> None:
    """`delete(resource_version=...)` is a precondition: if the object changed since that
    version, Conflict and the object stays; with the current version it goes."""
    api = ScopedApi()
    old_rv = api.put(IPCLAIMS, claim())["metadata"]["resourceVersion"]
    new_rv = api.put(IPCLAIMS, claim(n=1))["metadata"]["resourceVersion"]
    w = SerializedWriter(api, fast())
    with pytest.raises(Conflict):
        await w.delete(IPCLAIMS, "c1", resource_version=old_rv)
    assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 1
    assert await w.delete(IPCLAIMS, "c1", resource_version=new_rv) is True
    assert ("ipclaims", "c1") not in api.objects


# --- status patches ----------------------------------------------------------------------
async def test_patch_goes_to_the_status_subresource_only_when_asked() -> None:
    """`patch(status=True)` is sent to the status subresource (an IpNode's addresses);
    a plain patch to the object itself."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    both = {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Bound"}}
    await w.patch(IPCLAIMS, "c1", both)
    assert stored(api, IPCLAIMS, "c1")["metadata"]["labels"] == {"a": "b"}
    assert "status" not in stored(api, IPCLAIMS, "c1")
    both = {"metadata": {"labels": {"a": "c"}}, "status": {"phase": "Bound"}}
    out = await w.patch(IPCLAIMS, "c1", both, status=True)
    assert out["status"] == {"phase": "Bound"}
    assert out["metadata"]["labels"] == {"a": "b"}
    assert out == stored(api, IPCLAIMS, "c1")


# --- retries and backoff -----------------------------------------------------------------
class SleepRecorder:
    """Stands in for the writer module's `asyncio`: records the sleeps, does not sleep."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


async def test_retry_delays_double_from_backoff_initial_up_to_backoff_max_with_jitter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Retry n waits backoff_initial * 2**(n-1), capped at backoff_max, times a jitter
    factor 0.5 + random() (here random() = 0.25); each retry is counted and logged."""
    clock = SleepRecorder()
    monkeypatch.setattr(writer_module, "asyncio", clock)
    monkeypatch.setattr(writer_module, "random", SimpleNamespace(random=lambda: 0.25))
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.refuse["patch"] = [e503() for _ in range(4)]
    w = SerializedWriter(api, WriterSettings(backoff_initial=0.01, backoff_max=0.05))
    retries0 = count(WRITER_RETRIES, "ipclaims")
    with capture_logs() as logs:
        await w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}})
    assert clock.delays == pytest.approx([0.0075, 0.015, 0.03, 0.0375])
    assert count(WRITER_RETRIES, "ipclaims") - retries0 == 4
    retried = [e for e in logs if e["event"] == "write.retry"]
    assert retried == [
        {
            "event": "write.retry",
            "log_level": "info",
            "resource": "ipclaims",
            "attempt": n,
            "error": repr(e503()),
        }
        for n in (1, 2, 3, 4)
    ]
    assert api.calls.count("patch") == 5


def _n(api: FakeApi) -> int:
    return int(stored(api, IPCLAIMS, "c1")["spec"]["n"])


def _labels(api: FakeApi) -> Any:
    return stored(api, IPCLAIMS, "c1")["metadata"].get("labels")


RETRIED: dict[str, tuple[Any, Any]] = {
    # verb refused: (the writer's call, whether it took effect); c1 exists before, c2 not
    "get": (
        lambda w: w.update(IPCLAIMS, "c1", incr),
        lambda api: _n(api) == 1,
    ),
    "replace": (
        lambda w: w.update(IPCLAIMS, "c1", incr),
        lambda api: _n(api) == 1,
    ),
    "create": (
        lambda w: w.create(IPCLAIMS, claim("c2")),
        lambda api: ("ipclaims", "c2") in api.objects,
    ),
    "patch": (
        lambda w: w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}}),
        lambda api: _labels(api) == {"a": "b"},
    ),
    "delete": (
        lambda w: w.delete(IPCLAIMS, "c1"),
        lambda api: ("ipclaims", "c1") not in api.objects,
    ),
}


@pytest.mark.parametrize("verb", RETRIED)
async def test_every_request_is_retried_max_retries_times_then_its_error_surfaces(
    verb: str,
) -> None:
    """With max_retries=2: two 503s in a row are retried and the request lands on the third
    try; a third 503 is raised to the caller as is, after exactly three tries, and nothing
    is applied."""
    act, took_effect = RETRIED[verb]
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast(max_retries=2))
    api.refuse[verb] = [e503(), e503()]
    await act(w)
    assert took_effect(api)
    assert api.calls.count(verb) == 3

    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast(max_retries=2))
    refusals = [e503(), e503(), e503()]
    api.refuse[verb] = [*refusals, e503()]  # the fourth would be taken by a fourth try
    with pytest.raises(ServerError) as raised:
        await act(w)
    assert raised.value is refusals[2]
    assert not took_effect(api)
    assert api.calls.count(verb) == 3


# --- conflicts ---------------------------------------------------------------------------
@pytest.mark.parametrize("conflicts", [2, 3])
async def test_conflicts_are_reapplied_up_to_max_conflicts_then_conflict_is_raised(
    conflicts: int,
) -> None:
    """With max_conflicts=2, two 409s in a row are re-read and re-applied; a third is raised
    and nothing is written. Each 409 is counted."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.refuse["replace"] = [e409() for _ in range(conflicts)]
    w = SerializedWriter(api, fast(max_conflicts=2))
    conflicts0 = count(WRITER_CONFLICTS, "ipclaims")
    if conflicts <= 2:
        out = await w.update(IPCLAIMS, "c1", incr)
        assert out["spec"]["n"] == 1
        assert api.calls.count("replace") == conflicts + 1
    else:
        with pytest.raises(Conflict):
            await w.update(IPCLAIMS, "c1", incr)
        assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 0
        assert api.calls.count("replace") == 3
    assert api.calls.count("get") == 1 + min(conflicts, 2)  # one re-read per re-apply
    assert count(WRITER_CONFLICTS, "ipclaims") - conflicts0 == conflicts


# --- ambiguous updates -------------------------------------------------------------------
async def test_an_update_that_landed_despite_an_error_returns_what_was_stored() -> None:
    """A write applied but reported failed (503) is recognised by its write-id on the
    re-read; the caller gets the stored object, counted as one update."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    writes0 = count(WRITER_WRITES, "ipclaims", "update")
    api.fault_after = [e503()]
    out = await w.update(IPCLAIMS, "c1", incr)
    assert out == stored(api, IPCLAIMS, "c1")
    assert out["spec"]["n"] == 1
    assert api.calls == ["get", "replace", "get"]
    assert count(WRITER_WRITES, "ipclaims", "update") - writes0 == 1


async def test_a_status_write_that_landed_despite_an_error_is_known_by_its_status() -> None:
    """Status writes carry no write-id: after a 503 the re-read status equal to the one
    sent means it landed, so the mutation is not applied twice."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    api.fault_after = [e503()]
    out = await w.update_status(IPCLAIMS, "c1", incr_status)
    assert out == stored(api, IPCLAIMS, "c1")
    assert out["status"] == {"n": 1}
    assert WRITE_ID not in (out["metadata"].get("annotations") or {})
    assert api.calls == ["get", "replace_status", "get"]


async def test_a_refused_status_write_is_applied_again() -> None:
    """A status write refused before it was applied leaves a status unlike the one sent:
    not landed, so it is re-applied once."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    api.refuse["replace_status"] = [e503()]
    out = await w.update_status(IPCLAIMS, "c1", incr_status)
    assert out["status"] == {"n": 1}
    assert stored(api, IPCLAIMS, "c1")["status"] == {"n": 1}
    assert api.calls == ["get", "replace_status", "get", "replace_status"]


async def test_without_write_ids_nothing_is_stamped_and_a_refused_write_is_reapplied() -> None:
    """stamp_writes=False: no write-id annotation on updates or creates; a refused update
    is never taken as landed; a create that landed but was reported failed cannot be
    told from someone else's, so the retry's AlreadyExists is raised."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast(stamp_writes=False))
    api.refuse["replace"] = [e503()]
    out = await w.update(IPCLAIMS, "c1", incr)
    assert out["spec"]["n"] == 1
    assert api.calls.count("replace") == 2
    assert "annotations" not in stored(api, IPCLAIMS, "c1")["metadata"]

    created = await w.create(IPCLAIMS, claim("c2"))
    assert "annotations" not in created["metadata"]
    api.fault_after = [e503()]
    with pytest.raises(AlreadyExists):
        await w.create(IPCLAIMS, claim("c3"))
    assert "annotations" not in stored(api, IPCLAIMS, "c3")["metadata"]


# --- the body sent -----------------------------------------------------------------------
async def test_create_leaves_the_callers_body_alone_and_keeps_its_annotations() -> None:
    """The write-id is stamped on a copy: the caller's dict is unchanged, and the stored
    object has the body's own annotations besides the write-id."""
    api = ScopedApi()
    w = SerializedWriter(api, fast())
    body = claim()
    body["metadata"]["annotations"] = {"owner": "svc-a"}
    before = copy.deepcopy(body)
    out = await w.create(IPCLAIMS, body)
    assert body == before
    annotations = out["metadata"]["annotations"]
    assert annotations["owner"] == "svc-a"
    assert set(annotations) == {"owner", WRITE_ID}


async def test_a_first_try_already_exists_is_raised_without_a_reread() -> None:
    """With no earlier ambiguous failure, AlreadyExists can only be someone else's object:
    raised at once, without the GET that checks the write-id."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    with pytest.raises(AlreadyExists):
        await w.create(IPCLAIMS, claim())
    assert api.calls == ["create"]


# --- the lane memo -----------------------------------------------------------------------
async def test_a_write_queued_behind_a_create_or_update_starts_from_what_was_stored() -> None:
    """The lane remembers what its last write returned: an update queued behind a create,
    or a status update behind an update, needs no GET."""
    api = ScopedApi()
    w = SerializedWriter(api, fast())
    await asyncio.gather(w.create(IPCLAIMS, claim()), w.update(IPCLAIMS, "c1", incr))
    assert api.calls == ["create", "replace"]
    assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 1

    api.calls.clear()
    await asyncio.gather(
        w.update(IPCLAIMS, "c1", incr), w.update_status(IPCLAIMS, "c1", incr_status)
    )
    assert api.calls == ["get", "replace", "replace_status"]
    assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 2


async def test_an_update_that_changes_nothing_leaves_its_copy_for_the_next_write() -> None:
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    await asyncio.gather(
        w.update(IPCLAIMS, "c1", lambda o: None), w.update_status(IPCLAIMS, "c1", incr_status)
    )
    assert api.calls == ["get", "replace_status"]


async def test_an_update_queued_behind_a_delete_finds_the_object_gone() -> None:
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    results = await asyncio.gather(
        w.delete(IPCLAIMS, "c1"), w.update(IPCLAIMS, "c1", incr), return_exceptions=True
    )
    assert results[0] is True
    assert isinstance(results[1], NotFound)


async def test_an_update_queued_behind_a_patch_starts_from_a_fresh_read() -> None:
    """A patch's answer is not kept as the lane's copy: the update re-reads, sees the patch
    and keeps it."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    await asyncio.gather(
        w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}}),
        w.update(IPCLAIMS, "c1", incr),
    )
    obj = stored(api, IPCLAIMS, "c1")
    assert obj["spec"]["n"] == 1 and obj["metadata"]["labels"] == {"a": "b"}
    assert api.calls == ["patch", "get", "replace"]


async def test_after_an_update_lost_its_object_the_next_write_reads_again() -> None:
    """An update that met a Conflict and then found the object deleted fails with NotFound,
    and so does the status update queued behind it (it does not start from a stale copy)."""

    class VanishingApi(ScopedApi):
        async def replace(self, ref: Any, obj: Obj, *, status: bool = False) -> Obj:
            self.put(IPCLAIMS, {**self.objects[("ipclaims", "c1")], "spec": {"n": 9}})
            try:
                return await super().replace(ref, obj, status=status)
            finally:
                self.remove(IPCLAIMS, "c1")

    api = VanishingApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    results = await asyncio.gather(
        w.update(IPCLAIMS, "c1", incr),
        w.update_status(IPCLAIMS, "c1", incr_status),
        return_exceptions=True,
    )
    assert [type(r) for r in results] == [NotFound, NotFound]
    assert api.calls == ["get", "replace", "get", "get"]


# --- coalescing --------------------------------------------------------------------------
async def test_two_queued_updates_are_one_write_counted_as_one_coalesced() -> None:
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    w = SerializedWriter(api, fast())
    coalesced0 = count(WRITER_COALESCED, "ipclaims")
    await asyncio.gather(w.update(IPCLAIMS, "c1", incr), w.update(IPCLAIMS, "c1", incr))
    assert count(WRITER_COALESCED, "ipclaims") - coalesced0 == 1
    assert api.calls == ["get", "replace"]
    assert stored(api, IPCLAIMS, "c1")["spec"]["n"] == 2


async def test_a_withdrawn_update_does_not_cancel_the_writes_queued_behind_it() -> None:
    """Cancelling a caller whose update has not started withdraws only that update: the
    delete queued behind it still runs."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.hold = {"c1"}
    w = SerializedWriter(api, fast())
    first = asyncio.create_task(w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}}))
    await api.held.wait()
    withdrawn = asyncio.create_task(w.update(IPCLAIMS, "c1", incr))
    deleted = asyncio.create_task(w.delete(IPCLAIMS, "c1"))
    await asyncio.sleep(0)
    assert w.pending == 2
    withdrawn.cancel()
    api.release.set()
    async with asyncio.timeout(2):
        results = await asyncio.gather(first, withdrawn, deleted, return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert results[2] is True
    assert api.calls == ["patch", "delete"]


# --- shutdown ----------------------------------------------------------------------------
async def test_a_new_writer_is_open() -> None:
    assert SerializedWriter(ScopedApi(), fast()).closed is False


async def test_a_lane_runs_as_a_task_named_after_its_object_and_ends_cleanly() -> None:
    """A task dump names the object whose write is stuck ("writer-<name>"); once its queue
    is empty the lane's task ends without an error (nothing for asyncio to report)."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.hold = {"c1"}
    w = SerializedWriter(api, fast())
    write = asyncio.create_task(w.update(IPCLAIMS, "c1", incr))
    await api.held.wait()
    lanes = [t for t in asyncio.all_tasks() if t.get_name() == "writer-c1"]
    assert len(lanes) == 1
    api.release.set()
    await write
    async with asyncio.timeout(2):
        await lanes[0]  # raises what the task raised
    assert lanes[0].exception() is None


async def test_drain_returns_quietly_when_close_cancels_the_lanes_it_waits_for() -> None:
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.hold = {"c1"}
    w = SerializedWriter(api, fast())
    write = asyncio.create_task(w.update(IPCLAIMS, "c1", incr))
    await api.held.wait()
    drainer = asyncio.create_task(w.drain())
    await asyncio.sleep(0)
    async with asyncio.timeout(2):
        await w.close()
        results = await asyncio.gather(drainer, write, return_exceptions=True)
    assert results[0] is None
    assert isinstance(results[1], asyncio.CancelledError)


async def test_close_returns_only_once_every_lane_has_stopped() -> None:
    """When close() returns, the request in flight has been abandoned and the queued write
    withdrawn: nothing of the writer still runs."""
    api = ScopedApi()
    api.put(IPCLAIMS, claim())
    api.hold = {"c1"}
    w = SerializedWriter(api, fast())
    in_flight = asyncio.create_task(w.update(IPCLAIMS, "c1", incr))
    await api.held.wait()
    queued = asyncio.create_task(w.delete(IPCLAIMS, "c1"))
    await asyncio.sleep(0)
    assert w.pending == 1
    await w.close()
    assert api.abandoned == ["c1"]
    assert w.pending == 0
    results = await asyncio.gather(in_flight, queued, return_exceptions=True)
    assert [type(r) for r in results] == [asyncio.CancelledError, asyncio.CancelledError]


# --- what is counted ---------------------------------------------------------------------
async def test_every_write_that_lands_is_counted_once_under_its_resource_and_verb() -> None:
    """eipctl_writer_writes{resource, verb}: creates (also one found again after an
    ambiguous failure), updates, status updates, patches and deletes; a delete of an object
    already gone is no write."""
    api = ScopedApi()
    w = SerializedWriter(api, fast())
    verbs = ("create", "update", "update_status", "patch", "delete")
    before = {v: count(WRITER_WRITES, "ipclaims", v) for v in verbs}
    await w.create(IPCLAIMS, claim())
    api.fault_after = [e503()]
    await w.create(IPCLAIMS, claim("c2"))
    await w.update(IPCLAIMS, "c1", incr)
    await w.update_status(IPCLAIMS, "c1", incr_status)
    await w.patch(IPCLAIMS, "c1", {"metadata": {"labels": {"a": "b"}}})
    assert await w.delete(IPCLAIMS, "c1") is True
    assert await w.delete(IPCLAIMS, "c1") is False
    after = {v: count(WRITER_WRITES, "ipclaims", v) - before[v] for v in verbs}
    assert after == {"create": 2, "update": 1, "update_status": 1, "patch": 1, "delete": 1}
