"""Liveness from signs of life on an injected clock.

Most cases keep a second node, "w" (witness), beating so that the observer's view counts as
current; the stall cases leave it out on purpose.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.liveness import Liveness, Transition


def witness(lv: Liveness, until: float, step: float = 0.1, start: float = 0.0) -> None:
    """Node "w" changes its counter every ``step`` from ``start`` to ``until``."""
    t, n = start, 0
    while t <= until + 1e-9:
        lv.observe("w", n, t)
        t, n = t + step, n + 1


def test_first_sight_gives_a_full_timeout() -> None:
    lv = Liveness(1.0)
    assert lv.observe("n1", 7, now=10.0)
    witness(lv, 11.0, start=10.0)
    assert lv.is_live("n1", 10.999)
    assert not lv.is_live("n1", 11.0)
    assert lv.live(10.5) == {"n1", "w"}
    assert lv.known() == {"n1", "w"}


def test_changes_keep_alive_repeats_do_not() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    assert lv.observe("n1", 2, 0.8)
    assert not lv.observe("n1", 2, 1.5)  # relist replaying the same value
    witness(lv, 2.0)
    assert lv.is_live("n1", 1.7)
    assert not lv.is_live("n1", 1.8)
    assert lv.silence("n1", 1.8) == pytest.approx(1.0)


def test_dead_node_comes_back_on_change() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 5, 0.0)
    witness(lv, 3.0)
    assert not lv.is_live("n1", 3.0)
    lv.observe("n1", 0, 3.0)  # restarted controller, counter from 0
    assert lv.is_live("n1", 3.5)


def test_a_restart_grace_holds_until_it_ends_or_runs_out() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    lv.observe("n1", 2, 0.5)
    lv.grant_grace("n1", 0.5, 10.0)  # a controller stopping for a restart
    witness(lv, 20.0)
    assert lv.is_live("n1", 10.4)
    assert not lv.is_live("n1", 10.5)  # it never came back: dead after the grace
    assert lv.next_death(5.0) == pytest.approx(10.5)
    lv.observe("n1", 0, 11.0)  # it answers again: live, judged by its signs of life
    assert lv.is_live("n1", 11.9)
    assert not lv.is_live("n1", 12.0)


def test_a_late_reply_from_the_stopping_process_does_not_end_the_grace() -> None:
    """The stopping controller answers a probe after its announcement was seen (the watch
    event can beat the write's own response): the node must not be dead one timeout
    later, mid-restart. Its successor's first heartbeat ends the grace."""
    lv = Liveness(1.0)
    lv.observe("n1", "reply-1", 0.0)
    lv.grant_grace("n1", 0.1, 10.0)
    lv.observe("n1", "reply-2", 0.15)  # late: the old responder was not closed yet
    witness(lv, 20.0)
    assert lv.is_live("n1", 1.2)
    assert lv.is_live("n1", 9.0)
    assert lv.next_death(1.2) == pytest.approx(10.1)
    lv.observe("n1", "reply-3", 2.0)  # the new process answers ...
    assert lv.end_grace("n1", 2.0) is True  # ... and beats: from now its replies alone count
    assert lv.end_grace("n1", 2.0) is False
    assert lv.is_live("n1", 2.9)
    assert not lv.is_live("n1", 3.0)  # it died right after: one timeout, not the grace


def test_the_successors_first_heartbeat_gives_it_one_timeout_to_answer() -> None:
    """The new process beats before its responder answers: measured from the old process's
    last reply, it would be dead the moment its grace ends, and a pass started then by any
    other change moved its claims mid-restart (e2e: the SIGTERM restart story)."""
    lv = Liveness(1.0)
    lv.observe("n1", "reply-1", 0.0)
    lv.grant_grace("n1", 0.1, 10.0)
    witness(lv, 20.0)
    assert lv.end_grace("n1", 3.0) is True  # silent for 3 s, but restarting
    assert lv.is_live("n1", 3.0)
    assert lv.is_live("n1", 3.9)
    assert not lv.is_live("n1", 4.0)  # it never answered: dead one timeout later
    assert lv.next_death(3.5) == pytest.approx(4.0)


def test_a_fenced_reply_ends_a_restart_grace() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    lv.grant_grace("n1", 0.0, 10.0)
    witness(lv, 3.0)
    lv.fence("n1", 0.5)
    assert not lv.is_live("n1", 0.5)
    lv.observe("n1", 2, 1.0)  # unfenced again: the grace is not back with it
    assert not lv.is_live("n1", 2.0)


def test_a_grace_shorter_than_the_timeout_changes_nothing() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    lv.grant_grace("n1", 0.0, 0.2)
    witness(lv, 2.0)
    assert lv.is_live("n1", 0.9)
    assert not lv.is_live("n1", 1.0)


def test_a_token_with_a_longer_timeout_of_its_own_is_judged_by_it() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", ("heartbeat", 1), 0.0, timeout=3.0)  # an endpoint-less controller
    witness(lv, 4.0)
    assert lv.is_live("n1", 2.9)
    assert not lv.is_live("n1", 3.0)


def test_missing_heartbeat_still_times_out() -> None:
    lv = Liveness(0.5)
    lv.observe("n1", None, 0.0)
    witness(lv, 0.6)
    assert not lv.observe("n1", None, 0.4)
    assert not lv.is_live("n1", 0.5)


def test_a_stalled_view_declares_nobody_dead() -> None:
    lv = Liveness(1.0)
    witness(lv, 5.0, step=0.25)  # w beats every 0.25 s until t=5 ...
    lv.observe("n1", 1, 4.9)
    # ... then the watch stalls: nothing changes after t=5
    assert lv.live(9.0) == {"w", "n1"}
    assert lv.suspects(9.0) == {"w", "n1"}
    # a node that was already silent well before the stall is still judged
    lv2 = Liveness(1.0)
    lv2.observe("old", 1, 3.0)
    witness(lv2, 5.0, step=0.25, start=3.0)
    assert lv2.transitions(5.0) == [Transition("old", False), Transition("w", True)]
    assert not lv2.is_live("old", 9.0)  # declared dead before: it stays dead
    assert lv2.suspects(9.0) == {"w"}


def test_nobody_new_is_declared_dead_while_fewer_than_half_are_heard() -> None:
    """The leader's half of the outage quorum (core.outage): 1 of 4 heard is too few."""
    lv = Liveness(1.0)
    for node in ("a", "b", "c"):
        lv.observe(node, 1, 0.0)
    witness(lv, 3.0)  # "w" keeps replying; a..c fall silent at 0.0
    assert lv.quorum(2.0) is False
    assert lv.live(2.0) == {"a", "b", "c", "w"}
    assert lv.suspects(2.0) == {"a", "b", "c"}
    lv.observe("a", 2, 2.1)  # 2 of 4 heard: half
    assert lv.quorum(2.2) is True
    assert lv.live(2.2) == {"a", "w"}


def test_only_node_never_dies_alone() -> None:
    lv = Liveness(1.0)
    lv.observe("solo", 1, 0.0)
    assert lv.is_live("solo", 100.0)
    assert lv.suspects(100.0) == {"solo"}


def test_forget_and_unknown() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    lv.forget("n1")
    assert not lv.is_live("n1", 0.1)
    assert lv.known() == frozenset()
    assert lv.silence("n1", 0.1) is None


def test_next_death_and_transitions() -> None:
    lv = Liveness(1.0)
    lv.observe("a", 1, 0.0)
    lv.observe("b", 1, 0.5)
    assert lv.next_death(0.2) == 1.0
    assert lv.next_death(1.0) == 1.5
    assert lv.next_death(2.0) is None
    assert lv.transitions(0.2) == [Transition("a", True), Transition("b", True)]
    assert lv.transitions(0.3) == []
    assert lv.transitions(1.2) == [Transition("a", False)]  # b changed 0.5 s after a
    lv.observe("a", 2, 1.3)
    assert lv.transitions(1.3) == [Transition("a", True)]
    lv.observe("c", 1, 2.0)
    lv.observe("d", 1, 2.0)  # 2 of 4 heard at 2.4: enough to declare the other two dead
    assert lv.transitions(2.4) == [
        Transition("a", False),
        Transition("b", False),
        Transition("c", True),
        Transition("d", True),
    ]


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Liveness(0)


def test_introduce_gives_a_known_node_one_timeout_once() -> None:
    """A replica that lists an IpNode before hearing it: live for one timeout from then;
    introducing it again does not extend that, a reply does."""
    lv = Liveness(1.0)
    witness(lv, 3.0)
    lv.introduce("n1", 0.5)
    assert lv.is_live("n1", 1.4)
    lv.introduce("n1", 1.4)
    assert not lv.is_live("n1", 1.5)
    lv.observe("n1", 1, 2.0)
    assert lv.is_live("n1", 2.9)
    lv.observe("n1", 1, 2.5)  # the same reply again counts for nothing
    assert not lv.is_live("n1", 3.0)


def test_a_fenced_node_is_dead_at_once_until_its_next_change() -> None:
    lv = Liveness(1.0)
    lv.observe("n1", 1, 0.0)
    lv.fence("n1", 0.1)
    assert lv.is_fenced("n1")
    assert not lv.is_live("n1", 0.1)  # no timeout, no witness needed
    assert lv.transitions(0.1) == [Transition("n1", False)]
    assert lv.next_death(0.1) is None
    lv.fence("n1", 0.2)  # repeated FENCED replies change nothing
    lv.observe("n1", 2, 0.3)  # restored: an unflagged reply
    assert not lv.is_fenced("n1")
    assert lv.is_live("n1", 0.3)
    lv.fence("n2", 0.4)  # never heard, says fenced: known and dead
    assert lv.known() == frozenset({"n1", "n2"})
    assert not lv.is_live("n2", 0.4)


@given(
    st.lists(
        st.tuples(st.floats(0, 5), st.sampled_from(["a", "b", "c"]), st.integers(0, 3)),
        max_size=40,
    ),
    st.floats(0.01, 2),
    st.floats(0, 10),
)
def test_matches_a_model(beats: list[tuple[float, str, int]], timeout: float, probe: float) -> None:
    lv = Liveness(timeout)
    changed: dict[str, float] = {}
    value: dict[str, int] = {}
    for t, node, v in sorted(beats):
        lv.observe(node, v, t)
        if node not in value or value[node] != v:
            changed[node], value[node] = t, v
    latest = max(changed.values(), default=float("-inf"))
    heard = sum(1 for t in changed.values() if probe - t < timeout)
    quorum = 2 * heard >= len(changed)  # half of the known nodes heard
    for node in ("a", "b", "c"):
        if node not in changed:
            assert not lv.is_live(node, probe)
            continue
        silent = probe - changed[node] >= timeout
        dead = silent and latest - changed[node] >= timeout / 2 and quorum
        assert lv.is_live(node, probe) == (not dead)
        assert (node in lv.suspects(probe)) == (silent and not dead)
    deadline = lv.next_death(probe)
    assert deadline is None or deadline > probe
