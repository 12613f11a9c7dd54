"""The semantic checks a real apiserver makes on the objects eipctl and its users write
(pkg/apis/core/validation, pkg/apis/coordination/validation and apimachinery's metadata
validation, Kubernetes 1.37), worded as Kubernetes words them. Failures are causes of a 422
Invalid. Everything here runs after decoding (builtin_schema.py) but tolerates wrong types,
since decoding is skipped when kubernetes-validate is missing. This module holds the rules
every kind shares and dispatches to each kind's own; the Service's are service_rules.py's,
the wording and string checks field_causes.py's.

- Names: DNS-1035 label for Services, DNS-1123 label for Namespaces, path segment for RBAC
  objects, DNS-1123 subdomain for every other kind.
- Metadata of every object (custom resources too): label keys (qualified names) and values,
  annotation keys and their total size (256 KiB), finalizer names (qualified names).
- Service: see service_rules.py.
- Lease: leaseDurationSeconds > 0, leaseTransitions >= 0 (MicroTime is a decoding matter).
- Event (core/v1): involvedObject.namespace must be the Event's namespace.
- ConfigMap: data keys are config keys, no key in both data and binaryData, 1 MiB in total.
- EndpointSlice: see endpointslice_rules.py.
"""

from __future__ import annotations

from typing import Any

from .endpointslice_rules import endpointslice_causes
from .field_causes import (
    Cause,
    config_key,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    forbidden,
    invalid,
    invalid_each,
    label_value,
    path_segment,
    qualified_name,
)
from .resources import ResourceType
from .service_rules import ingress_causes, service_causes

__all__ = [  # ingress_causes too: strategies.py runs it alone on Service /status writes
    "ANNOTATIONS_MAX_BYTES",
    "CONFIGMAP_MAX_BYTES",
    "configmap_causes",
    "event_causes",
    "ingress_causes",
    "kind_causes",
    "lease_causes",
    "metadata_causes",
    "name_causes",
    "service_causes",
]

Obj = dict[str, Any]

ANNOTATIONS_MAX_BYTES = 256 * 1024
CONFIGMAP_MAX_BYTES = 1024 * 1024
_RBAC_GROUP = "rbac.authorization.k8s.io"


def name_causes(rt: ResourceType, name: str) -> list[Cause]:
    """metadata.name as the kind's ValidateNameFunc judges it."""
    if rt.from_crd or rt.key not in (("", "services"), ("", "namespaces")):
        check = path_segment if rt.group == _RBAC_GROUP else dns1123_subdomain
    else:
        check = dns1035_label if rt.key == ("", "services") else dns1123_label
    return invalid_each("metadata.name", name, check(name))


def metadata_causes(meta: Obj) -> list[Cause]:
    """Labels, annotations and finalizers (ValidateObjectMeta), for every kind."""
    causes: list[Cause] = []
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            causes.extend(invalid_each("metadata.labels", k, qualified_name(k)))
            if not isinstance(v, str):
                causes.append(invalid("metadata.labels", v, "values must be strings"))
            else:
                causes.extend(invalid_each("metadata.labels", v, label_value(v)))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = 0
        for k, v in annotations.items():
            causes.extend(invalid_each("metadata.annotations", k, qualified_name(k.lower())))
            size += len(k.encode()) + (len(v.encode()) if isinstance(v, str) else 0)
        if size > ANNOTATIONS_MAX_BYTES:
            causes.append(
                {
                    "reason": "FieldValueTooLong",
                    "field": "metadata.annotations",
                    "message": f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
                }
            )
    for fin in meta.get("finalizers") or ():
        if isinstance(fin, str):
            causes.extend(invalid_each("metadata.finalizers", fin, qualified_name(fin)))
    return causes


def lease_causes(lease: Obj) -> list[Cause]:
    spec = lease.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(
            invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    if spec.get("preferredHolder") and not spec.get("strategy"):
        causes.append(
            forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")
        )
    return causes


def event_causes(event: Obj) -> list[Cause]:
    """legacyValidateEvent (core/v1 Events without eventTime): the involved object's namespace
    must be the Event's (an Event about a cluster-scoped object lives in default)."""
    involved = event.get("involvedObject")
    inv_ns = involved.get("namespace") if isinstance(involved, dict) else None
    ns = (event.get("metadata") or {}).get("namespace", "")
    if event.get("eventTime"):  # a "new" Event: cluster-scoped objects' in default or kube-system
        ok = ns in ("default", "kube-system") if not inv_ns else ns == inv_ns
    else:
        ok = ns in ("", "default") if not inv_ns else ns == inv_ns
    return (
        []
        if ok
        else [invalid("involvedObject.namespace", inv_ns or "", "does not match event.namespace")]
    )


def configmap_causes(cm: Obj) -> list[Cause]:
    data = cm.get("data")
    data = data if isinstance(data, dict) else {}
    binary = cm.get("binaryData")
    binary = binary if isinstance(binary, dict) else {}
    causes: list[Cause] = []
    total = 0
    for key, value in data.items():
        causes.extend(invalid_each(f"data[{key}]", key, config_key(key)))
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(value.encode()) if isinstance(value, str) else 0
    for key, value in binary.items():
        causes.extend(invalid_each(f"binaryData[{key}]", key, config_key(key)))
        total += len(value) * 3 // 4 if isinstance(value, str) else 0
    if total > CONFIGMAP_MAX_BYTES:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "field": "",
                "message": f"Too long: may not be more than {CONFIGMAP_MAX_BYTES} bytes",
            }
        )
    return causes


_BY_KIND = {
    ("", "services"): service_causes,
    ("coordination.k8s.io", "leases"): lease_causes,
    ("", "events"): event_causes,
    ("", "configmaps"): configmap_causes,
    ("discovery.k8s.io", "endpointslices"): endpointslice_causes,
}


def kind_causes(rt: ResourceType, obj: Obj) -> list[Cause]:
    """The kind's own rules (none for kinds eipctl does not write)."""
    check = None if rt.from_crd else _BY_KIND.get(rt.key)
    return check(obj) if check is not None else []
