"""What a write must match before the engine applies it: uid and resourceVersion.

The checks follow Kubernetes' generic registry (store.go) and etcd, down to the wording of
the 409s and 422s, because clients read those messages; the engine only calls them.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .resources import CRD_KEY, ResourceType

Obj = dict[str, Any]
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


def check_update_preconditions(
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


def check_delete_preconditions(
    rt: ResourceType, namespace: str, name: str, meta: Obj, preconditions: Obj | None
) -> None:
    """DeleteOptions.preconditions: a uid or resourceVersion that differs is a 409."""
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
