"""core/fence.py: self-fencing on our own clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.fence import Fence, FenceTransition, Justification


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def is_fenced(fence: Fence) -> bool:  # a call, so mypy does not narrow the property
    return fence.fenced


def test_fence_after_fence_timeout_without_success_and_restore_on_success() -> None:
    clock = FakeClock()
    fence = Fence(fence_timeout=1.0, clock=clock)
    assert fence.may_hold() and not fence.fenced
    clock.now += 0.6
    assert fence.succeeded() is FenceTransition.NONE
    clock.now += 0.99
    assert fence.check() is FenceTransition.NONE
    assert fence.may_hold()
    clock.now += 0.01
    assert not fence.may_hold()  # renewals stop at the timeout even before check()
    assert fence.check() is FenceTransition.FENCE
    assert is_fenced(fence)
    assert fence.check() is FenceTransition.NONE  # fences once
    clock.now += 5
    assert fence.succeeded() is FenceTransition.RESTORE
    assert not is_fenced(fence) and fence.may_hold()


def test_fence_timer_starts_at_construction() -> None:
    clock = FakeClock()
    fence = Fence(fence_timeout=1.0, clock=clock)
    clock.now += 1.0
    assert fence.check() is FenceTransition.FENCE


@given(st.lists(st.tuples(st.floats(0, 2), st.booleans()), max_size=40))
def test_fence_state_matches_the_last_success(steps: list[tuple[float, bool]]) -> None:
    clock = FakeClock()
    fence = Fence(fence_timeout=1.0, clock=clock)
    last = clock.now
    for dt, ok in steps:
        clock.now += dt
        if ok:
            fence.succeeded()
            last = clock.now
        fence.check()
        assert fence.fenced == (clock.now - last >= 1.0)


# -- the three justifications (docs/liveness.md, "Outages") ----------------------------------


def quarter_fence(clock: FakeClock) -> Fence:
    """fence_timeout 1, vouch_window 0.5: every time in these tests is a multiple of 1/4, so
    the float arithmetic is exact and the boundaries are where they are written."""
    return Fence(fence_timeout=1.0, clock=clock, vouch_window=0.5)


@pytest.mark.parametrize("window", [0.0, -0.5])
def test_a_fence_needs_a_positive_vouch_window(window: float) -> None:
    with pytest.raises(ValueError, match="vouch_window must be positive"):
        Fence(fence_timeout=1.0, clock=FakeClock(), vouch_window=window)


def test_the_justifications_come_in_the_order_api_vouched_quorum() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)  # API until 101
    clock.now = 100.75
    fence.vouched()  # until 101.25
    fence.confirmed(1.0)  # until 101.75
    assert fence.justification() is Justification.API
    clock.now = 101.0
    assert fence.justification() is Justification.VOUCHED
    clock.now = 101.25
    assert fence.justification() is Justification.QUORUM
    clock.now = 101.75
    assert fence.justification() is None
    assert not fence.may_hold()


def test_justification_follows_order_not_the_longest_lasting() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    fence.confirmed(10.0)
    fence.vouched()
    assert fence.justification() is Justification.API  # all three hold: API first
    clock.now += 1.0
    assert fence.justification() is Justification.QUORUM  # the vouch (0.5) lapsed too


def test_deadline_is_the_latest_of_the_three() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    assert fence.deadline() == 101.0  # construction counts as the last API success
    clock.now = 100.75
    fence.vouched()
    assert fence.deadline() == 101.25
    fence.confirmed(0.25)  # until 101: earlier than the vouch's end
    assert fence.deadline() == 101.25
    fence.confirmed(2.0)
    assert fence.deadline() == 102.75
    fence.succeeded()  # API until 101.75: the quorum still lasts longest
    assert fence.deadline() == 102.75
    fence.unconfirmed()
    assert fence.deadline() == 101.75  # the API success now
    clock.now = 101.5
    fence.vouched()
    assert fence.deadline() == 102.0  # the vouch now


@given(st.lists(st.sampled_from(["api", "vouch", "confirm", "none"]), min_size=1, max_size=3))
def test_check_fences_only_when_no_justification_holds(kinds: list[str]) -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    clock.now = 101.0  # the construction's API success lapsed
    for kind in kinds:
        if kind == "api":
            fence.succeeded()
        elif kind == "vouch":
            fence.vouched()
        elif kind == "confirm":
            fence.confirmed(0.25)
    held = set(kinds) != {"none"}
    assert fence.check() is (FenceTransition.NONE if held else FenceTransition.FENCE)
    assert is_fenced(fence) is not held


def test_a_vouch_keeps_the_node_holding_past_fence_timeout_for_the_vouch_window() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    clock.now = 100.75
    fence.vouched()
    assert fence.vouched_recently()
    clock.now = 101.0  # the API's word lapsed
    assert fence.check() is FenceTransition.NONE
    assert fence.may_hold()
    clock.now = 101.25  # 100.75 + 0.5
    assert not fence.vouched_recently()
    assert not fence.may_hold()
    assert fence.check() is FenceTransition.FENCE


def test_each_vouch_renews_the_window() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    for _ in range(20):  # 5 s of vouches every 0.25 s, no API success at all
        clock.now += 0.25
        fence.vouched()
        assert fence.check() is FenceTransition.NONE
    assert fence.api_silence() == 5.0
    assert fence.justification() is Justification.VOUCHED
    clock.now += 0.5
    assert fence.check() is FenceTransition.FENCE


def test_a_confirmation_keeps_the_node_holding_for_valid_for() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    clock.now = 100.75
    fence.confirmed(1.0)  # until 101.75
    clock.now = 101.5
    assert fence.justification() is Justification.QUORUM
    assert fence.check() is FenceTransition.NONE
    clock.now = 101.75
    assert fence.justification() is None
    assert fence.check() is FenceTransition.FENCE


def test_a_shorter_confirmation_does_not_shorten_an_earlier_one() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    fence.confirmed(3.0)  # until 103
    clock.now = 101.0
    fence.confirmed(0.25)  # until 101.25: the longer word stands
    clock.now = 102.75
    assert fence.justification() is Justification.QUORUM


def test_unconfirmed_ends_the_quorums_word_at_once() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    fence.confirmed(10.0)
    clock.now = 101.0
    assert fence.check() is FenceTransition.NONE
    fence.unconfirmed()
    assert fence.justification() is None
    assert fence.check() is FenceTransition.FENCE
    # a later confirmation counts again from scratch
    assert fence.succeeded() is FenceTransition.RESTORE
    clock.now = 102.0
    fence.confirmed(0.5)
    assert fence.justification() is Justification.QUORUM


def test_unconfirmed_leaves_the_other_justifications_alone() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    fence.confirmed(10.0)
    fence.vouched()
    fence.unconfirmed()
    assert fence.justification() is Justification.API
    clock.now = 100.25
    assert fence.deadline() == 101.0


def test_failed_and_succeeded_drive_api_failing_and_failed_moves_no_deadline() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    assert not fence.api_failing
    clock.now = 100.5
    fence.failed()
    assert fence.api_failing
    assert fence.deadline() == 101.0  # a failure is not a success
    assert fence.api_silence() == 0.5
    fence.failed()
    assert fence.api_failing
    assert fence.succeeded() is FenceTransition.NONE
    assert not fence.api_failing
    assert fence.deadline() == 101.5
    assert fence.api_silence() == 0.0


def test_a_failure_alone_does_not_fence() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    fence.failed()
    assert fence.check() is FenceTransition.NONE
    assert fence.may_hold()


@pytest.mark.parametrize("justified_by", ["api", "vouch", "confirm"])
def test_lose_fences_at_once_whatever_justifies_holding(justified_by: str) -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    if justified_by == "vouch":
        clock.now = 101.0
        fence.vouched()
    elif justified_by == "confirm":
        clock.now = 101.0
        fence.confirmed(5.0)
    assert fence.justification() is not None
    assert fence.lose() is FenceTransition.FENCE
    assert is_fenced(fence)
    assert not fence.may_hold()
    assert fence.lose() is FenceTransition.NONE  # once
    assert fence.check() is FenceTransition.NONE


def test_only_an_api_success_restores() -> None:
    clock = FakeClock()
    fence = quarter_fence(clock)
    assert fence.lose() is FenceTransition.FENCE
    fence.vouched()
    fence.confirmed(5.0)
    assert fence.check() is FenceTransition.NONE
    assert is_fenced(fence)  # a vouch or a quorum does not unfence
    assert not fence.may_hold()
    fence.failed()
    assert is_fenced(fence)
    assert fence.succeeded() is FenceTransition.RESTORE
    assert not is_fenced(fence) and fence.may_hold()
    assert fence.succeeded() is FenceTransition.NONE


_events = st.one_of(
    st.tuples(st.just("wait"), st.integers(0, 8).map(lambda n: n / 4)),
    st.tuples(st.just("api"), st.just(0.0)),
    st.tuples(st.just("failed"), st.just(0.0)),
    st.tuples(st.just("vouch"), st.just(0.0)),
    st.tuples(st.just("confirm"), st.integers(0, 8).map(lambda n: n / 4)),
    st.tuples(st.just("unconfirm"), st.just(0.0)),
    st.tuples(st.just("lose"), st.just(0.0)),
)


@given(st.lists(_events, max_size=60))
def test_fence_state_matches_a_model_of_the_three_justifications(
    events: list[tuple[str, float]],
) -> None:
    """Times are multiples of 1/4 (exact in binary), so the model's arithmetic is exact."""
    clock = FakeClock()
    fence = quarter_fence(clock)
    api_until, vouch_until, quorum_until = clock.now + 1.0, -math.inf, -math.inf
    fenced, failing = False, False
    for kind, value in events:
        if kind == "wait":
            clock.now += value
        elif kind == "api":
            fence.succeeded()
            api_until, fenced, failing = clock.now + 1.0, False, False
        elif kind == "failed":
            fence.failed()
            failing = True
        elif kind == "vouch":
            fence.vouched()
            vouch_until = clock.now + 0.5
        elif kind == "confirm":
            fence.confirmed(value)
            quorum_until = max(quorum_until, clock.now + value)
        elif kind == "unconfirm":
            fence.unconfirmed()
            quorum_until = -math.inf
        elif kind == "lose":
            fence.lose()
            fenced = True
        now = clock.now
        expected = (
            Justification.API
            if now < api_until
            else Justification.VOUCHED
            if now < vouch_until
            else Justification.QUORUM
            if now < quorum_until
            else None
        )
        assert fence.justification() is expected
        assert fence.deadline() == max(api_until, vouch_until, quorum_until)
        assert (expected is None) == (now >= fence.deadline())
        fence.check()
        fenced = fenced or expected is None
        assert fence.fenced == fenced
        assert fence.may_hold() == (not fenced and expected is not None)
        assert fence.api_failing == failing
        assert fence.vouched_recently() == (now < vouch_until)


def test_a_success_after_every_reason_lapsed_is_a_restore_though_not_fenced() -> None:
    """A thawed controller (or one whose loop stalled past its deadline) may reach the API
    before its watchdog fences: the success says RESTORE, so its claims are relisted before
    a pass acts on a stale cache (soak seed 808: a thawed node took over and announced an IP
    that had moved away)."""
    clock = FakeClock()
    fence = Fence(fence_timeout=1.0, clock=clock)
    clock.now += 0.5
    assert fence.succeeded() is FenceTransition.NONE  # in time: nothing to relist
    clock.now += 1.5  # past the deadline, the watchdog has not run
    assert not is_fenced(fence)
    assert fence.succeeded() is FenceTransition.RESTORE
    assert fence.succeeded() is FenceTransition.NONE
