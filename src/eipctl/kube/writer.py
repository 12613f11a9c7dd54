"""Queue-serialized API writes: one lane per object, mutations re-applied on conflict.

Every write to an object goes through that object's lane, so this process never races
itself. An update is a *mutation function*, applied to the freshest copy we know and sent
with that copy's resourceVersion; on 409 Conflict we re-read and re-apply, so nobody's
change is lost. Mutations queued behind one another on a lane are folded into one write.

Ambiguous failures (5xx, 429, transport errors after the request may have been applied)
could make a blind retry apply a mutation twice: after one, the writer re-reads and asks
`write_ids.landed` whether the write it sent is already there.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import structlog

from eipctl.core.fields import Mutation
from eipctl.kube.client import Obj, ResourceRef
from eipctl.kube.errors import AlreadyExists, ApiError, Conflict, NotFound, is_retryable
from eipctl.kube.metrics import WRITER_COALESCED, WRITER_CONFLICTS, WRITER_RETRIES, WRITER_WRITES
from eipctl.kube.verbs import Creates, Deletes, Gets, Patches, Replaces
from eipctl.kube.write_ids import landed, stamp, wants_stamp

log = structlog.get_logger(__name__)


class ObjectApi(Gets, Creates, Replaces, Patches, Deletes, Protocol):
    """The verbs the writer needs (`KubeApi` satisfies it; tests pass fakes)."""


class CacheReader(Protocol):
    """Where the writer looks for a fresh copy first (an `Informer`), keyed by object key."""

    def get(self, key: str) -> Obj | None: ...


LaneKey = tuple[ResourceRef, str | None, str]
OpKind = Literal["update", "create", "delete", "patch"]


@dataclass
class _Op:
    kind: OpKind
    future: asyncio.Future[Any]
    mutate: Mutation | None = None
    status: bool = False
    body: Obj | None = None
    resource_version: str | None = None


@dataclass
class _Lane:
    ops: deque[_Op] = field(default_factory=deque)
    memo: Obj | None = None  # what our last write returned: usually the freshest copy
    batch: list[_Op] = field(default_factory=list)  # being written now


@dataclass
class WriterSettings:
    max_conflicts: int = 100
    """Re-read-and-re-apply rounds before giving up on a batch (Conflict raised)."""
    max_retries: int = 12
    """Retries of retryable errors (5xx, 429, transport) before failing the batch."""
    backoff_initial: float = 0.02
    backoff_max: float = 2.0
    max_in_flight: int = 32
    """API requests in flight across all lanes."""
    stamp_writes: bool = True
    """Carry the write-id annotation that makes retries after ambiguous failures exact."""


class SerializedWriter:
    """All writes of this process; see the module docstring for the guarantees."""

    def __init__(self, api: ObjectApi, settings: WriterSettings | None = None) -> None:
        self.api = api
        self.settings = settings or WriterSettings()
        self._lanes: dict[LaneKey, _Lane] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._caches: dict[ResourceRef, CacheReader] = {}
        self._sem = asyncio.Semaphore(self.settings.max_in_flight)
        self._closed = False

    def use_cache(self, ref: ResourceRef, cache: CacheReader) -> None:
        """Start updates of `ref` objects from this cache's copy instead of a GET."""
        self._caches[ref] = cache

    # --- public verbs -------------------------------------------------------------------
    async def update(
        self,
        ref: ResourceRef,
        name: str,
        mutate: Mutation,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> Obj:
        """Apply `mutate` to the object (or its status subresource); returns what was stored.

        Raises NotFound if the object does not exist; no write is sent if nothing changed.
        Cancelling the caller withdraws the mutation only if its write has not started.
        """
        return await self._submit(ref, namespace, name, _Op("update", _fut(), mutate, status))  # type: ignore[no-any-return]

    async def update_status(
        self, ref: ResourceRef, name: str, mutate: Mutation, *, namespace: str | None = None
    ) -> Obj:
        return await self.update(ref, name, mutate, namespace=namespace, status=True)

    async def create(self, ref: ResourceRef, obj: Obj) -> Obj:
        """Create `obj`; AlreadyExists means someone else holds the name (a reservation)."""
        meta = obj.get("metadata") or {}
        op = _Op("create", _fut(), body=obj)
        return await self._submit(ref, meta.get("namespace"), meta["name"], op)  # type: ignore[no-any-return]

    async def delete(
        self,
        ref: ResourceRef,
        name: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete; True if this call deleted it, False if it was already gone."""
        op = _Op("delete", _fut(), resource_version=resource_version)
        return await self._submit(ref, namespace, name, op)  # type: ignore[no-any-return]

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        status: bool = False,
    ) -> Obj:
        """Merge-patch without a precondition, in lane order (for idempotent, blind sets)."""
        op = _Op("patch", _fut(), status=status, body=patch)
        return await self._submit(ref, namespace, name, op)  # type: ignore[no-any-return]

    async def drain(self) -> None:
        """Wait until every submitted write has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Cancel every lane and wait until they have stopped; later writes are refused.

        For a process that must stop acting at once (a lost Lease): writes not yet sent are
        withdrawn, and a write already sent is abandoned - it may or may not land, which
        resourceVersion preconditions make safe, and the next reader sees what happened.
        Every caller still waiting, and every later caller, gets `asyncio.CancelledError`.
        """
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending(self) -> int:
        return sum(len(lane.ops) for lane in self._lanes.values())

    # --- lanes --------------------------------------------------------------------------
    async def _submit(self, ref: ResourceRef, ns: str | None, name: str, op: _Op) -> Any:
        if self._closed:
            op.future.cancel()
            return await op.future
        key: LaneKey = (ref, ns if ref.namespaced else None, name)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
            task = asyncio.create_task(self._run_lane(key, lane), name=f"writer-{name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        lane.ops.append(op)
        return await op.future

    async def _run_lane(self, key: LaneKey, lane: _Lane) -> None:
        try:
            while lane.ops:
                batch = [lane.ops.popleft()]
                if batch[0].kind == "update":
                    while (
                        lane.ops
                        and lane.ops[0].kind == "update"
                        and lane.ops[0].status == batch[0].status
                    ):
                        batch.append(lane.ops.popleft())
                batch = [op for op in batch if not op.future.done()]
                if not batch:
                    continue
                if len(batch) > 1:
                    WRITER_COALESCED.labels(key[0].plural).inc(len(batch) - 1)
                lane.batch = batch
                try:
                    await self._execute(key, lane, batch)
                except Exception as exc:
                    for op in batch:
                        if not op.future.done():
                            op.future.set_exception(exc)
                lane.batch = []
        finally:
            del self._lanes[key]
            for op in (*lane.batch, *lane.ops):  # only when cancelled
                op.future.cancel()

    async def _call(self, coro_fn: Callable[[], Any]) -> Any:
        async with self._sem:
            return await coro_fn()

    async def _backoff(self, ref: ResourceRef, attempt: int, exc: Exception) -> None:
        if attempt > self.settings.max_retries:
            raise exc
        WRITER_RETRIES.labels(ref.plural).inc()
        delay = min(self.settings.backoff_max, self.settings.backoff_initial * 2 ** (attempt - 1))
        log.info("write.retry", resource=ref.plural, attempt=attempt, error=repr(exc))
        await asyncio.sleep(delay * (0.5 + random.random()))

    async def _execute(self, key: LaneKey, lane: _Lane, batch: list[_Op]) -> None:
        ref, ns, name = key
        kind = batch[0].kind
        if kind == "update":
            result: Any = await self._update(key, lane, batch)
        elif kind == "create":
            result = await self._create(ref, batch[0].body or {})
            lane.memo = result
        elif kind == "delete":
            result = await self._delete(ref, ns, name, batch[0].resource_version)
            lane.memo = None
        else:
            body = batch[0].body or {}
            result = await self._retrying(
                ref, lambda: self.api.patch(ref, name, body, ns, status=batch[0].status)
            )
            WRITER_WRITES.labels(ref.plural, "patch").inc()
            lane.memo = None
        for op in batch:
            if not op.future.done():
                op.future.set_result(result)

    async def _retrying(self, ref: ResourceRef, fn: Callable[[], Any]) -> Any:
        attempt = 0
        while True:
            try:
                return await self._call(fn)
            except ApiError as exc:
                if not is_retryable(exc):
                    raise
                attempt += 1
                await self._backoff(ref, attempt, exc)

    async def _fresh(self, key: LaneKey, lane: _Lane) -> Obj:
        ref, ns, name = key
        if lane.memo is not None:
            return lane.memo
        cache = self._caches.get(ref)
        if cache is not None:
            cached = cache.get(f"{ns}/{name}" if ns else name)
            if cached is not None:
                return cached
        return await self._reread(key)  # type: ignore[no-any-return]

    async def _reread(self, key: LaneKey) -> Any:
        ref, ns, name = key
        return await self._retrying(ref, lambda: self.api.get(ref, name, ns))

    async def _update(self, key: LaneKey, lane: _Lane, batch: list[_Op]) -> Obj:
        ref = key[0]
        status = batch[0].status
        base = await self._fresh(key, lane)
        conflicts = attempts = 0
        unsure: list[tuple[Obj, str]] = []  # writes whose fate an error left unknown
        while True:
            done = next((s for s, wid in unsure if landed(base, s, wid, status=status)), None)
            if done is not None:
                stored = base
                break
            obj = copy.deepcopy(base)
            for op in list(batch):
                assert op.mutate is not None
                try:
                    obj = op.mutate(obj) or obj
                except Exception as exc:
                    if not op.future.done():
                        op.future.set_exception(exc)
                    batch.remove(op)
            if obj == base or not batch:
                lane.memo = base
                return base
            stamped = not status and self.settings.stamp_writes and wants_stamp(base, obj)
            write_id = stamp(obj) if stamped else ""
            try:
                stored = await self._call(
                    functools.partial(self.api.replace, ref, obj, status=status)
                )
                break
            except Conflict:
                conflicts += 1
                WRITER_CONFLICTS.labels(ref.plural).inc()
                if conflicts > self.settings.max_conflicts:
                    raise
            except ApiError as exc:
                if not is_retryable(exc):
                    raise
                unsure.append((obj, write_id))
                attempts += 1
                await self._backoff(ref, attempts, exc)
            lane.memo = None
            base = await self._reread(key)
        WRITER_WRITES.labels(ref.plural, "update_status" if status else "update").inc()
        lane.memo = stored
        return stored

    async def _create(self, ref: ResourceRef, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        write_id = stamp(obj) if self.settings.stamp_writes else ""
        ambiguous = False
        attempts = 0
        while True:
            try:
                stored: Obj = await self._call(lambda: self.api.create(ref, obj))
                WRITER_WRITES.labels(ref.plural, "create").inc()
                return stored
            except AlreadyExists as taken:
                if ambiguous and write_id:
                    ns = meta.get("namespace") if ref.namespaced else None
                    try:
                        current: Obj = await self._reread((ref, ns, meta["name"]))
                    except NotFound:
                        # gone since: ours deleted, or theirs; the caller decides again
                        raise taken from None
                    if landed(current, obj, write_id):
                        WRITER_WRITES.labels(ref.plural, "create").inc()
                        return current
                raise
            except ApiError as exc:
                if not is_retryable(exc):
                    raise
                ambiguous = True
                attempts += 1
                await self._backoff(ref, attempts, exc)

    async def _delete(self, ref: ResourceRef, ns: str | None, name: str, rv: str | None) -> bool:
        try:
            await self._retrying(ref, lambda: self.api.delete(ref, name, ns, resource_version=rv))
        except NotFound:
            return False
        WRITER_WRITES.labels(ref.plural, "delete").inc()
        return True


def _fut() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()
