"""core/conflict.py: the take-over rule after a probe was answered."""

from __future__ import annotations

from eipctl.core.conflict import ConflictDecision, HolderState, conflict_decision


def test_conflict_rule() -> None:
    def decide(answered: bool, holder: str | None, live: HolderState | None) -> ConflictDecision:
        return conflict_decision(
            answered=answered, previous_holder=holder, own_node="me", holder_liveness=live
        )

    assert decide(False, None, None) is ConflictDecision.ADD
    assert decide(False, "n1", HolderState.LIVE) is ConflictDecision.ADD
    assert decide(True, "n1", HolderState.DEAD) is ConflictDecision.TAKE_OVER
    assert decide(True, "n1", HolderState.LIVE) is ConflictDecision.WAIT
    assert decide(True, None, None) is ConflictDecision.WAIT
    assert decide(True, "me", HolderState.DEAD) is ConflictDecision.WAIT


def test_an_answer_from_another_eipctl_node_is_taken_over() -> None:
    base = {"answered": True, "own_node": "n1", "holder_liveness": HolderState.LIVE}
    assert (
        conflict_decision(previous_holder="n2", answered_by="n2", **base)
        is ConflictDecision.TAKE_OVER
    )
    assert (
        conflict_decision(previous_holder=None, answered_by="n3", **base)
        is ConflictDecision.TAKE_OVER
    )
    # our own MAC answering is not a reason to fight anyone; an unknown MAC is waited for
    assert (
        conflict_decision(previous_holder=None, answered_by="n1", **base) is ConflictDecision.WAIT
    )
    assert (
        conflict_decision(previous_holder="n2", answered_by=None, **base) is ConflictDecision.WAIT
    )
