"""The storage engine: one global revision (like etcd's), a bounded history, and the watchers.

Every write is synchronous and bumps `revision` once, so the order of events is the order
of revisions, and a watch from revision R replays exactly the events after R.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from . import crd_deletion, errors, strategies
from .hub import WatchHub
from .plugins import Plugins
from .resources import CRD_KEY, Registry, ResourceType
from .selectors import Predicate
from .watch import Event, Watcher

if TYPE_CHECKING:
    from .rbac import Rbac

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
ObjList = list[Obj]  # aliases: Store.list shadows the builtin in the subclass
WatcherList = list[Watcher]
AdmissionHook = Callable[[str, ResourceType, Obj, Obj | None, str | None, bool], None]
"""(operation, type, new object, old object, subresource, dry run); raises ApiError to deny."""
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
CONDITIONAL_ONLY = frozenset(
    {
        CRD_KEY,
        ("coordination.k8s.io", "leases"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
    }
)
"""Built-in kinds whose strategy says AllowUnconditionalUpdate() false (custom resources too):
a PUT must carry metadata.resourceVersion. Core kinds, RBAC and apps allow it."""


def needs_resource_version(rt: ResourceType) -> bool:
    """Whether a replacement without metadata.resourceVersion is refused (422)."""
    return rt.from_crd or rt.key in CONDITIONAL_ONLY


def storage_key(rt: ResourceType, namespace: str, name: str) -> str:
    """The etcd key Kubernetes keeps the object under (it shows in precondition failures)."""
    prefix = f"{rt.group}/{rt.plural}" if rt.from_crd or rt.key == CRD_KEY else rt.plural
    if rt.key == ("", "services"):
        prefix = "services/specs"
    where = f"{namespace}/{name}" if namespace else name
    return f"/registry/{prefix}/{where}"


def precondition_failed(rt: ResourceType, namespace: str, name: str, what: str) -> errors.ApiError:
    """409 as etcd's precondition check words it, wrapped by the registry as a Conflict."""
    return errors.conflict(
        rt.group,
        rt.plural,
        name,
        f"StorageError: invalid object, Code: 4, Key: {storage_key(rt, namespace, name)}, "
        f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {what}",
    )


def now_rfc3339() -> str:
    """Timestamps as the apiserver writes them: UTC, whole seconds, Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        self.authorizer: Rbac | None = None  # set by Rbac (rbac=True); reviews.py asks it
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
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise errors.invalid(
                    rt.group,
                    rt.kind,
                    "",
                    [
                        {
                            "reason": "FieldValueRequired",
                            "field": "metadata.name",
                            "message": "Required value: name or generateName is required",
                        }
                    ],
                )
            meta["name"] = prefix + "".join(random.choices(_NAME_CHARS, k=5))
        name = meta["name"]
        strategies.check_name(rt, name)
        bucket = self._bucket(rt)
        if (namespace, name) in bucket:
            raise errors.already_exists(rt.group, rt.plural, name)
        obj["apiVersion"], obj["kind"] = rt.group_version, rt.kind
        for k in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "resourceVersion",
        ):
            meta.pop(k, None)
        if rt.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if strategies.has_generation(rt):
            meta["generation"] = 1
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
        self._check_update_preconditions(
            rt, namespace=namespace, name=name, meta=meta, old_meta=old_meta, from_patch=from_patch
        )
        if subresource == "status":
            new = {k: v for k, v in old.items() if k != "status"}
            if "status" in body:
                new["status"] = body["status"]
            new["metadata"] = dict(old_meta)
        else:
            new = dict(body)
            new["metadata"] = dict(meta)
            if rt.has_status:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = old["status"]
            for k in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if k in old_meta:
                    new["metadata"][k] = old_meta[k]
                else:
                    new["metadata"].pop(k, None)
            new["metadata"].pop("managedFields", None)
        new["apiVersion"], new["kind"] = rt.group_version, rt.kind
        new["metadata"]["name"] = name
        if rt.namespaced:
            new["metadata"]["namespace"] = namespace
        else:
            new["metadata"].pop("namespace", None)
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
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
        return self._commit_update(rt, namespace, name, new, old)

    def _check_update_preconditions(
        self,
        rt: ResourceType,
        *,
        namespace: str,
        name: str,
        meta: Obj,
        old_meta: Obj,
        from_patch: bool,
    ) -> None:
        """What the generic registry checks before an update: a uid in a PUT body is a
        precondition (409); a patch may not change it (422, immutable); then the
        resourceVersion, which kinds that refuse unconditional updates require (422)."""
        want_uid = meta.get("uid")
        if want_uid and want_uid != old_meta["uid"]:
            if from_patch:
                raise errors.invalid(
                    rt.group,
                    rt.kind,
                    name,
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "field": "metadata.uid",
                            "message": f'Invalid value: "{want_uid}": field is immutable',
                        }
                    ],
                )
            raise precondition_failed(
                rt,
                namespace,
                name,
                f"UID in precondition: {want_uid}, UID in object meta: {old_meta['uid']}",
            )
        want_rv = meta.get("resourceVersion")
        if want_rv:
            if want_rv != old_meta["resourceVersion"]:
                raise errors.conflict(
                    rt.group,
                    rt.plural,
                    name,
                    "the object has been modified; "
                    "please apply your changes to the latest version and try again",
                )
        elif needs_resource_version(rt) and not from_patch:
            # the registry names the resource, not the kind, here (store.go, qualifiedKind)
            raise errors.invalid(
                rt.group,
                rt.plural,
                name,
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "metadata.resourceVersion",
                        "message": "Invalid value: 0x0: must be specified for an update",
                    }
                ],
            )

    def _commit_update(
        self, rt: ResourceType, namespace: str, name: str, new: Obj, old: Obj
    ) -> Obj:
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
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != meta["uid"]:
            raise precondition_failed(
                rt,
                namespace,
                name,
                f"UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            raise precondition_failed(
                rt,
                namespace,
                name,
                f"ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )
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
            return self._commit_update(rt, namespace, name, new, old)
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
