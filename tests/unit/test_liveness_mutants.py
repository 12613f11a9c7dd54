"""core/liveness.py: forgetting a node and the "is our view current" half-timeout; from the
guard operators: unknown nodes, introducing a known node, repeated FENCED replies, fenced
nodes in the quorum (docs/testing.md, "Mutation")."""

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


def test_an_unknown_node_is_neither_fenced_nor_in_a_grace() -> None:
    liveness = Liveness(10.0)
    assert liveness.is_fenced("never-seen") is False
    assert liveness.end_grace("never-seen", 0.0) is False
    assert liveness.known() == frozenset()


def test_introducing_a_known_node_again_does_not_refresh_it() -> None:
    """An IpNode relisted says nothing about the node being alive: a silent node stays
    silent (and dead) however often it is introduced."""
    liveness = Liveness(10.0)
    liveness.observe("a", 1, now=0.0)
    liveness.observe("w", 1, now=0.0)
    liveness.observe("w", 2, now=9.0)  # a witness: our view is current
    liveness.introduce("a", now=9.0)
    assert liveness.silence("a", 10.0) == 10.0
    assert not liveness.is_live("a", 10.0)


def test_repeated_fenced_replies_keep_a_grace_announced_since() -> None:
    """Only becoming fenced ends a grace; a node already fenced that announces one keeps it
    through the FENCED replies that follow (they change nothing), until its heartbeat."""
    liveness = Liveness(1.0)
    liveness.observe("n1", 1, now=0.0)
    liveness.fence("n1", now=0.1)
    liveness.grant_grace("n1", now=0.2, seconds=10.0)
    liveness.fence("n1", now=0.3)
    assert liveness.is_fenced("n1")
    assert liveness.end_grace("n1", 0.4) is True


def test_fenced_nodes_are_not_heard_for_the_quorum() -> None:
    """A fenced node answers but holds nothing: of a, b, c, d only d is heard (b and c are
    fenced), fewer than half, so the silent a is spared (a suspect), not declared dead."""
    liveness = Liveness(10.0)
    liveness.observe("a", 1, now=0.0)
    for node in ("b", "c", "d"):
        liveness.observe(node, 1, now=8.0)
    liveness.fence("b", now=8.0)
    liveness.fence("c", now=8.0)
    assert not liveness.quorum(10.5)
    assert liveness.is_live("a", 10.5)
    assert liveness.suspects(10.5) == frozenset({"a"})
    liveness.fence("d", now=10.6)  # nobody heard any more: still nobody declared dead
    assert liveness.is_live("a", 12.0)
