"""CRD ``x-kubernetes-validations``: the CEL rules, evaluated as the apiextensions apiserver
evaluates them, after the schema checks and only when those found nothing blocking.

A failing rule is a cause worded as Kubernetes words it, on the field the rule sits on (plus
the rule's ``fieldPath``): ``spec.cidr: Invalid value: "string": <message>`` (the value shown
is the schema type, not the value). ``message``, ``messageExpression`` (used when it
evaluates to a non-empty one-line string), ``reason`` (FieldValueInvalid, Forbidden,
Required, Duplicate) are honoured; a rule that fails to compile or evaluate is an Invalid
cause too. Rules that use ``oldSelf`` (transition rules) run only on an update, for a value
that has an old counterpart: through object properties and map keys, and items of
``x-kubernetes-list-type: map`` lists matched by their keys. A rule on the root is reported
on the field ``<nil>``, as a real apiserver does.

Functions: cel-python's standard library plus the Kubernetes IP/CIDR library (cel_net.py).
cel-python takes about half a millisecond per evaluation, so verdicts on scalar values are
cached per rule: an IpNode heartbeat rewrites the same addresses several times a second.
Without cel-python installed (it is a test extra), only ``self == oldSelf`` is understood and
every other rule is skipped, with one warning.

Not emulated: the cost estimate and runtime cost budget, ratcheting of unchanged invalid
values (CRDValidationRatcheting), ``optionalOldSelf`` (cel-python has no optional values),
rules inside allOf/anyOf/oneOf, escaping of property names (``__dash__``), the other
Kubernetes CEL libraries (lists, regex ``find``, quantity, url, format).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from datetime import datetime
from functools import lru_cache
from typing import Any, Protocol, cast

import structlog

log = structlog.get_logger(__name__)

Cause = dict[str, str]
Obj = dict[str, Any]
ABSENT: Any = object()
"""No old value to compare with (a create, or a value with no old counterpart)."""

BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
"""Schema failures after which the apiserver does not run the CEL rules."""

NOT_CHECKED: Cause = {
    "reason": "FieldValueInvalid",
    "field": "<nil>",
    "message": 'Invalid value: "null": some validation rules were not checked because the '
    "object was invalid; correct the existing errors to complete validation",
}
_OLD_SELF = re.compile(r"\boldSelf\b")
_MAX_MESSAGE = 5 * 1024
_CACHE_SIZE = 8192


class RuleError(Exception):
    """A rule that did not compile, or did not evaluate."""


class _Evaluator(Protocol):
    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        """The rule's verdict; raises RuleError."""
        ...

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        """A messageExpression's string, or None when it is not one."""
        ...


class _CelEvaluator:
    """cel-python with the Kubernetes IP/CIDR library; programs cached by expression."""

    def __init__(self) -> None:
        import celpy
        from celpy import celtypes
        from celpy.celparser import CELParseError
        from celpy.evaluation import CELEvalError

        from . import cel_net

        self._parse_error = CELParseError
        self._eval_error = CELEvalError
        self._types = celtypes
        self._net = cel_net
        self._env = celpy.Environment()
        self._programs: dict[str, Any] = {}

    def _program(self, expression: str) -> Any:
        prog = self._programs.get(expression)
        if prog is None:
            try:
                ast = self._env.compile(expression)
            except self._parse_error as exc:
                raise RuleError(f"rule compile error: {exc}") from exc
            prog = self._env.program(ast, functions=cast(Any, self._net.FUNCTIONS))
            self._programs[expression] = prog
        return prog

    def _evaluate(self, expression: str, self_value: Any, old_value: Any) -> Any:
        activation: dict[str, Any] = {**self._net.VARIABLES, "self": _to_cel(self_value)}
        if old_value is not ABSENT:
            activation["oldSelf"] = _to_cel(old_value)
        try:
            return self._program(expression).evaluate(activation)
        except self._eval_error as exc:
            raise RuleError(str(exc.args[0] if exc.args else exc)) from exc

    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        result = self._evaluate(expression, self_value, old_value)
        if not isinstance(result, self._types.BoolType):
            raise RuleError(f"rule evaluated to {type(result).__name__}, not bool")
        return bool(result)

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        try:
            result = self._evaluate(expression, self_value, old_value)
        except RuleError:
            return None
        return str(result) if isinstance(result, str) else None


class _ImmutableOnly:
    """Without cel-python: ``self == oldSelf`` only."""

    def holds(self, expression: str, self_value: Any, old_value: Any) -> bool:
        if "".join(expression.split()) == "self==oldSelf":
            return bool(self_value == old_value)
        return True

    def text(self, expression: str, self_value: Any, old_value: Any) -> str | None:
        return None


@lru_cache(maxsize=1)
def _evaluator() -> _Evaluator:
    try:
        return _CelEvaluator()
    except ImportError:
        log.warning(
            "cel.unavailable",
            detail="cel-python is not installed: CRD x-kubernetes-validations other than "
            "self == oldSelf are not checked",
        )
        return _ImmutableOnly()


def _to_cel(value: Any) -> Any:
    from celpy.adapter import json_to_cel

    return json_to_cel(value)


def _typed(schema: Obj, value: Any) -> Any:
    if isinstance(value, dict):
        props: Obj = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {
            k: _typed(props.get(k) or (extra if isinstance(extra, dict) else {}), v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = schema.get("items")
        return [_typed(items if isinstance(items, dict) else {}, v) for v in value]
    if isinstance(value, str) and schema.get("format") == "date-time":
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, int) and not isinstance(value, bool) and schema.get("type") == "number":
        return float(value)
    return value


def has_rules(schema: Any) -> bool:
    """Whether any node of the schema carries x-kubernetes-validations (memoized: schemas
    live as long as their CRD and are never mutated)."""
    if not isinstance(schema, dict):
        return False
    memo = _HAS_RULES.get(id(schema))
    if memo is not None and memo[0] is schema:
        return memo[1]
    found = bool(schema.get("x-kubernetes-validations")) or any(
        has_rules(c)
        for c in [
            *(schema.get("properties") or {}).values(),
            schema.get("items"),
            schema.get("additionalProperties"),
        ]
    )
    if len(_HAS_RULES) > 20_000:
        _HAS_RULES.clear()
    _HAS_RULES[id(schema)] = (schema, found)
    return found


_HAS_RULES: dict[int, tuple[Obj, bool]] = {}


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _field_path(path: str, rule_path: str) -> str:
    """The rule's fieldPath (``.a.b`` or ``['a'].b``) under the node's path."""
    parts = re.findall(r"\.([^.\[\]]+)|\['((?:[^'\\]|\\.)*)'\]", rule_path)
    for dotted, quoted in parts:
        path = _child(path, dotted or quoted)
    return path


class Checker:
    """Runs the rules of one schema over an object (and its old version on update)."""

    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self._eval = _evaluator()

    def walk(self, s: Obj, value: Any, old: Any, path: str) -> None:
        """The rules of ``s`` on ``value``, then those below it."""
        if value is None or not has_rules(s):
            return
        for rule in s.get("x-kubernetes-validations") or ():
            if isinstance(rule, dict) and rule.get("rule"):
                self._rule(s, rule, value, old, path)
        if isinstance(value, dict):
            self._object(s, value, old, path)
        elif isinstance(value, list):
            self._array(s, value, old, path)

    def _object(self, s: Obj, value: Obj, old: Any, path: str) -> None:
        props: Obj = s.get("properties") or {}
        extra = s.get("additionalProperties")
        olds: Obj = old if isinstance(old, dict) else {}
        for key, child in value.items():
            if key in props:
                sub, sub_path = props[key], _child(path, key)
            elif isinstance(extra, dict):
                sub, sub_path = extra, f"{path}[{key}]"
            else:
                continue
            self.walk(sub, child, olds.get(key, ABSENT), sub_path)

    def _array(self, s: Obj, value: list[Any], old: Any, path: str) -> None:
        items = s.get("items")
        if not isinstance(items, dict):
            return
        keys = s.get("x-kubernetes-list-map-keys") or []
        by_key: dict[str, Any] = {}
        if s.get("x-kubernetes-list-type") == "map" and keys and isinstance(old, list):
            by_key = {_key(o, keys): o for o in old if isinstance(o, dict)}
        for i, item in enumerate(value):
            old_item = by_key.get(_key(item, keys), ABSENT) if by_key else ABSENT
            self.walk(items, item, old_item, f"{path}[{i}]")

    def _rule(self, s: Obj, rule: Obj, value: Any, old: Any, path: str) -> None:
        text = str(rule["rule"])
        uses_old = bool(_OLD_SELF.search(text))
        if uses_old and old is ABSENT:
            return  # transition rules need an old value
        field = path or "<nil>"
        kind = str(s.get("type", ""))
        label = str(rule.get("message") or "").strip() or text.strip()
        try:
            detail = self._outcome(s, rule, value, old if uses_old else ABSENT)
        except RuleError as exc:
            msg = str(exc)
            if not msg.startswith("rule compile error"):
                msg = f"{msg} evaluating rule: {label}"
            self.causes.append(_invalid(field, kind, msg))
            return
        if detail is None:
            return
        field = _field_path(path, str(rule.get("fieldPath") or "")) or "<nil>"
        self.causes.append(_cause(field, kind, detail, str(rule.get("reason") or "")))

    def _outcome(self, s: Obj, rule: Obj, value: Any, old: Any) -> str | None:
        """None when the rule holds, else the detail of its failure (cached for scalars)."""
        if old is ABSENT and isinstance(value, str | int | float | bool):
            parts = [rule.get(k) for k in ("rule", "message", "messageExpression")]
            key = json.dumps([*parts, s.get("type"), s.get("format"), value])
            cached = _RESULTS.get(key)
            if cached is not None:
                _RESULTS.move_to_end(key)
                return cached[0]
            outcome = self._judge(s, rule, value, old)
            _RESULTS[key] = (outcome,)
            if len(_RESULTS) > _CACHE_SIZE:
                _RESULTS.popitem(last=False)
            return outcome
        return self._judge(s, rule, value, old)

    def _judge(self, s: Obj, rule: Obj, value: Any, old: Any) -> str | None:
        typed = _typed(s, value)
        typed_old = old if old is ABSENT else _typed(s, old)
        if self._eval.holds(str(rule["rule"]), typed, typed_old):
            return None
        if rule.get("messageExpression"):
            out = self._eval.text(str(rule["messageExpression"]), typed, typed_old)
            text = (out or "").strip()
            if text and "\n" not in text and len(text) <= _MAX_MESSAGE:
                return text
        message = str(rule.get("message") or "").strip()
        return message or f"failed rule: {str(rule['rule']).strip()}"


_RESULTS: OrderedDict[str, tuple[str | None]] = OrderedDict()


def _key(item: Any, keys: list[str]) -> str:
    if not isinstance(item, dict):
        return json.dumps(item)
    return json.dumps([item.get(k) for k in keys])


def _invalid(field: str, kind: str, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "field": field,
        "message": f"Invalid value: {json.dumps(kind)}: {detail}",
    }


def _cause(field: str, kind: str, detail: str, reason: str) -> Cause:
    if reason == "FieldValueForbidden":
        return {"reason": reason, "field": field, "message": f"Forbidden: {detail}"}
    if reason == "FieldValueRequired":
        return {"reason": reason, "field": field, "message": f"Required value: {detail}"}
    if reason == "FieldValueDuplicate":
        return {"reason": reason, "field": field, "message": f"Duplicate value: {json.dumps(kind)}"}
    return _invalid(field, kind, detail)


def check(schema: Obj | None, obj: Obj, old: Obj | None = None) -> list[Cause]:
    """The causes the rules of a CRD's openAPIV3Schema give for ``obj`` (``old`` on update).

    The root ``self`` sees apiVersion, kind and metadata.name/generateName, as in Kubernetes.
    """
    if not schema or not has_rules(schema):
        return []
    checker = Checker()
    meta = obj.get("metadata") or {}
    root = {k: v for k, v in obj.items() if k != "metadata"}
    root["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    old_root: Any = ABSENT
    if old is not None:
        old_meta = old.get("metadata") or {}
        old_root = {k: v for k, v in old.items() if k != "metadata"}
        old_root["metadata"] = {k: old_meta[k] for k in ("name", "generateName") if k in old_meta}
    checker.walk(schema, root, old_root, "")
    return checker.causes


def check_value(schema: Obj, value: Any, path: str = "") -> list[Cause]:
    """The causes the rules at and below one schema node give for a value, as on a create
    (for offline checks of a single field, e.g. tests/unit/test_crds.py)."""
    checker = Checker()
    checker.walk(schema, value, ABSENT, path)
    return checker.causes
