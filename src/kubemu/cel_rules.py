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

Ratcheting (CRDValidationRatcheting, KEP-4008, on by default since Kubernetes 1.30, GA in
1.33): on an update, a rule that does not use ``oldSelf`` and evaluates to false on a value
equal to its correlated old value is a warning, not a cause. Values correlate as the
apiserver's ``CorrelatedObject`` does: through object properties and map keys present in
both versions and the items of ``x-kubernetes-list-type: map`` lists matched by their keys;
an item of any other list is judged by its list (its nearest correlatable ancestor). The
emulator does not evaluate such rules at all: on a value stored under the same rules the rule
held when the value was written (CEL is deterministic), so skipping it changes nothing, and
``self == oldSelf`` holds on an unchanged value; a subtree an update leaves unchanged is not
walked unless a transition rule other than that one sits in it. That is what keeps a status
write cheap: celpy takes ~0.4 ms per evaluation, an IpClaim's spec has two rules, and at
10,000 claims the emulator spent ~40 % of its time on them.

Not emulated: the cost estimate and runtime cost budget; a ratcheted failure's Warning
header, and a rule that fails to evaluate on an unchanged value (reported by a real
apiserver, not ratcheted): both need the CRD's rules to have changed since the value was
written; ratcheting of the schema's own checks (schema.py refuses an unchanged invalid value);
``optionalOldSelf`` (cel-python has no optional values), rules inside allOf/anyOf/oneOf,
escaping of property names (``__dash__``), the other Kubernetes CEL libraries (lists, regex
``find``, quantity, url, format).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .cel_eval import ABSENT, Obj, RuleError, is_immutability, typed
from .cel_eval import evaluator as _evaluator

Cause = dict[str, str]

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
_UNRATCHETED = frozenset({"apiVersion", "kind"})
"""Root fields whose rules are never ratcheted (the apiserver converts both versions to the
same type, so they cannot be seen to change)."""
_MAX_MESSAGE = 5 * 1024
_CACHE_SIZE = 65_536
"""Scalar verdicts kept. An IpNode's status.addresses is an atomic list: a write that changes
it has every item judged again (no item correlates with an old one), so the cache has to hold
every address in the cluster or it thrashes (at 10,000 claims an 8,192-entry cache missed on
almost every item: each IpNode write of a node with 100 addresses cost ~40 ms of celpy)."""


def has_rules(schema: Any) -> bool:
    """Whether any node of the schema carries x-kubernetes-validations."""
    return _anywhere(_HAS_RULES, schema, lambda node: bool(node.get("x-kubernetes-validations")))


def has_live_transition_rules(schema: Any) -> bool:
    """Whether a node of the schema has a transition rule other than ``self == oldSelf``:
    the only rules an unchanged value still has to pass."""
    return _anywhere(_LIVE_TRANSITIONS, schema, _has_live_transition)


def _has_live_transition(node: Obj) -> bool:
    texts = [
        str(r.get("rule"))
        for r in node.get("x-kubernetes-validations") or ()
        if isinstance(r, dict) and r.get("rule")
    ]
    return any(_OLD_SELF.search(t) and not is_immutability(t) for t in texts)


def _anywhere(memo: dict[int, tuple[Obj, bool]], schema: Any, here: Callable[[Obj], bool]) -> bool:
    """Whether ``here`` holds at any node of the schema (memoized per schema node: schemas
    live as long as their CRD and are never mutated)."""
    if not isinstance(schema, dict):
        return False
    seen = memo.get(id(schema))
    if seen is not None and seen[0] is schema:
        return seen[1]
    found = here(schema) or any(
        _anywhere(memo, c, here)
        for c in [
            *(schema.get("properties") or {}).values(),
            schema.get("items"),
            schema.get("additionalProperties"),
        ]
    )
    if len(memo) > 20_000:
        memo.clear()
    memo[id(schema)] = (schema, found)
    return found


_HAS_RULES: dict[int, tuple[Obj, bool]] = {}
_LIVE_TRANSITIONS: dict[int, tuple[Obj, bool]] = {}


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

    def walk(self, s: Obj, value: Any, old: Any, path: str, unchanged: bool = False) -> None:
        """The rules of ``s`` on ``value``, then those below it. ``unchanged``: the value, or
        its nearest correlatable ancestor, equals its old value (ratcheting)."""
        if value is None or not has_rules(s):
            return
        if unchanged and path and not has_live_transition_rules(s):
            return  # every rule here and below is ratcheted or holds (the root goes on:
            # its apiVersion and kind are never ratcheted)
        for rule in s.get("x-kubernetes-validations") or ():
            if not isinstance(rule, dict) or not rule.get("rule"):
                continue
            text = str(rule["rule"])
            if unchanged and (not _OLD_SELF.search(text) or is_immutability(text)):
                continue  # ratcheted (a failure would be a warning), or holds
            self._rule(s, rule, value, old, path)
        if isinstance(value, dict):
            self._object(s, value, old, path, unchanged)
        elif isinstance(value, list):
            self._array(s, value, old, path, unchanged)

    def _object(self, s: Obj, value: Obj, old: Any, path: str, unchanged: bool) -> None:
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
            old_child = olds.get(key, ABSENT)
            if not path and key in _UNRATCHETED:
                same = False
            else:
                same = unchanged or (old_child is not ABSENT and child == old_child)
            self.walk(sub, child, old_child, sub_path, same)

    def _array(self, s: Obj, value: list[Any], old: Any, path: str, unchanged: bool) -> None:
        items = s.get("items")
        if not isinstance(items, dict):
            return
        keys = s.get("x-kubernetes-list-map-keys") or []
        by_key: dict[str, Any] = {}
        if s.get("x-kubernetes-list-type") == "map" and keys and isinstance(old, list):
            by_key = {_key(o, keys): o for o in old if isinstance(o, dict)}
        for i, item in enumerate(value):
            old_item = by_key.get(_key(item, keys), ABSENT) if by_key else ABSENT
            # an item no old item correlates with is judged by its list (``unchanged``)
            same = unchanged or (old_item is not ABSENT and item == old_item)
            self.walk(items, item, old_item, f"{path}[{i}]", same)

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
            key = (
                *(str(rule.get(k) or "") for k in ("rule", "message", "messageExpression")),
                str(s.get("type", "")),
                str(s.get("format", "")),
                type(value),  # 1, 1.0 and True are equal keys otherwise
                value,
            )
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
        now = typed(s, value)
        before = old if old is ABSENT else typed(s, old)
        if self._eval.holds(str(rule["rule"]), now, before):
            return None
        if rule.get("messageExpression"):
            out = self._eval.text(str(rule["messageExpression"]), now, before)
            text = (out or "").strip()
            if text and "\n" not in text and len(text) <= _MAX_MESSAGE:
                return text
        message = str(rule.get("message") or "").strip()
        return message or f"failed rule: {str(rule['rule']).strip()}"


_RESULTS: OrderedDict[tuple[Any, ...], tuple[str | None]] = OrderedDict()


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
    checker.walk(schema, root, old_root, "", old is not None and obj == old)
    return checker.causes


def check_value(schema: Obj, value: Any, path: str = "") -> list[Cause]:
    """The causes the rules at and below one schema node give for a value, as on a create
    (for offline checks of a single field, e.g. tests/unit/test_crds.py)."""
    checker = Checker()
    checker.walk(schema, value, ABSENT, path)
    return checker.causes
