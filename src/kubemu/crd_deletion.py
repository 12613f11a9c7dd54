"""Deleting a CRD as the apiextensions apiserver does: through its instances' finalizers.

The first DELETE of a CRD does not remove it: the registry sets deletionTimestamp, adds the
finalizer ``customresourcecleanup.apiextensions.k8s.io`` and a ``Terminating`` condition
(InstanceDeletionPending). Its finalizer controller then deletes every instance, as a client
would (an instance with finalizers only gets its deletionTimestamp and stays, Terminating),
and removes the finalizer once none is left, which removes the CRD. Until then the CRD's
resources are served (get, list, watch, update, patch, delete) except create, which is 405
``create not allowed while custom resource definition is terminating``. So a CRD whose
instances wait on a controller that is gone stays, with Terminating True, reason
InstanceDeletionCheck, until someone removes their finalizers.

The emulator runs the controller's steps synchronously, within the write that starts them
(the DELETE of the CRD, the removal of the last instance), where Kubernetes runs them a
moment later.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .objects import ObjectStore
from .resources import CRD_KEY, ResourceType
from .system_fields import now_rfc3339

Obj = dict[str, Any]
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_CRD_GROUP, _CRD_PLURAL = CRD_KEY


def _crd_type(engine: ObjectStore) -> ResourceType:
    return engine.registry.lookup(_CRD_GROUP, "v1", _CRD_PLURAL)


def _crd_of(engine: ObjectStore, rt: ResourceType) -> Obj | None:
    bucket = engine.list_objects(_crd_type(engine), None, None)
    name = f"{rt.plural}.{rt.group}"
    return next((c for c in bucket if c["metadata"]["name"] == name), None)


def terminating(engine: ObjectStore, rt: ResourceType) -> bool:
    """Whether the CRD that serves `rt` is being deleted."""
    crd = _crd_of(engine, rt)
    return bool(crd and crd["metadata"].get("deletionTimestamp"))


def create_refused(rt: ResourceType) -> errors.ApiError:
    """The crdHandler's answer to a create while the CRD terminates (MethodNotSupported)."""
    return errors.ApiError(
        405,
        "create not allowed while custom resource definition is terminating",
        "MethodNotAllowed",
        {"group": rt.group, "kind": rt.plural},
    )


def _with_condition(crd: Obj, reason: str, message: str, status: str = "True") -> Obj:
    out = dict(crd)
    st = dict(crd.get("status") or {})
    conds = [c for c in st.get("conditions") or [] if c.get("type") != "Terminating"]
    old = next(
        (c for c in st.get("conditions") or [] if c.get("type") == "Terminating"),
        None,
    )
    when = old["lastTransitionTime"] if old and old.get("status") == status else now_rfc3339()
    conds.append(
        {
            "type": "Terminating",
            "status": status,
            "lastTransitionTime": when,
            "reason": reason,
            "message": message,
        }
    )
    st["conditions"] = conds
    out["status"] = st
    return out


def keep_terminating(new: Obj, old: Obj) -> None:
    """An update of a terminating CRD keeps its Terminating condition (the strategy keeps
    status; the emulator's recomputes it from the spec)."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    conds = (old.get("status") or {}).get("conditions") or []
    kept = [c for c in conds if c.get("type") == "Terminating"]
    if kept:
        st = new.setdefault("status", {})
        st["conditions"] = [
            c for c in st.get("conditions") or [] if c.get("type") != "Terminating"
        ] + kept


def begin(engine: ObjectStore, rt: ResourceType, crd: Obj, dry_run: bool) -> Obj:
    """The first DELETE of a CRD: mark it and start deleting its instances; returns the CRD
    as marked (what the DELETE answers)."""
    meta = dict(crd["metadata"])
    meta["deletionTimestamp"] = now_rfc3339()
    meta["deletionGracePeriodSeconds"] = 0
    if CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
        meta["finalizers"] = [*(meta.get("finalizers") or []), CLEANUP_FINALIZER]
    marked = _with_condition(
        {**crd, "metadata": meta},
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    )
    if dry_run:
        return marked
    name = meta["name"]
    out = engine.commit_update(rt, "", name, marked, crd)
    _delete_instances(engine, name)
    return out


def _instance_type(engine: ObjectStore, crd: Obj) -> ResourceType | None:
    spec = crd.get("spec") or {}
    key = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
    return engine.registry.by_storage_key(key)


def _update_crd(engine: ObjectStore, crd: Obj, new: Obj) -> None:
    engine.commit_update(_crd_type(engine), "", crd["metadata"]["name"], new, crd)


def _delete_instances(engine: ObjectStore, name: str) -> None:
    crd = engine.get_object(_crd_type(engine), "", name)
    rt = _instance_type(engine, crd)
    if rt is None:
        return
    progress = _with_condition(
        crd, "InstanceDeletionInProgress", "CustomResource deletion is in progress"
    )
    _update_crd(engine, crd, progress)
    engine.cleaning_crds.add(name)
    try:
        for obj in list(engine.list_objects(rt, None, None)):
            meta = obj["metadata"]
            try:
                engine.delete_object(rt, meta.get("namespace", ""), meta["name"])
            except errors.ApiError:
                continue
    finally:
        engine.cleaning_crds.discard(name)
    _finish_if_empty(engine, name)


def instance_removed(engine: ObjectStore, rt: ResourceType) -> None:
    """An instance left the store: if its CRD is terminating and that was the last one, the
    finalizer controller removes its finalizer (and so the CRD)."""
    crd = _crd_of(engine, rt)
    if crd is None or not crd["metadata"].get("deletionTimestamp"):
        return
    if crd["metadata"]["name"] in engine.cleaning_crds:
        return
    _finish_if_empty(engine, crd["metadata"]["name"])


def _finish_if_empty(engine: ObjectStore, name: str) -> None:
    crd = engine.get_object(_crd_type(engine), "", name)
    rt = _instance_type(engine, crd)
    left = engine.list_objects(rt, None, None) if rt is not None else []
    if left:
        waiting = _with_condition(
            crd,
            "InstanceDeletionCheck",
            "could not confirm zero CustomResources remaining: timed out waiting for the condition",
        )
        if waiting != crd:
            _update_crd(engine, crd, waiting)
        return
    if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
        return
    done = _with_condition(crd, "InstanceDeletionCompleted", "removed all instances", "False")
    done["metadata"] = {
        **crd["metadata"],
        "finalizers": [f for f in crd["metadata"]["finalizers"] if f != CLEANUP_FINALIZER],
    }
    _update_crd(engine, crd, done)
