"""The storage engine: one global revision (like etcd's), a bounded history, and the watchers.

Every write is synchronous and bumps `revision` once, so the order of events is the order
of revisions, and a watch from revision R replays exactly the events after R.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from . import crd_deletion, errors, strategies
from .hub import WatchHub
from .identity import Authorizer
from .plugins import Plugins
from .preconditions import check_delete_preconditions, check_update_preconditions
from .resources import CRD_KEY, Registry, ResourceType
from .selectors import Predicate
from .system_fields import fill_name, now_rfc3339, replacement, stamp_created
from .watch import Event, Watcher

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
ObjList = list[Obj]  # aliases: Store.list shadows the builtin in the subclass
WatcherList = list[Watcher]
AdmissionHook = Callable[[str, ResourceType, Obj, Obj | None, str | None, bool], None]
"""(operation, type, new object, old object, subresource, dry run); raises ApiError to deny."""
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Engine:
    """All objects, the revision counter, the history window and open watchers.

    Methods take a ResourceType and return the stored objects themselves (never mutate them:
    events and the history share them); `Store` adds the copying API for tests.
    """

    def __init__(self, history_window: int = 1000) -> None:
        self.registry = Registry()
        self.revision = 1
        self.hub = WatchHub(history_window)
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self.plugins = Plugins()  # built-in admission plugins, off by default
        self.admission: AdmissionHook | None = None  # see admission.py
        self.authorizer: Authorizer | None = None  # set by Rbac (rbac=True); reviews.py asks it
        self.cleaning_crds: set[str] = set()  # CRDs whose instances are being deleted now
        ns_type = self.registry.lookup("", "v1", "namespaces")
        for ns in DEFAULT_NAMESPACES:
            self.create_object(ns_type, "", {"metadata": {"name": ns}})

    # ---- reads ----

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self._objects.setdefault(rt.key, {})

    def get_object(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """The stored object (do not mutate), or 404."""
        obj = self._bucket(rt).get((namespace if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return obj

    def list_objects(
        self, rt: ResourceType, namespace: str | None, predicate: Predicate | None
    ) -> ObjList:
        """Matching stored objects sorted by namespace and name (do not mutate)."""
        bucket = self._bucket(rt)
        out = []
        for key in sorted(bucket):
            if namespace and key[0] != namespace:
                continue
            obj = bucket[key]
            if predicate is None or predicate(obj):
                out.append(obj)
        return out

    # ---- writes ----

    def _next_rv(self) -> int:
        self.revision += 1
        return self.revision

    def _publish(self, ev: Event) -> None:
        self.hub.publish(ev)

    def _check_namespace(self, rt: ResourceType, namespace: str) -> str:
        if not rt.namespaced:
            return ""
        if not namespace:
            raise errors.bad_request("the namespace of the object must be set")
        if ("", namespace) not in self._objects.get(("", "namespaces"), {}):
            raise errors.not_found("", "namespaces", namespace)
        return namespace

    def create_object(
        self, rt: ResourceType, namespace: str, obj: Obj, dry_run: bool = False
    ) -> Obj:
        """Create; the server sets uid, creationTimestamp, resourceVersion and generation."""
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        body_ns = meta.get("namespace")
        if rt.namespaced and body_ns and namespace and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        namespace = self._check_namespace(rt, namespace or body_ns or "")
        if rt.from_crd and crd_deletion.terminating(self, rt):
            raise crd_deletion.create_refused(rt)
        fill_name(rt, meta)
        name = meta["name"]
        strategies.check_name(rt, name)
        bucket = self._bucket(rt)
        if (namespace, name) in bucket:
            raise errors.already_exists(rt.group, rt.plural, name)
        stamp_created(rt, namespace, obj)
        strategies.prepare_create(rt, obj, self)
        self.plugins.admit("CREATE", rt, obj, None, None, dry_run)
        if self.admission is not None:
            self.admission("CREATE", rt, obj, None, None, dry_run)
        if dry_run:
            return obj
        rv = self._next_rv()
        meta["resourceVersion"] = str(rv)
        bucket[(namespace, name)] = obj
        if rt.key == CRD_KEY:
            self.registry.add_crd(obj)
            log.info("crd.established", crd=name, rv=rv)
        self._publish(Event(rv, "ADDED", rt.key, obj))
        return obj

    def update_object(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
        from_patch: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Replace (PUT): 409 on a stale resourceVersion; status only through /status."""
        namespace = namespace if rt.namespaced else ""
        old = self.get_object(rt, namespace, name)
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        old_meta = old["metadata"]
        check_update_preconditions(
            rt, namespace=namespace, name=name, meta=meta, old_meta=old_meta, from_patch=from_patch
        )
        new = replacement(rt, body, old, namespace=namespace, name=name, subresource=subresource)
        strategies.check_finalizers(rt, new, old)
        strategies.prepare_update(rt, new, old, subresource, self)
        if rt.key == CRD_KEY:
            crd_deletion.keep_terminating(new, old)
        if "generation" in old_meta and strategies.spec_changed(new, old):
            new["metadata"]["generation"] = old_meta["generation"] + 1
        self.plugins.admit("UPDATE", rt, new, old, subresource, dry_run)
        if self.admission is not None:
            self.admission("UPDATE", rt, new, old, subresource, dry_run)
        if new == old or dry_run:
            return old if new == old else new
        return self.commit_update(rt, namespace, name, new, old)

    def commit_update(self, rt: ResourceType, namespace: str, name: str, new: Obj, old: Obj) -> Obj:
        """Store an update that has passed its checks and admission, and publish it (also
        crd_deletion.py's own writes of a CRD's Terminating condition)."""
        rv = self._next_rv()
        new["metadata"]["resourceVersion"] = str(rv)
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(rt, namespace, name, new, rv)
        self._bucket(rt)[(namespace, name)] = new
        if rt.key == CRD_KEY:
            self.registry.add_crd(new)
        self._publish(Event(rv, "MODIFIED", rt.key, new, old))
        return new

    def _remove(self, rt: ResourceType, namespace: str, name: str, last: Obj, rv: int) -> Obj:
        del self._bucket(rt)[(namespace, name)]
        self._publish(Event(rv, "DELETED", rt.key, last))
        if rt.key == CRD_KEY:
            self._drop_crd(last)
        elif rt.key == ("", "namespaces"):
            self._empty_namespace(name)
        elif rt.from_crd:
            crd_deletion.instance_removed(self, rt)
        return last

    def delete_object(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Delete: with finalizers only mark deletionTimestamp; removal follows when empty."""
        namespace = namespace if rt.namespaced else ""
        old = self.get_object(rt, namespace, name)
        meta = old["metadata"]
        check_delete_preconditions(rt, namespace, name, meta, preconditions)
        if rt.key == CRD_KEY and not meta.get("deletionTimestamp"):
            # the apiextensions registry: mark, add the cleanup finalizer, delete instances
            return crd_deletion.begin(self, rt, old, dry_run)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old
            new = dict(old)
            new["metadata"] = {
                **meta,
                "deletionTimestamp": now_rfc3339(),
                "deletionGracePeriodSeconds": 0,
            }
            if "generation" in meta:
                new["metadata"]["generation"] = meta["generation"] + 1
            if dry_run:
                return new
            return self.commit_update(rt, namespace, name, new, old)
        if dry_run:
            return old
        rv = self._next_rv()
        last = {**old, "metadata": {**meta, "resourceVersion": str(rv)}}
        return self._remove(rt, namespace, name, last, rv)

    def _drop_crd(self, crd: Obj) -> None:
        removed = self.registry.remove_crd(crd["metadata"]["name"])
        if not removed:
            return
        log.info("crd.removed", crd=crd["metadata"]["name"])
        rt = removed[0]
        for key, obj in list(self._bucket(rt).items()):
            self._purge(rt, key, obj)
        self.hub.close_resource(rt.key)

    def _purge(self, rt: ResourceType, key: tuple[str, str], obj: Obj) -> None:
        """Remove at once, finalizers or not (cascades from a CRD or namespace)."""
        rv = self._next_rv()
        last = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
        self._remove(rt, key[0], key[1], last, rv)

    def _empty_namespace(self, namespace: str) -> None:
        for rt in {t.key: t for t in self.registry.all() if t.namespaced}.values():
            for key in [k for k in self._bucket(rt) if k[0] == namespace]:
                self._purge(rt, key, self._bucket(rt)[key])

    # ---- watches ----

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Predicate | None,
        resource_version: str,
        bookmarks: bool,
        *,
        initial_events: bool = False,
        render: Callable[[str, Obj], bytes] | None = None,
    ) -> Watcher:
        """Open a watcher: replay after resource_version, or start with the current state
        (for ""/"0", or sendInitialEvents, which ends it with an initial-events-end BOOKMARK)."""
        w = Watcher(
            rt.key,
            rt.group_version,
            rt.kind,
            namespace or None,
            predicate,
            bookmarks=bookmarks,
            render=render,
        )
        since: int | None = None
        if resource_version in ("", "0") or initial_events:
            objects = self.list_objects(rt, namespace, predicate)
            w.start_with(objects, self.revision if initial_events else None)
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise errors.bad_request(f"invalid resource version {resource_version!r}") from None
        self.hub.attach(w, since)
        return w

    def unwatch(self, w: Watcher) -> None:
        """Forget a watcher whose stream ended."""
        self.hub.detach(w)

    def watchers(self) -> WatcherList:
        """Every open watcher."""
        return self.hub.all()

    def close_watchers(self) -> int:
        """End every watch stream; returns how many were open."""
        return self.hub.close_all()

    @property
    def compacted(self) -> int:
        """Watches from below this revision get 410 Gone (it left the history window)."""
        return self.hub.compacted
