"""Node liveness from signs of life, judged on the observer's own monotonic clock.

A sign of life is a token that differs from the node's previous one: the sequence number of
an authenticated liveness reply (`net.liveness`: each reply counts once), or, for a
controller that publishes no liveness endpoint (one from before the liveness path, during an
upgrade), its IpNode ``status.heartbeat`` counter. Clocks are never compared across machines:
the observer notes *when it saw* each token change, on its own monotonic clock, and a node is
dead once it has shown no change for ``timeout``. The caller passes ``now`` (e.g.
``loop.time()``) into every call; nothing here reads a clock. docs/liveness.md has the model.

- A node seen for the first time counts as just changed (`introduce`): a scheduler that
  starts (or a standby that takes over) gives every known node one full timeout before
  judging it, rather than declaring the whole cluster dead before its first replies.
- Any change counts. A dead node whose token changes again is live again at once.
- A node that says it has fenced itself (a reply flagged FENCED: it removed its addresses)
  is not live from that moment, without waiting for the timeout: its claims can move at once
  because nobody answers for them any more. Its next unflagged sign of life restores it.
- A controller stopping cleanly for a restart announces a grace (``restartGraceSeconds`` on
  its IpNode): that node stays live until the grace ends (`grant_grace`), so a rolling
  update does not move its IPs. Replies do not end it: the stopping process may answer a
  probe or two after its announcement is seen, and a grace ended by such a reply would have
  the node declared dead one timeout later, mid-restart. The new process's first heartbeat
  ends it (`end_grace`) and is its first sign of life: one timeout to answer a probe. A
  controller that never comes back is dead after the grace.
- Re-observing the same token (a relist replaying the cache) changes nothing.
- The observer's own view must be current. A node is dead only if, besides its own silence,
  some other node changed at least ``timeout / 2`` after its last change. If the observer
  stalls (its loop blocked, its socket starved), every node goes silent at once; without
  this rule the nodes with the earliest deadlines would be declared dead one by one and their
  claims moved onto nodes that are just as alive. Silent nodes blocked by this rule are
  ``suspects``. The price: when every node goes silent at once (or the only node does),
  nobody is declared dead, which moves nothing where there was no live target anyway.
- Partitions: a node is newly declared dead only while at least half of the known nodes are
  heard (`core.outage.may_declare_deaths`). A controller that holds its addresses through a
  control-plane outage counts on it: it holds only while more than half of the nodes hear no
  writing leader, so a leader that returns on the far side of a partition, with fewer than
  half of the nodes, moves nothing. Silent nodes it spares are suspects too; a node declared
  dead before stays dead.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from eipctl.core.outage import may_declare_deaths

__all__ = ["Liveness", "Transition"]

_INTRODUCED = object()
"""The token of a node known but not heard yet: equal to no token a node can show."""


@dataclass(slots=True)
class _Seen:
    token: Hashable
    changed_at: float
    timeout: float
    fenced: bool = False
    grace_until: float = float("-inf")
    """A restart grace: live until then whatever its silence (`Liveness.grant_grace`)."""


@dataclass(frozen=True)
class Transition:
    """A node whose liveness differs from what the caller last heard."""

    node: str
    live: bool


class Liveness:
    """Signs of life per node; answers live/dead for a given ``now``."""

    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = timeout
        self._seen: dict[str, _Seen] = {}
        self._reported: dict[str, bool] = {}
        self._latest_change = float("-inf")
        """When the freshest change of any node was seen: how current our view is."""
        self._api_stale: set[str] = set()
        """Nodes whose last reply said API_STALE (`mark_api_stale`)."""
        self._quorum_at = float("-inf")
        self._quorum = True
        """`may_declare_deaths` as last counted, and when: counting is O(nodes), so it is
        counted at most every ``timeout / 8``; a stale answer lags by that at most."""

    def observe(self, node: str, token: Hashable, now: float, timeout: float = 0.0) -> bool:
        """Record that ``node`` showed ``token`` at ``now``; True if it changed.

        A first observation counts as a change (see the module docstring). ``timeout`` is
        this token's own timeout when longer than ours (a heartbeat counter's). A restart
        grace in force stays in force.
        """
        seen = self._seen.get(node)
        if seen is None:
            self._seen[node] = _Seen(token, now, max(self.timeout, timeout))
        elif seen.token == token:
            return False
        else:  # in place: a reply per node every probe interval (the grace stays)
            seen.token, seen.changed_at = token, now
            seen.timeout, seen.fenced = max(self.timeout, timeout), False
        self._latest_change = max(self._latest_change, now)
        return True

    def grant_grace(self, node: str, now: float, seconds: float) -> None:
        """``node`` is restarting and asked for ``seconds``: live until ``now + seconds``
        unless it fences or the grace is ended sooner. A node not known yet is introduced."""
        self.introduce(node, now)
        self._seen[node] = replace(self._seen[node], grace_until=now + seconds)

    def end_grace(self, node: str, now: float) -> bool:
        """The restarted process wrote its first heartbeat (at ``now``): from now ``node``
        is judged by its signs of life alone, that heartbeat the first of them. True if a
        grace was in force.

        The heartbeat counts because its silence would otherwise be the old process's: a
        successor that beats before its responder is up would be dead at once, and any pass
        in between (another node's change starts one) moved its claims mid-restart. So it
        gets one timeout to answer, as a node seen for the first time does."""
        seen = self._seen.get(node)
        if seen is None or seen.grace_until == float("-inf"):
            return False
        self._seen[node] = replace(
            seen, grace_until=float("-inf"), changed_at=max(seen.changed_at, now)
        )
        return True

    def introduce(self, node: str, now: float) -> None:
        """``node`` exists (its IpNode is listed) but has not been heard yet: give it one
        timeout from ``now``. Nothing changes for a node already known."""
        if node not in self._seen:
            self.observe(node, _INTRODUCED, now)

    def fence(self, node: str, now: float) -> None:
        """``node`` says it fenced itself: not live from now until its next change (a restart
        grace ends with it: the node holds nothing)."""
        seen = self._seen.get(node)
        if seen is None:
            self._seen[node] = _Seen(_INTRODUCED, now, self.timeout, fenced=True)
        elif not seen.fenced:
            self._seen[node] = _Seen(seen.token, seen.changed_at, seen.timeout, fenced=True)

    def mark_api_stale(self, node: str, stale: bool) -> bool:
        """Whether ``node``'s controller cannot see the API (its last reply said so); True if
        that changed. Such a node stays live and keeps its claims, but takes no new one."""
        if stale == (node in self._api_stale):
            return False
        if stale:
            self._api_stale.add(node)
        else:
            self._api_stale.discard(node)
        return True

    def api_stale(self) -> frozenset[str]:
        return frozenset(self._api_stale)

    def is_fenced(self, node: str) -> bool:
        seen = self._seen.get(node)
        return seen is not None and seen.fenced

    def forget(self, node: str) -> None:
        """The IpNode was deleted."""
        self._quorum_at = float("-inf")
        self._api_stale.discard(node)
        self._seen.pop(node, None)
        self._reported.pop(node, None)

    def known(self) -> frozenset[str]:
        return frozenset(self._seen)

    def is_live(self, node: str, now: float) -> bool:
        """False once ``node`` is silent for ``timeout`` while our view is current (above)."""
        seen = self._seen.get(node)
        return seen is not None and not self._dead(node, seen, now)

    def _silent(self, seen: _Seen, now: float) -> bool:
        return now - seen.changed_at >= seen.timeout and now >= seen.grace_until

    def _dead(self, node: str, seen: _Seen, now: float) -> bool:
        if seen.fenced:
            return True
        if not self._silent(seen, now):
            return False
        if self._latest_change - seen.changed_at < self.timeout / 2:
            return False
        # without a quorum nobody new is declared dead; one declared already stays dead
        return self.quorum(now) or self._reported.get(node) is False

    def quorum(self, now: float) -> bool:
        """Whether enough nodes are heard to declare any dead (`core.outage`)."""
        if not self._quorum_at <= now < self._quorum_at + self.timeout / 8:
            heard = sum(1 for s in self._seen.values() if not s.fenced and not self._silent(s, now))
            self._quorum = may_declare_deaths(heard, len(self._seen))
            self._quorum_at = now
        return self._quorum

    def suspects(self, now: float) -> frozenset[str]:
        """Nodes silent for ``timeout`` that are kept live because every node went silent."""
        return frozenset(
            n for n, s in self._seen.items() if self._silent(s, now) and not self._dead(n, s, now)
        )

    def live(self, now: float) -> frozenset[str]:
        return frozenset(n for n in self._seen if self.is_live(n, now))

    def silence(self, node: str, now: float) -> float | None:
        """Seconds since ``node`` last showed a sign of life (None if unknown)."""
        seen = self._seen.get(node)
        return None if seen is None else now - seen.changed_at

    def next_death(self, now: float) -> float | None:
        """The earliest time after ``now`` at which a live node turns dead, if none changes."""
        live = (s for s in self._seen.values() if not s.fenced)
        deadlines = (max(s.changed_at + s.timeout, s.grace_until) for s in live)
        return min((d for d in deadlines if d > now), default=None)

    def transitions(self, now: float) -> list[Transition]:
        """Nodes whose state changed since the previous call (new nodes report as live),
        in name order. Lets the caller log each death and return exactly once."""
        changed: list[Transition] = []
        for node in sorted(self._seen):
            state = self.is_live(node, now)
            if self._reported.get(node) != state:
                self._reported[node] = state
                changed.append(Transition(node, state))
        return changed
