"""Status conditions in the Kubernetes convention (metav1.Condition), and how to update them.

``lastTransitionTime`` records when the *status* last changed, so a condition that is merely
re-asserted keeps its old time: rewriting it on every reconcile would hide how long a pool has
been broken and would make every resync produce a write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal, cast, get_args

from eipctl.core.fields import (
    ResourceError,
    as_list,
    as_mapping,
    format_time,
    get_int,
    get_str,
    join,
    normalize_time,
    parse_time,
)

ConditionStatus = Literal["True", "False", "Unknown"]
CONDITION_STATUSES: Final = frozenset(get_args(ConditionStatus))

READY: Final = "Ready"


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One observation; ``last_transition_time`` is normalised to UTC whole seconds."""

    type: str
    status: ConditionStatus
    last_transition_time: datetime
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "last_transition_time", normalize_time(self.last_transition_time))

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "condition") -> Condition:
        status = get_str(d, "status", path, required=True)
        if status not in CONDITION_STATUSES:
            raise ResourceError(join(path, "status"), f"{status!r} is not True/False/Unknown")
        if d.get("lastTransitionTime") is None:
            raise ResourceError(join(path, "lastTransitionTime"), "required")
        return cls(
            type=get_str(d, "type", path, required=True),
            status=cast(ConditionStatus, status),
            last_transition_time=parse_time(
                d["lastTransitionTime"], join(path, "lastTransitionTime")
            ),
            reason=get_str(d, "reason", path),
            message=get_str(d, "message", path),
            observed_generation=get_int(d, "observedGeneration", path),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": format_time(self.last_transition_time),
        }
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out


def conditions_from_list(value: object, path: str) -> tuple[Condition, ...]:
    """Parse a ``conditions`` list; a type may appear only once (it is a map keyed by type)."""
    if value is None:
        return ()
    items = as_list(value, path)
    parsed = tuple(
        Condition.from_dict(as_mapping(item, join(path, i)), join(path, i))
        for i, item in enumerate(items)
    )
    seen: set[str] = set()
    for i, condition in enumerate(parsed):
        if condition.type in seen:
            raise ResourceError(join(join(path, i), "type"), f"duplicate {condition.type!r}")
        seen.add(condition.type)
    return parsed


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def set_condition(conditions: Sequence[Condition], new: Condition) -> tuple[Condition, ...]:
    """``conditions`` with ``new`` in place of the condition of the same type.

    ``new.last_transition_time`` should be "now"; it is replaced by the old time when the
    status did not change. The result equals the input when nothing changed, so a caller can
    compare the two and skip the write. Order is kept; a new type is appended.
    """
    old = find_condition(conditions, new.type)
    if old is None:
        return (*conditions, new)
    if old.status == new.status:
        new = replace(new, last_transition_time=old.last_transition_time)
    return tuple(new if c.type == new.type else c for c in conditions)


def readable_conditions(value: object) -> tuple[Condition, ...]:
    """The conditions of a ``conditions`` value that parse, in order; the rest are dropped.

    Lenient where `conditions_from_list` is strict: an entry that does not parse (a hand edit
    the schema missed) is skipped, a type seen again after its first entry is skipped, and a
    value that is not a list reads as no conditions.
    """
    if not isinstance(value, list | tuple):
        return ()
    readable: list[Condition] = []
    for item in value:
        if not isinstance(item, Mapping):
            continue
        try:
            condition = Condition.from_dict(item)
        except ResourceError:
            continue
        if find_condition(readable, condition.type) is None:
            readable.append(condition)
    return tuple(readable)


def put_condition(status: dict[str, Any], new: Condition, *, only_if_present: bool = False) -> None:
    """`set_condition` on a status dict's ``conditions``, written only if it changed.

    The one writer of conditions. ``only_if_present``: update the condition of that type if
    there is one, add none (clearing a problem that was never reported writes nothing).

    A malformed list is read with `readable_conditions`: unreadable entries are dropped, the
    readable ones kept. That is the safe choice for every writer. Each writes the one
    condition it owns; raising would block that write for good (a claim never marked Bound
    because of someone's hand edit), and replacing the list would erase the conditions other
    processes own (Scheduled, InPool) along with the broken entry. What is dropped is what
    the schema would have refused.
    """
    current = readable_conditions(status.get("conditions"))
    if only_if_present and find_condition(current, new.type) is None:
        return
    updated = set_condition(current, new)
    if updated != current:
        status["conditions"] = [c.to_dict() for c in updated]
