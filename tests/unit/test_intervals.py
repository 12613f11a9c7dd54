"""Interval algebra, checked against Python sets on small integers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core import intervals
from eipctl.core.intervals import Interval, Span


def expand(span: Span) -> set[int]:
    return {n for first, last in span for n in range(first, last + 1)}


raw_intervals = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=6,
)
spans = raw_intervals.map(intervals.normalize)


@pytest.mark.parametrize(
    ("given_intervals", "expected"),
    [
        ([], ()),
        ([(5, 9)], ((5, 9),)),
        ([(5, 9), (1, 2)], ((1, 2), (5, 9))),
        ([(1, 4), (3, 8)], ((1, 8),)),
        ([(1, 4), (5, 8)], ((1, 8),)),  # touching intervals merge
        ([(1, 10), (3, 4)], ((1, 10),)),
    ],
)
def test_normalize_table(given_intervals: list[Interval], expected: Span) -> None:
    assert intervals.normalize(given_intervals) == expected


def test_normalize_rejects_reversed_interval() -> None:
    with pytest.raises(ValueError, match="empty interval"):
        intervals.normalize([(5, 4)])


@given(raw_intervals)
def test_normalize_is_sorted_disjoint_and_keeps_members(raw: list[Interval]) -> None:
    span = intervals.normalize(raw)
    assert expand(span) == {n for first, last in raw for n in range(first, last + 1)}
    for (_, last), (first, _) in itertools.pairwise(span):
        assert first > last + 1


@given(spans, spans)
def test_subtract_matches_sets(a: Span, b: Span) -> None:
    assert expand(intervals.subtract(a, b)) == expand(a) - expand(b)


@given(spans, spans)
def test_intersect_matches_sets(a: Span, b: Span) -> None:
    assert expand(intervals.intersect(a, b)) == expand(a) & expand(b)


@given(spans, st.integers(-2, 75))
def test_member_and_total_match_sets(span: Span, n: int) -> None:
    assert intervals.member(span, n) == (n in expand(span))
    assert intervals.total(span) == len(expand(span))


@given(spans, st.sets(st.integers(0, 75)))
def test_lowest_free_matches_sets(span: Span, used: set[int]) -> None:
    free = expand(span) - used
    assert intervals.lowest_free(span, sorted(used)) == (min(free) if free else None)


def test_lowest_free_jumps_a_long_run_at_a_huge_offset() -> None:
    base = 2**100
    used = [*range(base, base + 50_000), base + 50_001]
    assert intervals.lowest_free(((base, base + 2**64),), used) == base + 50_000
