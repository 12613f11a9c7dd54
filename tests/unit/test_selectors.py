"""Label selector matching and parsing (metav1.LabelSelector semantics)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.fields import ResourceError
from eipctl.core.selectors import LabelSelector, Requirement, matches

LABELS = {"zone": "a", "tier": "edge"}
small_text = st.sampled_from(["zone", "tier", "app", "a", "b", "edge"])
label_maps = st.dictionaries(small_text, small_text, max_size=4)


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (Requirement(key="zone", operator="In", values=("a", "b")), True),
        (Requirement(key="zone", operator="In", values=("b",)), False),
        (Requirement(key="rack", operator="In", values=("a",)), False),
        (Requirement(key="zone", operator="NotIn", values=("b",)), True),
        (Requirement(key="zone", operator="NotIn", values=("a",)), False),
        (Requirement(key="rack", operator="NotIn", values=("a",)), True),
        (Requirement(key="tier", operator="Exists"), True),
        (Requirement(key="rack", operator="Exists"), False),
        (Requirement(key="rack", operator="DoesNotExist"), True),
        (Requirement(key="tier", operator="DoesNotExist"), False),
    ],
)
def test_requirement(requirement: Requirement, expected: bool) -> None:
    assert requirement.matches(LABELS) is expected
    assert LabelSelector(match_expressions=(requirement,)).matches(LABELS) is expected


def test_all_terms_must_hold() -> None:
    selector = LabelSelector(
        match_labels={"zone": "a"},
        match_expressions=(Requirement(key="tier", operator="In", values=("core",)),),
    )
    assert not selector.matches(LABELS)
    assert selector.matches({"zone": "a", "tier": "core"})
    assert not LabelSelector(match_labels={"zone": "b"}).matches(LABELS)


@given(label_maps)
def test_empty_and_absent_selectors_match_everything(labels: dict[str, str]) -> None:
    assert LabelSelector().matches(labels)
    assert matches(None, labels)


@given(label_maps, label_maps)
def test_match_labels_is_subset(selector_labels: dict[str, str], labels: dict[str, str]) -> None:
    expected = selector_labels.items() <= labels.items()
    assert LabelSelector(match_labels=selector_labels).matches(labels) is expected


def test_match_labels_copied() -> None:
    source = {"zone": "a"}
    selector = LabelSelector(match_labels=source)
    source["zone"] = "b"
    assert selector.matches({"zone": "a"})


def test_round_trip() -> None:
    d = {
        "matchLabels": {"zone": "a"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["edge", "core"]},
            {"key": "gpu", "operator": "DoesNotExist"},
        ],
    }
    assert LabelSelector.from_dict(d).to_dict() == d


@pytest.mark.parametrize(
    "d",
    [
        {},
        {"matchLabels": {"zone": "a"}},
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]},
    ],
    ids=["empty", "labels-only", "expressions-only"],
)
def test_a_partial_selector_is_written_back_without_the_absent_part(d: dict[str, object]) -> None:
    """No ``matchLabels: {}`` is added to a selector that had none (a rewrite of the pool or
    peer that holds it changes only what changed)."""
    assert LabelSelector.from_dict(d).to_dict() == d


@pytest.mark.parametrize(
    ("d", "field"),
    [
        ({"matchLabels": {"zone": 1}}, "nodeSelector.matchLabels.zone"),
        ({"matchLabels": ["zone"]}, "nodeSelector.matchLabels"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Has"}]},
            "nodeSelector.matchExpressions[0].operator",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "nodeSelector.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "nodeSelector.matchExpressions[0].values",
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, "nodeSelector.matchExpressions[0].key"),
        ({"matchExpressions": ["zone"]}, "nodeSelector.matchExpressions[0]"),
    ],
)
def test_parse_errors_name_the_field(d: dict[str, object], field: str) -> None:
    with pytest.raises(ResourceError) as info:
        LabelSelector.from_dict(d, "nodeSelector")
    assert info.value.field == field
