"""core/fence.py: self-fencing on our own clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.fence import Fence, FenceTransition


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def is_fenced(fence: Fence) -> bool:  # a call, so mypy does not narrow the property
    return fence.fenced


def test_fence_after_node_timeout_without_success_and_restore_on_success() -> None:
    clock = FakeClock()
    fence = Fence(node_timeout=1.0, clock=clock)
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
    fence = Fence(node_timeout=1.0, clock=clock)
    clock.now += 1.0
    assert fence.check() is FenceTransition.FENCE


@given(st.lists(st.tuples(st.floats(0, 2), st.booleans()), max_size=40))
def test_fence_state_matches_the_last_success(steps: list[tuple[float, bool]]) -> None:
    clock = FakeClock()
    fence = Fence(node_timeout=1.0, clock=clock)
    last = clock.now
    for dt, ok in steps:
        clock.now += dt
        if ok:
            fence.succeeded()
            last = clock.now
        fence.check()
        assert fence.fenced == (clock.now - last >= 1.0)
