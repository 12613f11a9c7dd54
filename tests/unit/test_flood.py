"""core/flood.py: which sources a responder denies in the kernel, and for how long."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.flood import MAX_PORTS, MAX_TRACKED, FloodGuard
from eipctl.core.liveness_filter import MAX_DENIED

ATTACKER = "198.51.100.66"
SCHEDULER = "198.51.100.10"


def test_a_source_over_the_limit_in_one_window_is_denied_for_deny_for() -> None:
    guard = FloodGuard(limit=10, window=1.0, deny_for=30.0)
    for n in range(9):
        assert guard.refused(ATTACKER, 100.0 + n * 0.01) is None
    denial = guard.refused(ATTACKER, 100.5)
    assert denial is not None
    assert (denial.source, denial.refused, denial.until) == (ATTACKER, 10, 130.5)
    assert guard.denied == {ATTACKER}
    assert guard.refused(ATTACKER, 100.6) is None  # denied already: one denial, one Event
    assert guard.next_expiry() == 130.5
    assert guard.expire(130.4) == []
    assert guard.expire(130.5) == [ATTACKER]
    assert guard.denied == frozenset()
    assert guard.next_expiry() is None


def test_refusals_spread_over_windows_never_deny() -> None:
    guard = FloodGuard(limit=10, window=1.0)
    for second in range(20):
        for n in range(9):
            assert guard.refused(ATTACKER, second + n * 0.1) is None
    assert guard.denied == frozenset()


def test_a_sampled_refusal_counts_with_its_weight() -> None:
    guard = FloodGuard(limit=200)
    assert guard.refused(ATTACKER, 1.0, weight=64) is None
    assert guard.refused(ATTACKER, 1.1, weight=64) is None
    assert guard.refused(ATTACKER, 1.2, weight=64) is None
    denial = guard.refused(ATTACKER, 1.3, weight=64)
    assert denial is not None and denial.refused == 256


def test_a_source_that_sent_something_valid_recently_is_never_denied() -> None:
    """A forged flood from a scheduler's address must not silence the scheduler."""
    guard = FloodGuard(limit=5, trusted_for=60.0)
    guard.accepted(SCHEDULER, 0.0)
    for n in range(100):
        assert guard.refused(SCHEDULER, 1.0 + n * 0.001) is None
    assert guard.denied == frozenset()
    # trust lapses: then it is judged like any other source
    assert [guard.refused(SCHEDULER, 61.0 + n * 0.001) for n in range(5)][-1] is not None


def test_at_most_max_denied_sources_the_one_ending_first_makes_room() -> None:
    guard = FloodGuard(limit=1, deny_for=30.0)
    sources = [f"198.51.100.{n}" for n in range(MAX_DENIED + 1)]
    for n, source in enumerate(sources):
        assert guard.refused(source, float(n)) is not None
    assert len(guard.denied) == MAX_DENIED
    assert sources[0] not in guard.denied
    assert sources[-1] in guard.denied


def test_forged_sources_beyond_max_tracked_are_not_counted() -> None:
    guard = FloodGuard(limit=2)
    for n in range(MAX_TRACKED):
        guard.refused(f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}", 0.5)
    assert guard.refused(ATTACKER, 0.5) is None
    assert guard.refused(ATTACKER, 0.6) is None  # not tracked in this window
    assert guard.refused(ATTACKER, 1.6) is None  # a new window: tracked again
    assert guard.refused(ATTACKER, 1.7) is not None


@given(
    events=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.floats(0, 0.2), st.booleans()),
        max_size=200,
    )
)
def test_denied_sources_are_never_trusted_ones_and_never_more_than_max(
    events: list[tuple[str, float, bool]],
) -> None:
    guard = FloodGuard(limit=3, window=1.0, deny_for=5.0, trusted_for=2.0)
    now = 0.0
    last_valid: dict[str, float] = {}
    for source, step, valid in events:
        now += step
        guard.expire(now)
        if valid:
            guard.accepted(source, now)
            last_valid[source] = now
        else:
            denial = guard.refused(source, now)
            if denial is not None:
                assert now - last_valid.get(source, float("-inf")) > 2.0
        assert len(guard.denied) <= MAX_DENIED


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        FloodGuard(limit=0)
    with pytest.raises(ValueError):
        FloodGuard(window=0)


def test_a_trusted_source_flooding_from_another_port_is_denied_but_from_its_ports() -> None:
    """A flood that forges the scheduler's address (a raw socket) comes from a port the
    scheduler's probes never came from: denied except the scheduler's own port."""
    guard = FloodGuard(limit=10, window=1.0, deny_for=30.0)
    guard.accepted(SCHEDULER, 100.0, port=40123)
    for _ in range(12):  # over the limit, all from the trusted port: never denied
        assert guard.refused(SCHEDULER, 100.1, port=40123) is None
    denial = guard.refused(SCHEDULER, 100.2, port=5555)  # one more, from elsewhere
    assert denial is not None and denial.allowed_ports == {40123}
    assert guard.denials == {SCHEDULER: frozenset({40123})}


def test_a_trusted_source_without_a_known_port_is_never_denied() -> None:
    guard = FloodGuard(limit=2, window=1.0)
    guard.accepted(SCHEDULER, 100.0)  # no port given: the old rule
    for _ in range(10):
        assert guard.refused(SCHEDULER, 100.1, port=5555) is None
    assert guard.refused(ATTACKER, 100.1, port=5555) is None
    denial = guard.refused(ATTACKER, 100.1, port=5555)
    assert denial is not None and denial.allowed_ports == frozenset()  # untrusted: all ports


def test_trusted_ports_are_the_newest_few_and_lapse_with_the_trust() -> None:
    guard = FloodGuard(limit=1, window=1.0, trusted_for=10.0)
    for n in range(MAX_PORTS + 2):
        guard.accepted(SCHEDULER, 100.0 + n, port=1000 + n)
    denial = guard.refused(SCHEDULER, 106.0, port=9)
    assert denial is not None
    assert denial.allowed_ports == {1000 + n for n in range(2, MAX_PORTS + 2)}
    guard.expire(1000.0)
    guard.accepted(SCHEDULER, 1000.0, port=7)
    later = guard.refused(SCHEDULER, 1000.5, port=9)
    assert later is not None and later.allowed_ports == {7}  # the old ports lapsed
