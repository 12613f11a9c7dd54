"""core/flood.py: the edges the guard mutants found unpinned (docs/testing.md, "The guard
operators"): the settings refused, a full table of trusted or counted sources, a refusal
whose source port is unknown."""

from __future__ import annotations

import pytest

from eipctl.core.flood import MAX_TRACKED, FloodGuard

ATTACKER = "198.51.100.66"
SCHEDULER = "198.51.100.10"


def many(count: int) -> list[str]:
    return [f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in range(count)]


@pytest.mark.parametrize(
    "settings",
    [{"deny_for": 0.0}, {"deny_for": -1.0}, {"trusted_for": -0.5}],
    ids=["deny-for-zero", "deny-for-negative", "trusted-for-negative"],
)
def test_a_denial_of_no_time_or_a_negative_trust_is_refused(settings: dict[str, float]) -> None:
    """A denial that ends when it starts would re-install the filter for nothing."""
    with pytest.raises(ValueError):
        FloodGuard(**settings)  # type: ignore[arg-type]


def test_trust_for_zero_seconds_is_a_valid_setting() -> None:
    guard = FloodGuard(limit=1, trusted_for=0.0)
    guard.accepted(SCHEDULER, 1.0)
    assert guard.refused(SCHEDULER, 1.0) is None  # trusted at that instant only
    assert guard.refused(SCHEDULER, 1.5) is not None


def test_a_trusted_source_is_still_refreshed_when_the_trusted_table_is_full() -> None:
    """A full table turns away new sources, never the schedulers it already trusts: their
    trust must not lapse because forgers filled the table."""
    guard = FloodGuard(limit=1, trusted_for=60.0)
    for source in [SCHEDULER, *many(MAX_TRACKED - 1)]:
        guard.accepted(source, 0.0)
    guard.accepted(SCHEDULER, 50.0)  # the table is full, and SCHEDULER is in it
    assert guard.refused(SCHEDULER, 100.0) is None  # trusted since 50.0, until 110.0


def test_a_full_trusted_table_keeps_its_sources_and_turns_a_new_one_away() -> None:
    """Room is made from lapsed trust only: a flood of new valid senders does not push
    out the schedulers that are trusted now."""
    guard = FloodGuard(limit=1, trusted_for=60.0)
    for source in [SCHEDULER, *many(MAX_TRACKED - 1)]:
        guard.accepted(source, 0.0)
    guard.accepted(ATTACKER, 10.0)  # no lapsed trust to make room with
    assert guard.refused(SCHEDULER, 20.0) is None  # still trusted
    assert guard.refused(ATTACKER, 20.0) is not None  # never was


def test_lapsed_trust_makes_room_in_a_full_table() -> None:
    guard = FloodGuard(limit=1, trusted_for=60.0)
    for source in many(MAX_TRACKED):
        guard.accepted(source, 0.0)
    guard.accepted(SCHEDULER, 61.0)  # every other trust lapsed at 60.0
    assert guard.refused(SCHEDULER, 62.0) is None


def test_a_source_counted_before_the_table_filled_is_still_counted() -> None:
    """A flood of forged sources fills the window's table; the source already in it keeps
    being counted, so it is still denied once it passes the limit."""
    guard = FloodGuard(limit=2, window=1.0)
    assert guard.refused(ATTACKER, 0.5) is None
    for source in many(MAX_TRACKED - 1):
        guard.refused(source, 0.5)
    denial = guard.refused(ATTACKER, 0.6)
    assert denial is not None and denial.refused == 2


def test_a_trusted_source_is_never_denied_for_refusals_from_an_unknown_port() -> None:
    """Without a port the refusal may be the trusted sender's own: it must not deny the
    scheduler, not even except its trusted ports."""
    guard = FloodGuard(limit=2, window=1.0)
    guard.accepted(SCHEDULER, 100.0, port=40123)
    for _ in range(10):
        assert guard.refused(SCHEDULER, 100.1) is None
    assert guard.denied == frozenset()
