"""`pacing.pace_after`: passes asked for by claim changes wait longer as passes get longer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eipctl.scheduler.pacing import PACE_FACTOR, PACE_FLOOR, PACE_MAX, pace_after, rest_after


def test_a_small_clusters_passes_are_not_paced() -> None:
    assert pace_after(0.0) == 0.0
    assert pace_after(0.001) == 0.0  # 1,000 claims: ~7 ms on this machine, 100: ~1 ms


def test_a_long_pass_makes_the_next_wait_twice_as_long_up_to_the_cap() -> None:
    assert pace_after(0.08) == 0.16  # 10,000 claims: the pass at most a third of the loop
    assert pace_after(1.0) == PACE_MAX


@given(st.floats(min_value=0.0, max_value=100.0))
def test_the_pace_is_bounded_and_keeps_a_pass_to_a_third_of_the_loop(seconds: float) -> None:
    pace = pace_after(seconds)
    assert 0.0 <= pace <= PACE_MAX
    if seconds >= PACE_FLOOR and PACE_FACTOR * seconds <= PACE_MAX:
        assert seconds / (seconds + pace) <= 1 / 3 + 1e-9


def test_every_pass_rests_as_long_as_the_last_one_took() -> None:
    assert rest_after(0.001, 0.0) == 0.0  # a small cluster's pass: no rest
    assert rest_after(0.1, 0.0) == 0.1  # just ended: a whole pass's length
    assert abs(rest_after(0.1, 0.04) - 0.06) < 1e-9
    assert rest_after(0.1, 0.2) == 0.0  # rested already
    assert rest_after(3.0, 0.0) == PACE_MAX  # never more than the pace's cap


@given(st.floats(min_value=0.0, max_value=10.0), st.floats(min_value=0.0, max_value=10.0))
def test_a_rest_never_lets_passes_take_more_than_half_the_loop(took: float, since: float) -> None:
    rest = rest_after(took, since)
    assert 0.0 <= rest <= PACE_MAX
    if took >= PACE_FLOOR and took <= PACE_MAX:
        assert since + rest >= took - 1e-9  # the gap before the next pass is a pass's length
