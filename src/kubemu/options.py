"""Request options the apiserver validates before it acts: list/watch, dryRun, DeleteOptions.

A bad combination is a 422 Invalid on the options kind in meta.k8s.io, as Kubernetes'
handlers answer it (``ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch:
Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided``), never
silently ignored. DeleteOptions come from the body when there is one, else from the query
(delete.go), so ``kubectl delete --dry-run=server`` (body ``dryRun: [All]``) deletes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import errors

Cause = dict[str, str]
_TRUE = ("true", "True", "1", "t", "T", "TRUE")
DRY_RUN_ALL = "All"
_PROPAGATION = ("Foreground", "Background", "Orphan")
_FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")
_MATCH_VALUES = ("Exact", "NotOlderThan")


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def forbidden(field: str, detail: str) -> Cause:
    """A field.Forbidden cause."""
    return {"reason": "FieldValueForbidden", "field": field, "message": f"Forbidden: {detail}"}


def not_supported(field: str, shown: str, supported: tuple[str, ...]) -> Cause:
    """A field.NotSupported cause; `shown` is the bad value as Go prints it."""
    values = ", ".join(_q(v) for v in supported)
    return {
        "reason": "FieldValueNotSupported",
        "field": field,
        "message": f"Unsupported value: {shown}: supported values: {values}",
    }


def invalid_options(kind: str, causes: list[Cause]) -> errors.ApiError:
    """422 on an options kind, e.g. ListOptions.meta.k8s.io "" is invalid: ..."""
    return errors.invalid("meta.k8s.io", kind, "", causes)


def _string_slice(values: list[str]) -> str:
    return "[]string{" + ", ".join(_q(v) for v in values) + "}"


def dry_run_causes(values: list[str]) -> list[Cause]:
    """ValidateDryRun: only "All" is a dry run Kubernetes knows."""
    if all(v == DRY_RUN_ALL for v in values):
        return []
    return [not_supported("dryRun", _string_slice(values), (DRY_RUN_ALL,))]


def write_dry_run(kind: str, query: Mapping[str, str], dry_runs: list[str]) -> bool:
    """Create/Update/PatchOptions from the query: whether this is a dry run (422 on values
    Kubernetes does not know)."""
    causes = dry_run_causes(dry_runs)
    fv = query.get("fieldValidation", "")
    if fv not in _FIELD_VALIDATION:
        causes.append(not_supported("fieldValidation", _q(fv), _FIELD_VALIDATION))
    if causes:
        raise invalid_options(kind, causes)
    return bool(dry_runs)


def check_list(query: Mapping[str, str], watch: bool) -> None:
    """ValidateListOptions (with the WatchList feature on, as in Kubernetes >= 1.32)."""
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    cont = query.get("continue", "")
    initial = "sendInitialEvents" in query
    causes: list[Cause] = []
    field = "resourceVersionMatch"
    if watch:
        if initial and match != "NotOlderThan":
            causes.append(
                forbidden(
                    field,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )
            )
        if match:
            if not initial:
                causes.append(
                    forbidden(
                        field,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                        "is provided",
                    )
                )
            if match != "NotOlderThan":
                causes.append(not_supported(field, _q(match), ("NotOlderThan",)))
            if cont:
                causes.append(
                    forbidden(field, "resourceVersionMatch is forbidden when continue is provided")
                )
    else:
        if match:
            if not rv:
                causes.append(
                    forbidden(
                        field,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    )
                )
            if cont:
                causes.append(
                    forbidden(field, "resourceVersionMatch is forbidden when continue is provided")
                )
            if match not in _MATCH_VALUES:
                causes.append(not_supported(field, _q(match), (*_MATCH_VALUES, "")))
            if match == "Exact" and rv == "0":
                causes.append(
                    forbidden(
                        field,
                        'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    )
                )
        if initial:
            causes.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise invalid_options("ListOptions", causes)


@dataclass(frozen=True)
class DeleteOptions:
    """What a DELETE asks for, from its body or (without one) its query."""

    dry_run: bool = False
    preconditions: dict[str, Any] | None = None
    propagation_policy: str | None = None


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def delete_options(body: Any, query: Any) -> DeleteOptions:
    """Parse and validate DeleteOptions (422 DeleteOptions.meta.k8s.io on bad values)."""
    if isinstance(body, dict) and body:
        dry = _listed(body.get("dryRun"))
        policy = body.get("propagationPolicy")
        orphan = body.get("orphanDependents")
        pre = body.get("preconditions") if isinstance(body.get("preconditions"), dict) else None
    elif body not in (None, {}, b"", ""):
        raise errors.bad_request("the body of a DELETE must be DeleteOptions")
    else:
        dry = list(query.getall("dryRun", []))
        policy = query.get("propagationPolicy")
        orphan = query.get("orphanDependents")
        pre = None
    causes: list[Cause] = []
    if orphan is not None and policy is not None:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "propagationPolicy",
                "message": f'Invalid value: "{policy}": orphanDependents and deletionPropagation '
                "cannot be both set",
            }
        )
    if policy is not None and policy not in _PROPAGATION:
        causes.append(not_supported("propagationPolicy", _q(str(policy)), (*_PROPAGATION, "nil")))
    causes += dry_run_causes(dry)
    if causes:
        raise invalid_options("DeleteOptions", causes)
    return DeleteOptions(bool(dry), pre, policy)


def is_watch(query: Mapping[str, str]) -> bool:
    """watch=true (and the other spellings Go's strconv.ParseBool takes)."""
    return query.get("watch", "") in _TRUE
