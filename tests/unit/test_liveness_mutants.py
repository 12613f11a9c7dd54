"""core/liveness.py: forgetting a node and the "is our view current" half-timeout
(docs/testing.md, "Mutation")."""

from __future__ import annotations

from eipctl.core.liveness import Liveness, Transition


def test_a_forgotten_node_that_returns_is_reported_again() -> None:
    liveness = Liveness(10.0)
    liveness.observe("n1", 1, now=0.0)
    assert liveness.transitions(0.0) == [Transition("n1", True)]
    liveness.forget("n1")
    liveness.forget("never-seen")
    assert liveness.known() == frozenset()
    liveness.observe("n1", 1, now=1.0)
    assert liveness.transitions(1.0) == [Transition("n1", True)]


def test_silence_is_death_only_if_another_node_changed_half_a_timeout_later() -> None:
    liveness = Liveness(10.0)
    liveness.observe("a", 1, now=0.0)
    liveness.observe("b", 1, now=0.0)
    liveness.observe("b", 2, now=4.0)  # our freshest news is 4 s newer than a's
    assert liveness.is_live("a", 10.0)
    assert liveness.suspects(10.0) == frozenset({"a"})
    liveness.observe("b", 3, now=5.0)  # 5 s newer: half the timeout
    assert not liveness.is_live("a", 10.0)
