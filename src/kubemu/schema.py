"""CRD openAPIV3Schema validation, defaulting and pruning (the structural-schema subset).

Causes name the field (`spec.cidr`) as the apiserver does, so a client can show the user
which value was refused. The CEL rules (x-kubernetes-validations) run afterwards, in
cel_rules.py, unless a failure here would make them meaningless (as in Kubernetes).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from datetime import datetime
from functools import lru_cache
from typing import Any

from . import cel_rules

Cause = dict[str, str]
_ENVELOPE = ("apiVersion", "kind", "metadata")
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


@lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _show(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _format_ok(fmt: str, value: str) -> bool:
    """The formats that are cheap to check; others are accepted."""
    try:
        if fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "ip":
            ipaddress.ip_address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
        elif fmt == "date-time":
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif fmt == "uuid":
            return (
                _regex(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$").match(value)
                is not None
            )
    except ValueError:
        return False
    return True


class _Walker:
    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.pruned: list[str] = []

    def bad(self, reason: str, path: str, message: str) -> None:
        self.causes.append({"reason": reason, "field": path, "message": message})

    def walk(self, s: dict[str, Any], value: Any, path: str) -> Any:
        if value is None:
            if not s.get("nullable") and ("type" in s or "x-kubernetes-int-or-string" in s):
                want = s.get("type", "integer or string")
                self.bad(
                    "FieldValueTypeInvalid",
                    path,
                    f'Invalid value: "null": {path} in body must be of type {want}: "null"',
                )
            return value
        if s.get("x-kubernetes-int-or-string"):
            if isinstance(value, bool) or not isinstance(value, int | str):
                self.bad(
                    "FieldValueTypeInvalid",
                    path,
                    f"Invalid value: {_show(value)}: {path} in body must be of type "
                    "integer or string",
                )
                return value
        elif "type" in s:
            want = s["type"]
            ok = isinstance(value, _TYPES.get(want, (object,)))
            if want in ("integer", "number") and isinstance(value, bool):
                ok = False
            if want == "integer" and isinstance(value, float) and value.is_integer():
                ok = True
            if not ok:
                got = type(value).__name__
                self.bad(
                    "FieldValueTypeInvalid",
                    path,
                    f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
                )
                return value
        if "enum" in s and value not in s["enum"]:
            allowed = ", ".join(_show(v) for v in s["enum"])
            self.bad(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {_show(value)}: supported values: {allowed}",
            )
        self._junctors(s, value, path)
        if isinstance(value, str):
            self._string(s, value, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._number(s, value, path)
        elif isinstance(value, list):
            self._array(s, value, path)
        elif isinstance(value, dict):
            return self._object(s, value, path)
        return value

    def _fails(self, s: dict[str, Any], value: Any, path: str) -> list[Cause]:
        sub = _Walker()
        sub.walk(s, copy.deepcopy(value), path)
        return sub.causes

    def _junctors(self, s: dict[str, Any], value: Any, path: str) -> None:
        """allOf / anyOf / oneOf / not: value checks only (structural schemas declare no
        fields inside them, so they neither prune nor default)."""
        for alt in s.get("allOf") or ():
            self.causes.extend(self._fails(alt, value, path))
        if s.get("anyOf"):
            results = [self._fails(alt, value, path) for alt in s["anyOf"]]
            if all(results):
                self.causes.extend(
                    results[0][:1]
                    or [
                        {
                            "reason": "FieldValueInvalid",
                            "field": path,
                            "message": "Invalid value: must match anyOf",
                        }
                    ]
                )
        if s.get("oneOf"):
            ok = sum(1 for alt in s["oneOf"] if not self._fails(alt, value, path))
            if ok != 1:
                self.bad(
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {_show(value)}: {path} in body must validate one and "
                    "only one schema (oneOf)",
                )
        if isinstance(s.get("not"), dict) and not self._fails(s["not"], value, path):
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_show(value)}: {path} in body must not validate the schema (not)",
            )

    def _string(self, s: dict[str, Any], value: str, path: str) -> None:
        if "pattern" in s and not _regex(s["pattern"]).search(value):
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_show(value)}: {path} in body should match '{s['pattern']}'",
            )
        if "maxLength" in s and len(value) > s["maxLength"]:
            self.bad(
                "FieldValueTooLong", path, f"Too long: may not be more than {s['maxLength']} bytes"
            )
        if "minLength" in s and len(value) < s["minLength"]:
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_show(value)}: {path} in body should be at least "
                f"{s['minLength']} chars long",
            )
        if "format" in s and not _format_ok(s["format"], value):
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_show(value)}: {path} in body must be of type {s['format']}",
            )

    def _number(self, s: dict[str, Any], value: float, path: str) -> None:
        if "minimum" in s:
            low = s["minimum"]
            if value < low or (s.get("exclusiveMinimum") and value == low):
                rel = "greater than" if s.get("exclusiveMinimum") else "greater than or equal to"
                self.bad(
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be {rel} {low}",
                )
        if "maximum" in s:
            high = s["maximum"]
            if value > high or (s.get("exclusiveMaximum") and value == high):
                rel = "less than" if s.get("exclusiveMaximum") else "less than or equal to"
                self.bad(
                    "FieldValueInvalid",
                    path,
                    f"Invalid value: {_show(value)}: {path} in body should be {rel} {high}",
                )

    def _array(self, s: dict[str, Any], value: list[Any], path: str) -> None:
        if "maxItems" in s and len(value) > s["maxItems"]:
            self.bad(
                "FieldValueTooMany",
                path,
                f"Too many: {len(value)}: must have at most {s['maxItems']} items",
            )
        if "minItems" in s and len(value) < s["minItems"]:
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {len(value)}: {path} in body should have at least "
                f"{s['minItems']} items",
            )
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                value[i] = self.walk(items, item, f"{path}[{i}]")
        self._unique(s, value, path)

    def _unique(self, s: dict[str, Any], value: list[Any], path: str) -> None:
        """x-kubernetes-list-type set (unique items) and map (unique map keys)."""
        kind = s.get("x-kubernetes-list-type")
        keys = s.get("x-kubernetes-list-map-keys") or []
        if kind not in ("set", "map") or (kind == "map" and not keys):
            return
        seen: list[Any] = []
        for i, item in enumerate(value):
            ident = item if kind == "set" else _map_key(item, keys)
            if ident in seen:
                self.bad("FieldValueDuplicate", f"{path}[{i}]", f"Duplicate value: {_show(ident)}")
            else:
                seen.append(ident)

    def _object(self, s: dict[str, Any], value: dict[str, Any], path: str) -> dict[str, Any]:
        props: dict[str, Any] = s.get("properties") or {}
        for key, sub in props.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for req in s.get("required") or ():
            if req not in value:
                self.bad("FieldValueRequired", _join(path, req), "Required value")
        extra = s.get("additionalProperties")
        keep_unknown = bool(s.get("x-kubernetes-preserve-unknown-fields"))
        for key in list(value):
            sub_path = _join(path, key)
            if key in props:
                value[key] = self.walk(props[key], value[key], sub_path)
            elif isinstance(extra, dict):
                value[key] = self.walk(extra, value[key], sub_path)
            elif extra is True or keep_unknown or (path == "" and key in _ENVELOPE):
                continue
            else:
                del value[key]
                self.pruned.append(sub_path)
        return value


def _map_key(item: Any, keys: list[str]) -> Any:
    if not isinstance(item, dict):
        return item
    return {k: item.get(k) for k in keys}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate(
    schema: dict[str, Any] | None,
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    *,
    rules: bool = True,
) -> tuple[list[Cause], list[str]]:
    """Default, prune and validate `obj` in place, then run the CEL rules (against `old` for
    transition rules) unless `rules` is False; returns (causes, pruned field paths)."""
    if not schema:
        return [], []
    w = _Walker()
    root = {k: v for k, v in schema.items() if k != "properties"}
    props = {
        k: v
        for k, v in (schema.get("properties") or {}).items()
        if k not in ("metadata", "apiVersion", "kind")
    }
    root["properties"] = props
    w.walk(root, obj, "")
    causes = w.causes
    if rules and cel_rules.has_rules(schema):
        if any(c["reason"] in cel_rules.BLOCKING for c in causes):
            causes.append(dict(cel_rules.NOT_CHECKED))
        else:
            causes.extend(cel_rules.check(schema, obj, old))
    return causes, w.pruned


def unknown_fields(schema: dict[str, Any] | None, obj: dict[str, Any]) -> list[str]:
    """Fields pruning would drop (fieldValidation=Strict refuses them)."""
    return validate(schema, copy.deepcopy(obj), rules=False)[1]
