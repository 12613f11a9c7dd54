"""Node liveness from heartbeat counters, judged on the observer's own monotonic clock.

Each controller bumps ``status.heartbeat`` on its IpNode. Clocks are never compared across
machines: the scheduler notes *when it saw* each counter change, on its own monotonic clock,
and a node is dead once it has seen no change for ``timeout``. The caller passes ``now``
(e.g. ``loop.time()``) into every call; nothing here reads a clock.

- A node seen for the first time counts as just changed: a scheduler that starts (or a
  standby that takes over) gives every node one full timeout before judging it, rather than
  declaring the whole cluster dead.
- Any change counts, including a counter that went down (a controller restarted from 0).
- A dead node whose counter changes again is live again at once.
- A controller stopping cleanly for a restart announces a grace (``restartGraceSeconds`` on
  its IpNode, with a last heartbeat): until the next change, that node is judged against
  ``max(timeout, grace)``, so a rolling update does not move its IPs. Its next heartbeat
  clears the grace; a controller that never comes back is dead after the grace.
- Re-observing the same value (a relist replaying the cache) changes nothing.
- The observer's own view must be current. A node is dead only if, besides its own silence,
  some other heartbeat changed at least ``timeout / 2`` after its last change. If the
  observer's watch stalls (API restart, partition), every counter freezes at once; without
  this rule the nodes with the earliest deadlines would be declared dead one by one and their
  claims moved onto nodes that are just as alive. Silent nodes blocked by this rule are
  ``suspects``. The price: when every node goes silent at once (or the only node does),
  nobody is declared dead, which moves nothing where there was no live target anyway.

One judge for both observers. The scheduler watches every IpNode. A controller judges one
node at a time, the previous holder of a claim whose address still answers its probe
(`core.conflict`), with ``fresh_reads=True``: every other rule above holds, but not the
stale-view rule, which cannot apply there. The controller reads that IpNode with a GET each
time it judges, never from a watch, so its view cannot stall (a read that fails leaves the
holder unknown, and unknown is never taken over); and it sees no other node's counter, so
the rule would declare nobody dead, ever.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Liveness", "Transition"]


@dataclass(frozen=True)
class _Seen:
    heartbeat: int | None
    changed_at: float
    timeout: float


@dataclass(frozen=True)
class Transition:
    """A node whose liveness differs from what the caller last heard."""

    node: str
    live: bool


class Liveness:
    """Heartbeat observations per node; answers live/dead for a given ``now``."""

    def __init__(self, timeout: float, *, fresh_reads: bool = False) -> None:
        """``fresh_reads``: every observation is a fresh read, not a watch (a controller
        judging a holder): the stale-view rule is off (see the module docstring)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.fresh_reads = fresh_reads
        self._seen: dict[str, _Seen] = {}
        self._reported: dict[str, bool] = {}
        self._latest_change = float("-inf")
        """When the freshest change of any node was seen: how current our view is."""

    def observe(self, node: str, heartbeat: int | None, now: float, grace: float = 0.0) -> bool:
        """Record that ``node`` showed ``heartbeat`` at ``now``; True if the counter moved.

        A first observation counts as a move (see the module docstring). ``grace`` is the
        restart grace the node announced with this heartbeat (0: none).
        """
        seen = self._seen.get(node)
        if seen is not None and seen.heartbeat == heartbeat:
            return False
        self._seen[node] = _Seen(heartbeat, now, max(self.timeout, grace))
        self._latest_change = max(self._latest_change, now)
        return True

    def forget(self, node: str) -> None:
        """The IpNode was deleted."""
        self._seen.pop(node, None)
        self._reported.pop(node, None)

    def known(self) -> frozenset[str]:
        return frozenset(self._seen)

    def is_live(self, node: str, now: float) -> bool:
        """False once ``node`` is silent for ``timeout`` while our view is current (above)."""
        seen = self._seen.get(node)
        return seen is not None and not self._dead(seen, now)

    def _silent(self, seen: _Seen, now: float) -> bool:
        return now - seen.changed_at >= seen.timeout

    def _dead(self, seen: _Seen, now: float) -> bool:
        if not self._silent(seen, now):
            return False
        return self.fresh_reads or self._latest_change - seen.changed_at >= self.timeout / 2

    def suspects(self, now: float) -> frozenset[str]:
        """Nodes silent for ``timeout`` that are kept live because every heartbeat stalled."""
        return frozenset(
            n for n, s in self._seen.items() if self._silent(s, now) and not self._dead(s, now)
        )

    def live(self, now: float) -> frozenset[str]:
        return frozenset(n for n in self._seen if self.is_live(n, now))

    def heartbeat_age(self, node: str, now: float) -> float | None:
        """Seconds since ``node``'s counter last changed (None if unknown)."""
        seen = self._seen.get(node)
        return None if seen is None else now - seen.changed_at

    def next_death(self, now: float) -> float | None:
        """The earliest time after ``now`` at which a live node turns dead, if none changes."""
        deadlines = [
            s.changed_at + s.timeout for s in self._seen.values() if s.changed_at + s.timeout > now
        ]
        return min(deadlines, default=None)

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
