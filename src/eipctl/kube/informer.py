"""List+watch informer: a local cache kept equal to the server, and change notifications.

It lists, then watches from the list's resourceVersion with bookmarks so a quiet stream
still advances its RV. A dropped stream resumes from the last RV seen; a 410 Gone relists
and emits only the difference against the cache (adds, updates, deletes of vanished
objects), so handlers see every object's final state without a blind replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import Any, Protocol

import structlog

from eipctl.core.fields import labels_of
from eipctl.kube.client import Obj, ObjectList, ResourceRef, WatchEvent, object_key
from eipctl.kube.compact import compact
from eipctl.kube.errors import ApiError, Gone
from eipctl.kube.metrics import WATCH_RELISTS, WATCH_RESTARTS

log = structlog.get_logger(__name__)

IndexFunc = Callable[[Obj], Iterable[str]]


class ListWatchApi(Protocol):
    """The two verbs an informer needs (`KubeApi` satisfies it; tests pass fakes)."""

    async def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList: ...

    def watch(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[WatchEvent, None]: ...


class EventHandler(Protocol):
    """Called synchronously from the informer task, after the cache is updated. Be quick."""

    def on_add(self, obj: Obj) -> None: ...
    def on_update(self, old: Obj, new: Obj) -> None: ...
    def on_delete(self, obj: Obj) -> None: ...


class KeyHandler:
    """Adapts a `key -> None` callback (typically `WorkQueue.add`) to `EventHandler`."""

    def __init__(self, fn: Callable[[str], None]) -> None:
        self._fn = fn

    def on_add(self, obj: Obj) -> None:
        self._fn(object_key(obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        self._fn(object_key(new))

    def on_delete(self, obj: Obj) -> None:
        self._fn(object_key(obj))


ChangeFunc = Callable[[Obj | None, Obj | None], None]
"""``fn(old, new)``: old None = added, new None = deleted."""


class ChangeHandler:
    """Adapts a `ChangeFunc` to `EventHandler`."""

    def __init__(self, fn: ChangeFunc) -> None:
        self._fn = fn

    def on_add(self, obj: Obj) -> None:
        self._fn(None, obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._fn(old, new)

    def on_delete(self, obj: Obj) -> None:
        self._fn(obj, None)


def index_by_label(label: str) -> IndexFunc:
    """An index function: the object's value for `label` (e.g. claims by node)."""

    def fn(obj: Obj) -> Iterable[str]:
        value = labels_of(obj).get(label)
        return [value] if value else []

    return fn


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


class Informer:
    """Cache + notifications for one resource (optionally one namespace / label selector).

    Objects handed out are the cache's own dicts: treat them as read-only (the writer
    deep-copies before mutating).
    """

    def __init__(
        self,
        api: ListWatchApi,
        ref: ResourceRef,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
        watch_timeout: int = 300,
        backoff_initial: float = 0.05,
        backoff_max: float = 5.0,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.api = api
        self.transform = transform
        """Applied to every object before it is cached or handed to a handler: keep only what
        the caller reads (it must keep metadata.name, namespace and resourceVersion)."""
        self.ref = ref
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout = watch_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._indexers = dict(indexers or {})
        self._cache: dict[str, Obj] = {}
        self._index: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._indexed: dict[str, dict[str, tuple[str, ...]]] = {n: {} for n in self._indexers}
        self._handlers: list[EventHandler] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.resource_version = ""
        self._log = log.bind(resource=ref.plural, selector=label_selector)

    # --- reading ------------------------------------------------------------------------
    @property
    def has_synced(self) -> bool:
        """True once the first list is in the cache (start workers only after that)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Until the first list is in the cache (wrap in `asyncio.timeout` to bound it)."""
        await self._synced.wait()

    def get(self, key: str) -> Obj | None:
        return self._cache.get(key)

    def objects(self) -> list[Obj]:
        return list(self._cache.values())

    def keys(self) -> list[str]:
        return list(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def by_index(self, index: str, value: str) -> list[Obj]:
        """Objects whose index function yields `value` (e.g. claims on node "n1")."""
        return [self._cache[k] for k in self._index[index].get(value, ())]

    def index_keys(self, index: str, value: str) -> list[str]:
        return sorted(self._index[index].get(value, ()))

    def index_count(self, index: str, value: str) -> int:
        """How many objects `by_index` would return, without listing them."""
        return len(self._index[index].get(value, ()))

    # --- subscribing --------------------------------------------------------------------
    def add_handler(self, handler: EventHandler) -> None:
        """Subscribe; a late subscriber first gets an add for every cached object."""
        self._handlers.append(handler)
        for obj in list(self._cache.values()):
            self._call(handler.on_add, obj)

    def add_key_handler(self, fn: Callable[[str], None]) -> None:
        self.add_handler(KeyHandler(fn))

    def add_change_handler(self, fn: ChangeFunc) -> None:
        self.add_handler(ChangeHandler(fn))

    # --- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.ref.plural}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def run(self) -> None:
        """List and watch forever (until cancelled), healing drops and 410s."""
        rv: str | None = None
        failures = 0
        watches = 0
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            got_events = False
            try:
                if rv is None:
                    if self._synced.is_set():
                        WATCH_RELISTS.labels(self.ref.plural).inc()
                    rv = await self._relist()
                if watches:
                    WATCH_RESTARTS.labels(self.ref.plural).inc()
                watches += 1
                started = loop.time()
                stream = self.api.watch(
                    self.ref,
                    self.namespace,
                    resource_version=rv,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    timeout_seconds=self.watch_timeout,
                )
                async with contextlib.aclosing(stream):  # close the HTTP stream on cancel too
                    async for ev in stream:
                        got_events = True
                        rv = self._apply(ev) or rv
                        self.resource_version = rv
                failures = 0  # clean end of stream: resume at once
            except Gone:
                self._log.info("watch.gone_relist", rv=rv)
                rv = None
                failures = 0
            except Exception as exc:  # ApiError mostly; anything else must not kill the loop
                if got_events or loop.time() - started > 1.0:
                    failures = 0
                failures += 1
                delay = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
                delay *= 0.5 + random.random()
                level = self._log.info if isinstance(exc, ApiError) else self._log.exception
                level("watch_retry", error=repr(exc), delay=round(delay, 3))
                await asyncio.sleep(delay)

    # --- internals ----------------------------------------------------------------------
    async def _relist(self) -> str:
        lst = await self.api.list(
            self.ref,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        items = lst.items if self.transform is None else [self.transform(o) for o in lst.items]
        fresh = {object_key(o): o for o in items}
        adds = updates = deletes = 0
        for key in [k for k in self._cache if k not in fresh]:
            old = self._remove(key)
            deletes += 1
            self._emit_delete(old)
        for key, listed in fresh.items():
            old_obj = self._cache.get(key)
            if old_obj is None:
                adds += 1
                self._emit_add(self._put(key, listed))
            elif _rv(old_obj) != _rv(listed):
                updates += 1
                self._emit_update(old_obj, self._put(key, listed))
        self.resource_version = lst.resource_version
        self._synced.set()
        self._log.info(
            "informer.listed",
            objects=len(fresh),
            rv=lst.resource_version,
            adds=adds,
            updates=updates,
            deletes=deletes,
        )
        return lst.resource_version

    def _apply(self, ev: WatchEvent) -> str:
        obj = ev.object
        rv = _rv(obj)
        if ev.type == "BOOKMARK":
            return rv
        if self.transform is not None:
            obj = self.transform(obj)
        key = object_key(obj)
        old = self._cache.get(key)
        if ev.type == "DELETED":
            if old is not None:
                self._remove(key)
                self._emit_delete(obj)
        elif ev.type in ("ADDED", "MODIFIED"):
            obj = self._put(key, obj)
            if old is None:
                self._emit_add(obj)
            elif _rv(old) != rv:
                self._emit_update(old, obj)
        return rv

    def _put(self, key: str, obj: Obj) -> Obj:
        """Cache ``obj`` (its strings shared: `compact`) and index it; the cached copy."""
        obj = compact(obj)
        self._cache[key] = obj
        for name, fn in self._indexers.items():
            new_vals = tuple(fn(obj))
            old_vals = self._indexed[name].get(key, ())
            if new_vals == old_vals:
                continue
            self._unindex(name, key, old_vals)
            for v in new_vals:
                self._index[name].setdefault(v, set()).add(key)
            self._indexed[name][key] = new_vals
        return obj

    def _remove(self, key: str) -> Obj:
        obj = self._cache.pop(key)
        for name in self._indexers:
            self._unindex(name, key, self._indexed[name].pop(key, ()))
        return obj

    def _unindex(self, name: str, key: str, values: tuple[str, ...]) -> None:
        idx = self._index[name]
        for v in values:
            keys = idx.get(v)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del idx[v]

    def _emit_add(self, obj: Obj) -> None:
        for h in self._handlers:
            self._call(h.on_add, obj)

    def _emit_update(self, old: Obj, new: Obj) -> None:
        for h in self._handlers:
            self._call(h.on_update, old, new)

    def _emit_delete(self, obj: Obj) -> None:
        for h in self._handlers:
            self._call(h.on_delete, obj)

    def _call(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            self._log.exception("informer.handler_failed", handler=repr(fn))
