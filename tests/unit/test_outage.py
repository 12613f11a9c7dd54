"""core/outage.py: the quorum arithmetic that lets a controller hold through an outage and
keeps a leader on the far side of a partition from moving what the holders keep."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.outage import (
    HOLD_QUORUM,
    OutageVerdict,
    PeerAnswer,
    may_declare_deaths,
    outage_verdict,
)

HEARD_WITHIN = 0.2


def silent(n: int, silence: float | None = None) -> list[PeerAnswer]:
    """``n`` peers that hear no writer (never, by default)."""
    return [PeerAnswer(f"node-{i}", silence) for i in range(n)]


def verdict(answers: list[PeerAnswer], known: int) -> OutageVerdict:
    return outage_verdict(answers, known=known, heard_within=HEARD_WITHIN)


def test_hold_quorum_is_one_half() -> None:
    assert Fraction(1, 2) == HOLD_QUORUM


@pytest.mark.parametrize("position", [0, 5, 9])
def test_one_peer_hearing_a_writer_is_enough_whatever_the_others_say(position: int) -> None:
    answers = silent(9)
    answers.insert(position, PeerAnswer("hears", 0.05))
    assert verdict(answers, known=10) is OutageVerdict.WRITER_HEARD
    # even with more "no writer" answers than a quorum needs, and more than known nodes
    assert verdict([*silent(50), PeerAnswer("hears", 0.0)], known=10) is (
        OutageVerdict.WRITER_HEARD
    )


def test_a_writer_heard_only_by_a_lone_peer_of_a_large_cluster_still_counts() -> None:
    assert verdict([PeerAnswer("hears", 0.1)], known=1000) is OutageVerdict.WRITER_HEARD


def test_a_silence_of_exactly_heard_within_is_no_writer_heard() -> None:
    assert verdict([PeerAnswer("b", HEARD_WITHIN)], known=2) is OutageVerdict.OUTAGE
    assert verdict([PeerAnswer("b", HEARD_WITHIN - 1e-9)], known=2) is (OutageVerdict.WRITER_HEARD)


def test_none_means_never_heard_a_writer() -> None:
    assert verdict([PeerAnswer("b", None), PeerAnswer("c", None)], known=3) is (
        OutageVerdict.OUTAGE
    )


def test_the_node_counts_itself() -> None:
    # a lone node: itself is more than half of one
    assert verdict([], known=1) is OutageVerdict.OUTAGE
    # two nodes: itself and one peer are both; itself alone is only half
    assert verdict(silent(1), known=2) is OutageVerdict.OUTAGE
    assert verdict([], known=2) is not OutageVerdict.OUTAGE
    # three nodes, one dead: the two left are more than half
    assert verdict(silent(1), known=3) is OutageVerdict.OUTAGE


@pytest.mark.parametrize(
    ("known", "needed_peers"),
    [(1, 0), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3), (7, 3), (10, 5), (11, 5), (100, 50)],
)
def test_a_strict_majority_is_needed(known: int, needed_peers: int) -> None:
    """Itself plus ``needed_peers`` is the smallest count strictly above half of ``known``."""
    assert verdict(silent(needed_peers), known=known) is OutageVerdict.OUTAGE
    if needed_peers > 1:
        assert verdict(silent(needed_peers - 1), known=known) is OutageVerdict.UNKNOWN
    elif needed_peers == 1:  # one short is nobody answering at all
        assert verdict([], known=known) is OutageVerdict.NO_ANSWER


def test_exactly_half_is_not_enough() -> None:
    assert verdict(silent(1), known=4) is OutageVerdict.UNKNOWN  # 2 of 4
    assert verdict(silent(49), known=100) is OutageVerdict.UNKNOWN  # 50 of 100
    assert verdict(silent(50), known=100) is OutageVerdict.OUTAGE  # 51 of 100


def test_nobody_answering_in_a_cluster_of_several_is_no_answer() -> None:
    """A node cut off hears nobody: it lets go at once, unlike one that heard a few."""
    for known in (2, 3, 10, 1000):
        assert verdict([], known=known) is OutageVerdict.NO_ANSWER
    assert verdict(silent(1), known=10) is OutageVerdict.UNKNOWN  # one answer: too few
    assert verdict(silent(1, 5.0), known=10) is OutageVerdict.UNKNOWN
    assert verdict([], known=1) is OutageVerdict.OUTAGE  # alone, it is the quorum
    assert verdict([], known=0) is OutageVerdict.UNKNOWN  # nothing counted: no quorum


def test_no_known_nodes_is_unknown() -> None:
    assert verdict([], known=0) is OutageVerdict.UNKNOWN
    assert verdict(silent(3), known=0) is OutageVerdict.UNKNOWN
    assert verdict([PeerAnswer("hears", 0.0)], known=0) is OutageVerdict.WRITER_HEARD


def test_the_answers_may_be_any_iterable() -> None:
    assert outage_verdict(iter(silent(2)), known=3, heard_within=HEARD_WITHIN) is (
        OutageVerdict.OUTAGE
    )


@pytest.mark.parametrize(
    ("heard", "known", "may"),
    [
        (0, 0, True),
        (0, 1, False),
        (1, 1, True),
        (1, 2, True),  # a 2-node cluster still fails over
        (0, 2, False),
        (1, 3, False),
        (2, 3, True),
        (1, 4, False),
        (2, 4, True),
        (49, 100, False),
        (50, 100, True),
    ],
)
def test_may_declare_deaths_needs_at_least_half(heard: int, known: int, may: bool) -> None:
    assert may_declare_deaths(heard, known) is may


@given(
    st.integers(1, 200).flatmap(
        lambda known: st.tuples(
            st.just(known),
            st.integers(0, known - 1),  # peers answering "no writer" (itself is one more)
            st.integers(0, known),  # nodes the leader hears
            st.lists(st.one_of(st.none(), st.floats(HEARD_WITHIN, 1e6)), max_size=1),
        )
    )
)
def test_a_confirming_set_and_a_leaders_heard_set_always_share_a_node(
    case: tuple[int, int, int, list[float | None]],
) -> None:
    """The safety argument: whenever a holder's quorum says OUTAGE and a leader may declare
    deaths, the two sets of nodes cannot be disjoint, so some node hears the leader and
    would not have confirmed."""
    known, peers, heard, sample = case
    silence = sample[0] if sample else None
    answers = silent(peers, silence)
    confirming = peers + 1
    holds = outage_verdict(answers, known=known, heard_within=HEARD_WITHIN)
    if holds is OutageVerdict.OUTAGE and may_declare_deaths(heard, known):
        assert confirming + heard > known
    # and the holds are exactly those of a strict majority
    assert (holds is OutageVerdict.OUTAGE) == (2 * confirming > known)
    if holds is not OutageVerdict.OUTAGE:
        no_answer = peers == 0 and known > 1
        assert holds is (OutageVerdict.NO_ANSWER if no_answer else OutageVerdict.UNKNOWN)
    assert may_declare_deaths(heard, known) == (2 * heard >= known)


@given(
    st.integers(1, 40).flatmap(
        lambda known: st.tuples(
            st.just(known),
            st.sets(st.integers(0, known - 1), min_size=1),  # confirming, the holder first
            st.sets(st.integers(0, known - 1)),  # nodes the leader hears
        )
    )
)
def test_sets_meeting_both_thresholds_intersect(case: tuple[int, set[int], set[int]]) -> None:
    known, confirming, heard = case
    holder, *others = sorted(confirming)
    answers = [PeerAnswer(f"node-{n}", None) for n in others]
    holds = outage_verdict(answers, known=known, heard_within=HEARD_WITHIN)
    if holds is OutageVerdict.OUTAGE and may_declare_deaths(len(heard), known):
        assert confirming & heard, (holder, confirming, heard)
