"""Per-kind rules applied on create and update (the apiserver's "strategies")."""

from __future__ import annotations

import json
from typing import Any

from . import builtin_rules, builtin_schema, errors, schema, service_spec, service_status
from .objects import ObjectStore
from .resources import CRD_KEY, ResourceType, check_crd, crd_status

_CORE_NO_GENERATION = {"", "coordination.k8s.io", "rbac.authorization.k8s.io"}


def check_name(rt: ResourceType, name: str) -> None:
    """metadata.name as the kind's name rule judges it (builtin_rules.name_causes)."""
    causes = builtin_rules.name_causes(rt, name)
    if causes:
        raise errors.invalid(rt.group, rt.kind, name, causes)


def has_generation(rt: ResourceType) -> bool:
    """Kinds whose metadata.generation tracks spec changes (CRs, CRDs, workloads)."""
    return rt.from_crd or rt.group not in _CORE_NO_GENERATION


def spec_changed(new: dict[str, Any], old: dict[str, Any]) -> bool:
    """Anything but metadata and status changed: the rule for bumping generation."""
    keys = (set(new) | set(old)) - {"metadata", "status", "apiVersion", "kind"}
    return any(new.get(k) != old.get(k) for k in keys)


def _validate_custom(
    rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> None:
    causes, _ = schema.validate(rt.schema, obj, old)
    if causes:
        raise errors.invalid(rt.group, rt.kind, obj["metadata"].get("name", ""), causes)


def check_finalizers(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> None:
    """Once deletion has started, finalizers may only be removed."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = set(new["metadata"].get("finalizers") or ()) - set(
        old["metadata"].get("finalizers") or ()
    )
    if added:
        raise errors.invalid(
            rt.group,
            rt.kind,
            new["metadata"]["name"],
            [
                {
                    "reason": "FieldValueForbidden",
                    "field": "metadata.finalizers",
                    "message": "Forbidden: no new finalizers can be added if the object is "
                    f"being deleted, found new finalizers {sorted(added)!r}",
                }
            ],
        )


def _refuse(rt: ResourceType, obj: dict[str, Any], causes: list[dict[str, str]]) -> None:
    if causes:
        raise errors.invalid(rt.group, rt.kind, obj["metadata"].get("name", ""), causes)


def _decode(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Built-ins are decoded into their Go types first: 400 on a wrong type, unknown fields
    dropped (builtin_schema.py)."""
    if not rt.from_crd:
        builtin_schema.admit(rt.group, rt.version, rt.kind, obj)


def _defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    """The built-ins' simple SetDefaults_* (a Service's are in service_spec.py); like the real
    server's, they run on every write, since they are part of decoding."""
    if rt.key == ("", "secrets") and not obj.get("type"):
        obj["type"] = "Opaque"


def _other_service_specs(store: ObjectStore, obj: dict[str, Any]) -> list[dict[str, Any]]:
    meta = obj["metadata"]
    me = (meta.get("namespace"), meta.get("name"))
    services = store.list_objects(store.registry.lookup("", "v1", "services"), None, None)
    return [
        s.get("spec") or {}
        for s in services
        if (s["metadata"].get("namespace"), s["metadata"]["name"]) != me
    ]


def prepare_create(rt: ResourceType, obj: dict[str, Any], store: ObjectStore) -> None:
    """Decoding, defaults, status resets and validation for a new object."""
    _decode(rt, obj)
    meta_causes = builtin_rules.metadata_causes(obj["metadata"])
    if rt.key == CRD_KEY:
        _refuse(rt, obj, meta_causes + check_crd(obj))
        obj["status"] = crd_status(obj)
        return
    if rt.from_crd:
        _refuse(rt, obj, meta_causes)
        if rt.has_status:
            obj.pop("status", None)
        _validate_custom(rt, obj)
        return
    _defaults(rt, obj)
    key = rt.key
    if key == ("", "namespaces"):
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
            "name"
        ]
    elif key == ("", "services"):
        spec = obj.setdefault("spec", {})
        service_spec.apply_defaults(spec, None, _other_service_specs(store, obj))
        obj["status"] = {"loadBalancer": {}}  # a created Service starts with no status
    elif key == ("", "pods"):
        obj["status"] = {"phase": "Pending"}
    _refuse(rt, obj, meta_causes + builtin_rules.kind_causes(rt, obj))


def prepare_update(
    rt: ResourceType,
    new: dict[str, Any],
    old: dict[str, Any],
    subresource: str | None,
    store: ObjectStore | None = None,
) -> None:
    """Decoding, defaults, validation and immutable-field rules for a replacement."""
    _decode(rt, new)
    meta_causes = builtin_rules.metadata_causes(new["metadata"])
    if rt.key == CRD_KEY:
        if subresource != "status":
            _refuse(rt, new, meta_causes + check_crd(new))
            new["status"] = crd_status(new)
        return
    if rt.from_crd:
        _refuse(rt, new, meta_causes)
        _validate_custom(rt, new, old)
        return
    if rt.key == ("", "services"):
        _update_service(rt, new, old, subresource, store)
        return
    _defaults(rt, new)
    if rt.key == ("", "namespaces"):
        new["spec"] = old.get("spec", {})
    _refuse(rt, new, meta_causes + builtin_rules.kind_causes(rt, new))


def _update_service(
    rt: ResourceType,
    new: dict[str, Any],
    old: dict[str, Any],
    subresource: str | None,
    store: ObjectStore | None,
) -> None:
    """Spec writes: clusterIP immutability, defaults, ValidateService. /status writes:
    ipMode defaulting and ValidateLoadBalancerStatus (service_status.py)."""
    service_status.default_ip_mode(new)
    meta_causes = builtin_rules.metadata_causes(new["metadata"])
    if subresource == "status":
        causes = service_status.load_balancer_causes(new) + builtin_rules.ingress_causes(new)
        _refuse(rt, new, meta_causes + causes)
        return
    spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
    changed = spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP")
    if changed and old_spec.get("clusterIP") and spec.get("type") != "ExternalName":
        raise errors.invalid(
            rt.group,
            rt.kind,
            new["metadata"]["name"],
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.clusterIPs[0]",
                    "message": f"Invalid value: {json.dumps([spec['clusterIP']])}: "
                    "may not change once set",
                }
            ],
        )
    others = _other_service_specs(store, new) if store is not None else []
    service_spec.apply_defaults(spec, old_spec, others)
    _refuse(rt, new, meta_causes + builtin_rules.kind_causes(rt, new))
