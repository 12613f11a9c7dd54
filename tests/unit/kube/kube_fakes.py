"""An in-memory API with the semantics the machinery depends on, for fast unit tests."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncGenerator
from typing import Any

from eipctl.kube.client import Obj, ObjectList, ResourceRef, WatchEvent, object_key
from eipctl.kube.errors import ApiError, error_for


def _err(status: int, reason: str) -> ApiError:
    return error_for(status, json.dumps({"reason": reason, "message": reason}))


class FakeApi:
    """One resource store shared by all refs; RVs are a global counter, like etcd's."""

    def __init__(self, history: int = 10_000) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}  # (plural, key) -> obj
        self.rv = 0
        self.history: list[tuple[int, str, str, Obj]] = []  # (rv, plural, type, obj)
        self.history_limit = history
        self.faults: list[ApiError] = []  # raised (one each) by the next calls
        self.fault_after: list[ApiError] = []  # applied, then raised (ambiguous failures)
        self.calls: list[str] = []
        self._changed = asyncio.Condition()
        self.drop_watches = 0  # bumping it ends open streams
        self.gone_before = 0  # watches from an RV below this get 410

    def _fault(self, verb: str) -> None:
        self.calls.append(verb)
        if self.faults:
            raise self.faults.pop(0)

    def _bump(self, plural: str, typ: str, obj: Obj) -> None:
        self.history.append((self.rv, plural, typ, copy.deepcopy(obj)))
        del self.history[: -self.history_limit]
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def put(self, ref: ResourceRef, obj: Obj) -> Obj:
        """Direct store write (a 'rogue' writer / test setup), no faults."""
        obj = copy.deepcopy(obj)
        key = object_key(obj)
        self.rv += 1
        typ = "MODIFIED" if (ref.plural, key) in self.objects else "ADDED"
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[(ref.plural, key)] = obj
        self._bump(ref.plural, typ, obj)
        return copy.deepcopy(obj)

    def remove(self, ref: ResourceRef, key: str) -> None:
        obj = self.objects.pop((ref.plural, key))
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self._bump(ref.plural, "DELETED", obj)

    async def get(
        self, ref: ResourceRef, name: str, namespace: str | None = None, *, status: bool = False
    ) -> Obj:
        await asyncio.sleep(0)
        self._fault("get")
        key = f"{namespace}/{name}" if namespace else name
        obj = self.objects.get((ref.plural, key))
        if obj is None:
            raise _err(404, "NotFound")
        return copy.deepcopy(obj)

    async def list(self, ref: ResourceRef, namespace: str | None = None, **_: Any) -> ObjectList:
        await asyncio.sleep(0)
        self._fault("list")
        items = [copy.deepcopy(o) for (p, _k), o in self.objects.items() if p == ref.plural]
        return ObjectList(items, str(self.rv))

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        await asyncio.sleep(0)
        self._fault("create")
        if (ref.plural, object_key(obj)) in self.objects:
            raise _err(409, "AlreadyExists")
        stored = self.put(ref, obj)
        self._fault_after()
        return stored

    def _fault_after(self) -> None:
        if self.fault_after:
            raise self.fault_after.pop(0)

    async def replace(self, ref: ResourceRef, obj: Obj, *, status: bool = False) -> Obj:
        await asyncio.sleep(0)
        self._fault("replace_status" if status else "replace")
        key = object_key(obj)
        cur = self.objects.get((ref.plural, key))
        if cur is None:
            raise _err(404, "NotFound")
        if obj["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
            raise _err(409, "Conflict")
        if status:
            new = {**copy.deepcopy(cur), "status": copy.deepcopy(obj.get("status"))}
        else:
            new = {**copy.deepcopy(obj), "status": copy.deepcopy(cur.get("status"))}
            if new["status"] is None:
                del new["status"]
        stored = self.put(ref, new)
        self._fault_after()
        return stored

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        namespace: str | None = None,
        *,
        status: bool = False,
    ) -> Obj:
        await asyncio.sleep(0)
        self._fault("patch")
        key = f"{namespace}/{name}" if namespace else name
        cur = self.objects.get((ref.plural, key))
        if cur is None:
            raise _err(404, "NotFound")
        return self.put(ref, _merge(copy.deepcopy(cur), patch))

    async def delete(
        self, ref: ResourceRef, name: str, namespace: str | None = None, **_: Any
    ) -> Obj:
        await asyncio.sleep(0)
        self._fault("delete")
        key = f"{namespace}/{name}" if namespace else name
        if (ref.plural, key) not in self.objects:
            raise _err(404, "NotFound")
        self.remove(ref, key)
        return {}

    async def watch(
        self, ref: ResourceRef, namespace: str | None = None, *, resource_version: str, **_: Any
    ) -> AsyncGenerator[WatchEvent, None]:
        self._fault("watch")
        rv = int(resource_version or 0)
        if rv < self.gone_before or (self.history and rv < self.history[0][0] - 1):
            raise _err(410, "Expired")
        drops = self.drop_watches
        while True:
            for hrv, plural, typ, obj in list(self.history):
                if hrv > rv:
                    rv = hrv
                    if plural == ref.plural:
                        yield WatchEvent(typ, copy.deepcopy(obj))
            async with self._changed:
                if self.drop_watches != drops:
                    return
                if self.rv <= rv:
                    await self._changed.wait()
            if self.drop_watches != drops:
                return

    async def kick(self) -> None:
        """End all open watch streams."""
        self.drop_watches += 1
        await self._notify()


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge(target.get(k), v)
    return target
