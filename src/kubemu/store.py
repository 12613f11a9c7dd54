"""The store as tests and the sandbox see it: group/plural addressing, copies in and out.

srv.store.get("eipctl.io", "ipclaims", "203-0-113-7")
srv.store.get("", "services", "web", "default")
"""

from __future__ import annotations

import copy
from typing import Any

from .engine import Engine, ObjList
from .errors import ApiError
from .patching import merge_patch
from .resources import ResourceType

Obj = dict[str, Any]


class Store(Engine):
    """Every write goes through the same rules and events as an HTTP write would."""

    def _type(self, group: str, plural: str) -> ResourceType:
        rt = self.registry.by_storage_key((group, plural))
        if rt is None:
            raise ApiError(404, f"no resource {plural}.{group} is served", "NotFound")
        return rt

    def get(self, group: str, plural: str, name: str, namespace: str = "") -> Obj:
        """A copy of one object; raises ApiError(404) when missing."""
        return copy.deepcopy(self.get_object(self._type(group, plural), namespace, name))

    def find(self, group: str, plural: str, name: str, namespace: str = "") -> Obj | None:
        """A copy of one object, or None."""
        try:
            return self.get(group, plural, name, namespace)
        except ApiError:
            return None

    def list(self, group: str, plural: str, namespace: str | None = None) -> ObjList:
        """Copies of every object of a resource (in one namespace, or all)."""
        objs = self.list_objects(self._type(group, plural), namespace or None, None)
        return [copy.deepcopy(o) for o in objs]

    def scan(self, group: str, plural: str, namespace: str | None = None) -> ObjList:
        """The stored objects themselves, not copies: read them, never change them.

        For observers that only count or compare, where `list` would copy every object on
        the server's own loop: a benchmark polling 10,000 claims every 0.2 s with `list`
        held the loop for most of the time, and every client's requests (Lease renewals
        among them) waited behind it."""
        return self.list_objects(self._type(group, plural), namespace or None, None)

    def create(self, group: str, plural: str, obj: Obj, namespace: str = "") -> Obj:
        """Create as a client would (server-set fields filled in); returns a copy."""
        rt = self._type(group, plural)
        return copy.deepcopy(self.create_object(rt, namespace, copy.deepcopy(obj)))

    def update(self, group: str, plural: str, obj: Obj, status: bool = False) -> Obj:
        """Replace as a client would (409 on stale resourceVersion); returns a copy."""
        rt = self._type(group, plural)
        meta = obj.get("metadata") or {}
        out = self.update_object(
            rt,
            meta.get("namespace", ""),
            meta.get("name", ""),
            copy.deepcopy(obj),
            subresource="status" if status else None,
        )
        return copy.deepcopy(out)

    def delete(self, group: str, plural: str, name: str, namespace: str = "") -> Obj:
        """Delete as a client would (finalizers honoured); returns a copy."""
        return copy.deepcopy(self.delete_object(self._type(group, plural), namespace, name))

    def patch(
        self,
        group: str,
        plural: str,
        name: str,
        patch: Obj,
        *,
        namespace: str = "",
        status: bool = False,
    ) -> Obj:
        """JSON merge patch (on /status with status=True); returns a copy."""
        rt = self._type(group, plural)
        current = self.get_object(rt, namespace, name)
        patched = copy.deepcopy(merge_patch(current, patch))
        patched["metadata"].setdefault("resourceVersion", current["metadata"]["resourceVersion"])
        out = self.update_object(
            rt,
            namespace,
            name,
            patched,
            subresource="status" if status else None,
            from_patch=True,
        )
        return copy.deepcopy(out)
