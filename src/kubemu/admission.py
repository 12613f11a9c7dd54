"""ValidatingAdmissionPolicy evaluation (CEL, with cel-python), for `ApiServer(rbac=True,
admission=True)`.

Every create and update made through the HTTP API by an authenticated user (see `rbac.py`)
is checked, after the emulator has prepared the object it would store, against each
ValidatingAdmissionPolicyBinding in the store and its policy, as Kubernetes does:
``matchConstraints.resourceRules`` (apiGroups, apiVersions, operations, resources with
``resource/subresource``, ``resource/*``, ``*/subresource``, ``*``, scope),
``excludeResourceRules``, the binding's ``matchResources`` (same rules), ``matchConditions``,
``variables`` (in order, each seeing the earlier ones), then ``validations`` with ``message``
or ``messageExpression`` and ``reason``. A denial is a Status with the validation's reason
(422 Invalid by default) and the message Kubernetes writes. ``failurePolicy: Fail`` turns an
expression error (or a missing policy) into a denial; ``Ignore`` skips the policy. The
activation has ``object``, ``oldObject`` (null on create), ``request`` (kind, resource,
subResource, name, namespace, operation, userInfo, dryRun), ``params`` (null) and
``variables``, and the Kubernetes IP/CIDR CEL library (``isIP``, ``cidr(...).containsIP``...,
cel_net.py).

Not emulated: paramKind/paramRef, namespaceSelector and objectSelector (a rule that sets one
is matched as if it selected everything), ``auditAnnotations``, the ``authorizer`` variable,
``validationActions`` other than Deny (Warn and Audit are ignored), type checking of the
expressions at policy creation, DELETE and CONNECT operations, mutating admission.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from . import cel_net
from .errors import ApiError
from .identity import CURRENT_USER, UserInfo
from .resources import ResourceType
from .store import Store

GROUP = "admissionregistration.k8s.io"
Obj = dict[str, Any]
_REASON_CODES = {
    "Unauthorized": 401,
    "Forbidden": 403,
    "Invalid": 422,
    "RequestEntityTooLarge": 413,
}


class _ExpressionError(Exception):
    """An expression that did not compile or evaluate to what it must."""


@dataclass(frozen=True)
class AdmissionRequest:
    operation: str  # CREATE | UPDATE
    rt: ResourceType
    subresource: str
    namespace: str
    name: str
    obj: Obj
    old: Obj | None
    user: UserInfo
    dry_run: bool = False

    def to_cel(self) -> Obj:
        gvk = {"group": self.rt.group, "version": self.rt.version, "kind": self.rt.kind}
        gvr = {"group": self.rt.group, "version": self.rt.version, "resource": self.rt.plural}
        return {
            "kind": gvk,
            "resource": gvr,
            "subResource": self.subresource,
            "requestKind": gvk,
            "requestResource": gvr,
            "requestSubResource": self.subresource,
            "name": self.name,
            "namespace": self.namespace,
            "operation": self.operation,
            "userInfo": self.user.to_dict(),
            "dryRun": self.dry_run,
        }


def _listed(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def _resource_matches(patterns: list[str], resource: str, sub: str) -> bool:
    combined = f"{resource}/{sub}" if sub else resource
    for p in patterns:
        if p in ("*/*", combined):
            return True
        if p == "*" and not sub:
            return True
        head, _, tail = p.partition("/")
        if sub and tail and ((head == "*" and tail == sub) or (head == resource and tail == "*")):
            return True
    return False


def rule_matches(rule: Obj, req: AdmissionRequest) -> bool:
    """One admissionregistration/v1 RuleWithOperations against a request."""
    ops = _listed(rule.get("operations"))
    if "*" not in ops and req.operation not in ops:
        return False
    groups = _listed(rule.get("apiGroups"))
    if "*" not in groups and req.rt.group not in groups:
        return False
    versions = _listed(rule.get("apiVersions"))
    if "*" not in versions and req.rt.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if (scope == "Cluster" and req.rt.namespaced) or (
        scope == "Namespaced" and not req.rt.namespaced
    ):
        return False
    names = _listed(rule.get("resourceNames"))
    if names and req.name not in names:
        return False
    return _resource_matches(_listed(rule.get("resources")), req.rt.plural, req.subresource)


def resources_match(match: Obj, req: AdmissionRequest) -> bool:
    """A MatchResources (policy matchConstraints or binding matchResources)."""
    rules = [r for r in match.get("resourceRules") or [] if isinstance(r, dict)]
    excluded = [r for r in match.get("excludeResourceRules") or [] if isinstance(r, dict)]
    return any(rule_matches(r, req) for r in rules) and not any(
        rule_matches(r, req) for r in excluded
    )


class PolicyEvaluator:
    """Checks writes against the ValidatingAdmissionPolicies (and bindings) in a store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._env = celpy.Environment()
        self._programs: dict[str, celpy.Runner] = {}
        self.applied = 0
        """Policy evaluations that got past matchConstraints and matchConditions."""
        self.denials: list[str] = []
        """The message of every request denied (for tests to assert there were none)."""

    def _program(self, expression: str) -> celpy.Runner:
        prog = self._programs.get(expression)
        if prog is None:
            try:
                prog = self._env.program(
                    self._env.compile(expression), functions=cast(Any, cel_net.FUNCTIONS)
                )
            except CELParseError as exc:
                raise _ExpressionError(f"compilation failed: {exc}") from exc
            self._programs[expression] = prog
        return prog

    def _eval(self, expression: str, activation: Mapping[str, Any]) -> Any:
        try:
            return self._program(expression).evaluate({**cel_net.VARIABLES, **activation})
        except CELEvalError as exc:
            raise _ExpressionError(
                f"expression '{expression}' resulted in error: {exc.args[0]}"
            ) from exc

    def _bool(self, expression: str, activation: Mapping[str, Any]) -> bool:
        value = self._eval(expression, activation)
        if not isinstance(value, celtypes.BoolType):
            raise _ExpressionError(f"expression '{expression}' must evaluate to bool")
        return bool(value)

    def admit(  # noqa: PLR0917 (the engine's AdmissionHook signature)
        self,
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        subresource: str | None,
        dry_run: bool = False,
    ) -> None:
        """Raise the Status a denying policy gives; called by the store before a write."""
        user = CURRENT_USER.get()
        if user is None:
            return  # a direct store call from a test or the sandbox: not an API request
        meta = obj.get("metadata") or {}
        req = AdmissionRequest(
            operation,
            rt,
            subresource or "",
            str(meta.get("namespace", "")),
            str(meta.get("name", "")),
            obj,
            old,
            user,
            dry_run,
        )
        for binding in self.store.list(GROUP, "validatingadmissionpolicybindings"):
            spec = binding.get("spec") or {}
            if "Deny" not in _listed(spec.get("validationActions")):
                continue
            policy = self.store.find(
                GROUP, "validatingadmissionpolicies", str(spec.get("policyName", ""))
            )
            if policy is None:
                continue  # Kubernetes: a binding to a missing policy is ignored
            self._check(policy, binding, req)

    def _check(self, policy: Obj, binding: Obj, req: AdmissionRequest) -> None:
        spec = policy.get("spec") or {}
        bspec = binding.get("spec") or {}
        if not resources_match(spec.get("matchConstraints") or {}, req):
            return
        if bspec.get("matchResources") and not resources_match(bspec["matchResources"], req):
            return
        fail = (spec.get("failurePolicy") or "Fail") == "Fail"
        prefix = (
            f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
            f"'{binding['metadata']['name']}' denied request: "
        )
        try:
            denial = self._validate(spec, req)
        except _ExpressionError as exc:
            if not fail:
                return
            denial = ("Invalid", str(exc))
        if denial is not None:
            reason, message = denial
            self.denials.append(prefix + message)
            raise ApiError(_REASON_CODES.get(reason, 422), prefix + message, reason)

    def _validate(self, spec: Obj, req: AdmissionRequest) -> tuple[str, str] | None:
        activation: dict[str, Any] = {
            "object": json_to_cel(req.obj),
            "oldObject": json_to_cel(req.old),
            "request": json_to_cel(req.to_cel()),
            "params": json_to_cel(None),
        }
        for cond in spec.get("matchConditions") or []:
            if not self._bool(str(cond["expression"]), activation):
                return None
        self.applied += 1
        variables: dict[str, Any] = {}
        for var in spec.get("variables") or []:
            activation["variables"] = celtypes.MapType(variables)
            variables[celtypes.StringType(var["name"])] = self._eval(
                str(var["expression"]), activation
            )
        activation["variables"] = celtypes.MapType(variables)
        for v in spec.get("validations") or []:
            expression = str(v["expression"])
            if self._bool(expression, activation):
                continue
            message = str(v.get("message") or f"failed expression: {expression}")
            if v.get("messageExpression"):
                with contextlib.suppress(_ExpressionError):
                    message = str(self._eval(str(v["messageExpression"]), activation))
            return str(v.get("reason") or "Invalid"), message
        return None
