"""Conditions: lastTransitionTime moves only when the status does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from eipctl.core.conditions import (
    Condition,
    conditions_from_list,
    find_condition,
    put_condition,
    readable_conditions,
    set_condition,
)
from eipctl.core.fields import ResourceError

T0 = datetime(2026, 11, 30, 5, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def ready(status: str, when: datetime, reason: str = "Ok") -> Condition:
    return Condition(type="Ready", status=status, last_transition_time=when, reason=reason)  # type: ignore[arg-type]


def test_new_type_is_appended() -> None:
    other = Condition(type="Overlap", status="False", last_transition_time=T0)
    assert set_condition((other,), ready("True", T1)) == (other, ready("True", T1))


def test_same_status_keeps_transition_time_but_updates_details() -> None:
    result = set_condition((ready("False", T0, "BadCidr"),), ready("False", T1, "Overlap"))
    assert result == (ready("False", T0, "Overlap"),)


def test_status_change_moves_transition_time() -> None:
    assert set_condition((ready("False", T0),), ready("True", T1)) == (ready("True", T1),)


def test_unchanged_condition_gives_equal_tuple_and_input_untouched() -> None:
    before = (ready("True", T0), Condition(type="Other", status="Unknown", last_transition_time=T0))
    after = set_condition(before, ready("True", T1))
    assert after == before
    assert before[0].last_transition_time == T0
    assert find_condition(after, "Other") is before[1]
    assert find_condition(after, "Missing") is None


def test_put_condition_writes_only_a_change_and_replaces_an_unreadable_list() -> None:
    status: dict[str, object] = {"conditions": [ready("True", T0).to_dict()]}
    kept = status["conditions"]
    put_condition(status, ready("True", T1))
    assert status["conditions"] is kept  # unchanged: the list is not even rewritten
    put_condition(status, ready("False", T1, "Overlap"))
    assert status["conditions"] == [ready("False", T1, "Overlap").to_dict()]
    broken: dict[str, object] = {"conditions": "not a list"}
    put_condition(broken, ready("True", T1))
    assert broken["conditions"] == [ready("True", T1).to_dict()]


def test_put_condition_keeps_the_readable_entries_of_a_malformed_list() -> None:
    """One rule for every writer: unreadable entries are dropped, the rest kept, so a hand
    edit the schema missed neither blocks the write nor erases another writer's condition."""
    other = Condition(type="Other", status="True", last_transition_time=T0)
    status: dict[str, object] = {
        "conditions": [
            {"type": "Ready", "status": "Maybe", "lastTransitionTime": "2026-11-30T05:00:00Z"},
            "not a condition",
            other.to_dict(),
            {**other.to_dict(), "status": "False"},  # a type seen twice: the first counts
        ]
    }
    put_condition(status, ready("True", T1))
    assert status["conditions"] == [other.to_dict(), ready("True", T1).to_dict()]
    assert readable_conditions(None) == () and readable_conditions({"a": 1}) == ()


def test_put_condition_only_if_present_adds_nothing() -> None:
    status: dict[str, object] = {}
    put_condition(status, ready("False", T1), only_if_present=True)
    assert status == {}
    put_condition(status, ready("True", T0))
    put_condition(status, ready("False", T1), only_if_present=True)
    assert status["conditions"] == [ready("False", T1).to_dict()]


def test_time_normalised_to_utc_seconds() -> None:
    local = datetime(2026, 11, 30, 7, 0, 0, 999_999, tzinfo=timezone(timedelta(hours=2)))
    condition = ready("True", local)
    assert condition.last_transition_time == T0
    assert condition.to_dict()["lastTransitionTime"] == "2026-11-30T05:00:00Z"
    with pytest.raises(ValueError, match="naive"):
        ready("True", datetime(2026, 1, 1))


def test_round_trip() -> None:
    d = {
        "type": "Ready",
        "status": "False",
        "lastTransitionTime": "2026-11-30T05:00:00Z",
        "reason": "Overlap",
        "message": "overlaps pool b",
        "observedGeneration": 3,
    }
    assert Condition.from_dict(d).to_dict() == d
    assert (
        Condition.from_dict({**d, "lastTransitionTime": "2026-11-30T06:00:00+01:00"}).to_dict() == d
    )


@pytest.mark.parametrize(
    ("items", "field"),
    [
        (
            [{"type": "Ready", "status": "Yes", "lastTransitionTime": "2026-11-30T05:00:00Z"}],
            "status.conditions[0].status",
        ),
        ([{"type": "Ready", "status": "True"}], "status.conditions[0].lastTransitionTime"),
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}],
            "status.conditions[0].lastTransitionTime",
        ),
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T05:00:00"}],
            "status.conditions[0].lastTransitionTime",
        ),
        (
            [{"status": "True", "lastTransitionTime": "2026-11-30T05:00:00Z"}],
            "status.conditions[0].type",
        ),
        (
            [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": "2026-11-30T05:00:00Z",
                    "observedGeneration": -1,
                }
            ],
            "status.conditions[0].observedGeneration",
        ),
        (
            [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T05:00:00Z"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-30T05:00:00Z"},
            ],
            "status.conditions[1].type",
        ),
        ("Ready", "status.conditions"),
        (["Ready"], "status.conditions[0]"),
    ],
)
def test_parse_errors_name_the_field(items: object, field: str) -> None:
    with pytest.raises(ResourceError) as info:
        conditions_from_list(items, "status.conditions")
    assert info.value.field == field
