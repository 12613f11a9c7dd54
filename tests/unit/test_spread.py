"""`SpreadChoice` answers what `fewest` answers, claim after claim, however loads grow."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.spread import SpreadChoice, fewest

NAMES = [f"n{i:02d}" for i in range(12)]


@given(
    st.sets(st.sampled_from(NAMES), min_size=1),
    st.dictionaries(st.sampled_from(NAMES), st.integers(0, 4)),
    st.lists(st.tuples(st.booleans(), st.sampled_from(NAMES)), max_size=40),
    st.sampled_from(["", *NAMES]),
)
def test_a_choice_kept_current_picks_what_fewest_picks(
    candidates: set[str],
    start: dict[str, int],
    steps: list[tuple[bool, str]],
    cursor: str,
) -> None:
    """Each step either places a claim on the chosen node (the plan's spread) or adds load
    to any node, in or out of the set (a claim of another pool, or a Local one)."""
    load: Counter[str] = Counter(start)
    members = frozenset(candidates)
    choice = SpreadChoice(members, load)
    for place, other in steps:
        expected = fewest(members, load, cursor)
        assert choice.pick(load, cursor) == expected
        node = expected if place else other
        if place:
            cursor = expected
        before = load[node]
        load[node] += 1
        choice.added(node, before)


def test_ties_go_round_robin_after_the_cursor_and_wrap() -> None:
    load: Counter[str] = Counter({"a": 1, "b": 0, "c": 0, "d": 1})
    choice = SpreadChoice(frozenset(load), load)
    assert choice.pick(load, "b") == "c"
    assert choice.pick(load, "c") == "b"  # wraps to the first tie
    for node in ("b", "c"):
        load[node] += 1
        choice.added(node, 0)
    assert choice.least == 1 and choice.pick(load, "b") == "c"
