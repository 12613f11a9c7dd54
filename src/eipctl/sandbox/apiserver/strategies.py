"""Per-kind rules applied on create and update (the apiserver's "strategies")."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Any

from . import errors, schema, service_status
from .resources import CRD_KEY, ResourceType, check_crd, crd_status

if TYPE_CHECKING:
    from .engine import Engine

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SERVICE_NET = ipaddress.ip_network("10.96.0.0/12")
_CORE_NO_GENERATION = {"", "coordination.k8s.io", "rbac.authorization.k8s.io"}


def check_name(rt: ResourceType, name: str) -> None:
    """Names must be DNS subdomains (DNS labels for namespaces and services)."""
    strict = rt.key in (("", "namespaces"), ("", "services"))
    pattern = _LABEL if strict else _SUBDOMAIN
    if len(name) > (63 if strict else 253) or not pattern.match(name):
        what = "RFC 1123 label" if strict else "lowercase RFC 1123 subdomain"
        raise errors.invalid(
            rt.group,
            rt.kind,
            name,
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a {what} must consist of lower case '
                    "alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric character",
                }
            ],
        )


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


def _check_labels(rt: ResourceType, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    for fld in ("labels", "annotations"):
        val = meta.get(fld)
        if val is None:
            continue
        if not isinstance(val, dict) or not all(isinstance(v, str) for v in val.values()):
            raise errors.invalid(
                rt.group,
                rt.kind,
                meta.get("name", ""),
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": f"metadata.{fld}",
                        "message": "Invalid value: values must be strings",
                    }
                ],
            )


def _allocate_cluster_ip(store: Engine) -> str:
    services = store.list_objects(store.registry.lookup("", "v1", "services"), None, None)
    used = {(s.get("spec") or {}).get("clusterIP") for s in services}
    for host in _SERVICE_NET.hosts():
        ip = str(host)
        if ip != "10.96.0.1" and ip not in used:
            return ip
    raise errors.ApiError(500, "service IP range exhausted")


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


def prepare_create(rt: ResourceType, obj: dict[str, Any], store: Engine) -> None:
    """Defaults, status resets and validation for a new object."""
    _check_labels(rt, obj)
    if rt.key == CRD_KEY:
        causes = check_crd(obj)
        if causes:
            raise errors.invalid(rt.group, rt.kind, obj["metadata"]["name"], causes)
        obj["status"] = crd_status(obj)
        return
    if rt.from_crd:
        if rt.has_status:
            obj.pop("status", None)
        _validate_custom(rt, obj)
        return
    key = rt.key
    if key == ("", "namespaces"):
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
            "name"
        ]
    elif key == ("", "services"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
            spec["clusterIP"] = _allocate_cluster_ip(store)
        if spec.get("clusterIP") and "clusterIPs" not in spec:
            spec["clusterIPs"] = [spec["clusterIP"]]
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}  # a created Service starts with no status
    elif key == ("", "pods"):
        obj["status"] = {"phase": "Pending"}


def prepare_update(
    rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
) -> None:
    """Validation and immutable-field rules for a replacement."""
    _check_labels(rt, new)
    if rt.key == CRD_KEY:
        if subresource != "status":
            causes = check_crd(new)
            if causes:
                raise errors.invalid(rt.group, rt.kind, new["metadata"]["name"], causes)
            new["status"] = crd_status(new)
        return
    if rt.from_crd:
        _validate_custom(rt, new, old)
        return
    if rt.key == ("", "services") and subresource != "status":
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        if not spec.get("clusterIP"):
            for k in ("clusterIP", "clusterIPs"):
                if k in old_spec:
                    spec[k] = old_spec[k]
        elif spec.get("clusterIP") != old_spec.get("clusterIP"):
            raise errors.invalid(
                rt.group,
                rt.kind,
                new["metadata"]["name"],
                [
                    {
                        "reason": "FieldValueInvalid",
                        "field": "spec.clusterIPs[0]",
                        "message": "Invalid value: field is immutable",
                    }
                ],
            )
        spec.setdefault("type", old_spec.get("type", "ClusterIP"))
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if rt.key == ("", "services"):
        _service_status(rt, new, subresource)
    if rt.key == ("", "namespaces"):
        new["spec"] = old.get("spec", {})


def _service_status(rt: ResourceType, new: dict[str, Any], subresource: str | None) -> None:
    """ipMode defaulting on every Service update; status.loadBalancer validation on /status
    (the main endpoint keeps the stored status). See service_status.py."""
    service_status.default_ip_mode(new)
    if subresource == "status":
        causes = service_status.load_balancer_causes(new)
        if causes:
            raise errors.invalid(rt.group, rt.kind, new["metadata"]["name"], causes)
