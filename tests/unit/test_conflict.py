"""core/conflict.py: whether to probe before an add, and the take-over rule after it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.conflict import ConflictDecision, HolderState, conflict_decision, probe_first

NODES = st.sampled_from(["me", "n1", "n2"])
HOLDERS = st.one_of(st.none(), st.just(""), NODES)
VERDICTS = st.one_of(st.none(), st.sampled_from(HolderState))


def test_a_holder_declared_dead_elsewhere_is_not_probed() -> None:
    def probe(holder: str | None, live: HolderState | None) -> bool:
        return probe_first(previous_holder=holder, own_node="me", holder_liveness=live)

    assert probe("n1", HolderState.DEAD) is False
    assert probe("n1", HolderState.LIVE) is True
    assert probe("n1", None) is True  # no verdict: do not add on a guess
    assert probe(None, None) is True
    assert probe("", HolderState.DEAD) is True
    assert probe("me", HolderState.DEAD) is True  # we were the holder: someone else answers?


@given(holder=HOLDERS, live=VERDICTS)
def test_only_a_dead_verdict_skips_the_probe(holder: str | None, live: HolderState | None) -> None:
    skipped = not probe_first(previous_holder=holder, own_node="me", holder_liveness=live)
    if skipped:
        assert live is HolderState.DEAD and holder not in (None, "", "me")


def test_nobody_answering_means_add() -> None:
    assert conflict_decision(answered=False, own_node="me") is ConflictDecision.ADD
    assert conflict_decision(answered=False, own_node="me", answered_by="n1") is (
        ConflictDecision.ADD
    )


def test_an_answer_from_another_eipctl_node_is_taken_over() -> None:
    assert (
        conflict_decision(answered=True, own_node="n1", answered_by="n2")
        is ConflictDecision.TAKE_OVER
    )
    # our own MAC answering is not a reason to fight anyone; an unknown MAC is waited for
    assert conflict_decision(answered=True, own_node="n1", answered_by="n1") is (
        ConflictDecision.WAIT
    )
    assert conflict_decision(answered=True, own_node="n1", answered_by=None) is (
        ConflictDecision.WAIT
    )
    assert conflict_decision(answered=True, own_node="n1", answered_by="") is (
        ConflictDecision.WAIT
    )
