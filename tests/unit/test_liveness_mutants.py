"""core/liveness.py: forgetting a node, the "is our view current" half-timeout, and its
absence under fresh reads (docs/testing.md, "Mutation")."""

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


def test_fresh_reads_need_no_other_node_to_declare_one_dead() -> None:
    liveness = Liveness(10.0, fresh_reads=True)
    assert liveness.fresh_reads
    liveness.observe("a", 1, now=0.0)
    assert liveness.is_live("a", 9.99)
    assert not liveness.is_live("a", 10.0)
    assert liveness.suspects(10.0) == frozenset()


def test_forget_drops_what_was_seen_of_a_node_under_fresh_reads() -> None:
    liveness = Liveness(1.0, fresh_reads=True)
    liveness.observe("n1", 5, now=100.0)
    liveness.observe("n2", 7, now=100.0)
    liveness.forget("n1")
    liveness.forget("never-seen")
    liveness.observe("n1", 5, now=110.0)
    liveness.observe("n2", 7, now=110.0)
    assert liveness.is_live("n1", 110.0)
    assert not liveness.is_live("n2", 110.0)
