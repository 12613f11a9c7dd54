"""Kubernetes label selectors (matchLabels + matchExpressions) and matching, without a client.

Pools restrict who may draw from them (serviceSelector, namespaceSelector) and which IpNodes
may hold their IPs (nodeSelector). Matching follows metav1.LabelSelector: all terms must hold,
an empty selector matches everything. An *absent* selector field also matches everything
(see ``matches``), because for a pool "no selector" means "no restriction"; this differs from
client-go, where a nil selector matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast, get_args

from eipctl.core.fields import (
    ResourceError,
    as_mapping,
    get_list,
    get_str,
    get_str_list,
    get_str_map,
    join,
)

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
OPERATORS: Final = frozenset(get_args(Operator))


@dataclass(frozen=True, kw_only=True)
class Requirement:
    """One matchExpressions term; In/NotIn need values, Exists/DoesNotExist take none."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str) -> Requirement:
        operator = get_str(d, "operator", path, required=True)
        if operator not in OPERATORS:
            raise ResourceError(
                join(path, "operator"), f"{operator!r} is not one of {sorted(OPERATORS)}"
            )
        values = get_str_list(d, "values", path)
        if operator in ("In", "NotIn") and not values:
            raise ResourceError(join(path, "values"), f"{operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ResourceError(join(path, "values"), f"{operator} takes no values")
        return cls(
            key=get_str(d, "key", path, required=True),
            operator=cast(Operator, operator),
            values=values,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, kw_only=True)
class LabelSelector:
    """metav1.LabelSelector. ``match_labels`` is copied on construction; treat it as read-only."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_labels", dict(self.match_labels))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True if ``labels`` satisfy every term; the empty selector matches everything."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "selector") -> LabelSelector:
        field_path = join(path, "matchExpressions")
        return cls(
            match_labels=get_str_map(d, "matchLabels", path),
            match_expressions=tuple(
                Requirement.from_dict(as_mapping(e, join(field_path, i)), join(field_path, i))
                for i, e in enumerate(get_list(d, "matchExpressions", path))
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [r.to_dict() for r in self.match_expressions]
        return out


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` pass an optional selector field; an absent selector admits all."""
    return selector is None or selector.matches(labels)
