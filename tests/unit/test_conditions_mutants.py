"""core/conditions.py and core/selectors.py: parse errors name the field and say what is
wrong, exactly (docs/testing.md, "Mutation")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.conditions import Condition, conditions_from_list, put_condition
from eipctl.core.fields import ResourceError
from eipctl.core.selectors import LabelSelector, Requirement, matches

WHEN = "2026-01-01T00:00:00Z"
T = datetime(2026, 1, 2, tzinfo=UTC)

ERRORS: list[tuple[str, Callable[[], Any], str]] = [
    ("no status", lambda: Condition.from_dict({"type": "Ready"}), "condition.status: required"),
    (
        "bad status",
        lambda: Condition.from_dict({"type": "Ready", "status": "Yes"}),
        "condition.status: 'Yes' is not True/False/Unknown",
    ),
    (
        "no time",
        lambda: Condition.from_dict({"type": "Ready", "status": "True"}),
        "condition.lastTransitionTime: required",
    ),
    (
        "reason",
        lambda: Condition.from_dict(
            {"type": "R", "status": "True", "lastTransitionTime": WHEN, "reason": 1}
        ),
        "condition.reason: expected a string, got int",
    ),
    (
        "message",
        lambda: Condition.from_dict(
            {"type": "R", "status": "True", "lastTransitionTime": WHEN, "message": 1}
        ),
        "condition.message: expected a string, got int",
    ),
    (
        "duplicate",
        lambda: conditions_from_list(
            [
                {"type": "R", "status": "True", "lastTransitionTime": WHEN},
                {"type": "R", "status": "False", "lastTransitionTime": WHEN},
            ],
            "status.conditions",
        ),
        "status.conditions[1].type: duplicate 'R'",
    ),
    (
        "no operator",
        lambda: Requirement.from_dict({"key": "k"}, "sel.matchExpressions[0]"),
        "sel.matchExpressions[0].operator: required",
    ),
    (
        "bad operator",
        lambda: Requirement.from_dict({"key": "k", "operator": "Is"}, "r"),
        "r.operator: 'Is' is not one of ['DoesNotExist', 'Exists', 'In', 'NotIn']",
    ),
    (
        "values type",
        lambda: Requirement.from_dict({"key": "k", "operator": "In", "values": "a"}, "r"),
        "r.values: expected a list, got str",
    ),
    (
        "In empty",
        lambda: Requirement.from_dict({"key": "k", "operator": "In"}, "r"),
        "r.values: In needs at least one value",
    ),
    (
        "NotIn empty",
        lambda: Requirement.from_dict({"key": "k", "operator": "NotIn", "values": []}, "r"),
        "r.values: NotIn needs at least one value",
    ),
    (
        "Exists values",
        lambda: Requirement.from_dict({"key": "k", "operator": "Exists", "values": ["a"]}, "r"),
        "r.values: Exists takes no values",
    ),
    (
        "DoesNotExist values",
        lambda: Requirement.from_dict(
            {"key": "k", "operator": "DoesNotExist", "values": ["a"]}, "r"
        ),
        "r.values: DoesNotExist takes no values",
    ),
    (
        "selector default path",
        lambda: LabelSelector.from_dict({"matchLabels": {"a": 1}}),
        "selector.matchLabels.a: expected a string, got int",
    ),
    (
        "expressions type",
        lambda: LabelSelector.from_dict({"matchExpressions": "x"}),
        "selector.matchExpressions: expected a list, got str",
    ),
]


@pytest.mark.parametrize(("case", "call", "message"), ERRORS, ids=[c for c, _, _ in ERRORS])
def test_errors_name_the_field_and_the_problem(
    case: str, call: Callable[[], Any], message: str
) -> None:
    with pytest.raises(ResourceError) as caught:
        call()
    assert str(caught.value) == message


def test_an_optional_selector_field_is_applied_to_the_labels_given() -> None:
    selector = LabelSelector(match_labels={"team": "x"})
    assert matches(selector, {"team": "x"})
    assert not matches(selector, {"team": "y"})
    assert matches(None, {})


@given(
    status=st.sampled_from(["True", "False", "Unknown"]),
    reason=st.sampled_from(["", "Overlap", "NoLiveNode"]),
    message=st.text(max_size=20),
    generation=st.none() | st.integers(0, 10),
)
def test_a_condition_is_written_back_as_it_was_read(
    status: str, reason: str, message: str, generation: int | None
) -> None:
    """`put_condition` rewrites every readable condition from its parse: another process's
    condition without a reason or message must come back without one, not with ``""``."""
    d: dict[str, Any] = {"type": "Other", "status": status, "lastTransitionTime": WHEN}
    if reason:
        d["reason"] = reason
    if message:
        d["message"] = message
    if generation is not None:
        d["observedGeneration"] = generation
    assert Condition.from_dict(d).to_dict() == d
    status_dict: dict[str, Any] = {"conditions": [dict(d)]}
    put_condition(status_dict, Condition(type="Mine", status="True", last_transition_time=T))
    assert status_dict["conditions"][0] == d
