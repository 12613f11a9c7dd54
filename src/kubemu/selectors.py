"""Label and field selectors, parsed once per request and matched per object."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside a `(...)` value set."""
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    m = _EQ_RE.match(term)
    if m:
        key, op, val = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != val
        return lambda labels: labels.get(key) == val
    m = _SET_RE.match(term)
    if m:
        neg, key, op, values = m.groups()
        if op is None:
            if neg:
                return lambda labels: key not in labels
            return lambda labels: key in labels
        if neg:
            raise bad_request(f"unable to parse requirement: {term!r}")
        vals = frozenset(v.strip() for v in values.split(",") if v.strip())
        if op == "in":
            return lambda labels: labels.get(key) in vals
        return lambda labels: labels.get(key) not in vals
    raise bad_request(f"unable to parse requirement: invalid label selector {term!r}")


def label_selector(text: str | None) -> Predicate | None:
    """Parse a labelSelector query value; None means everything matches."""
    if not text:
        return None
    terms = [_label_term(t) for t in _split_terms(text)]

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return match


def _field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    return str(cur)


FieldGetter = Callable[[dict[str, Any]], str]


def _plain_path(label: str) -> FieldGetter:
    return lambda obj: _field_value(obj, label)


def field_selector(
    text: str | None, resolve: Callable[[str], FieldGetter] | None = None
) -> Predicate | None:
    """Parse a fieldSelector (`=`, `==`, `!=` terms). `resolve` turns each label into the
    value it selects on, raising 400 for a label the resource does not support (see
    field_labels.py); without it every label is a plain dotted path."""
    if not text:
        return None
    reqs: list[tuple[FieldGetter, bool, str]] = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        label, op, val = m.groups()
        getter = (resolve or _plain_path)(label)
        reqs.append((getter, op != "!=", val))

    def match(obj: dict[str, Any]) -> bool:
        return all((get(obj) == v) == eq for get, eq, v in reqs)

    return match


def combine(*preds: Predicate | None) -> Predicate | None:
    """AND of the given predicates, None when there is nothing to check."""
    live = [p for p in preds if p is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]
    return lambda obj: all(p(obj) for p in live)
