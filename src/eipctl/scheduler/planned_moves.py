"""Planned moves (maintenance: a node excluded, drained, cordoned) in flight, at most
`PLANNED_IN_FLIGHT` at once: each takes an address off a live node, which keeps it only for
what is left of its --address-lifetime, so the new node must bind it within that."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from eipctl.core.claims import is_bound_on, node_of
from eipctl.core.fields import Obj, name_of
from eipctl.core.placement import Decision, Reason
from eipctl.scheduler.metrics import PLANNED_MOVE_SECONDS, PLANNED_MOVES

log = structlog.get_logger(__name__)

PLANNED_IN_FLIGHT = 4
"""Planned moves (maintenance) written and not yet Bound by their new node, at most; the rest
wait for a later pass. The old node stops renewing an address whose claim moved, so it keeps
it for what is left of its --address-lifetime (between 1 and 2 s with the defaults): the new
node must bind within that. On the bed, 50 moves at once took up to 1.6 s to bind and some
addresses expired first (gaps); 10 at once still up to 1.6 s; 4 at once at most 0.94 s
(p50 0.4 s), with all 50 taken over by MAC."""
PLANNED_STALE = 10.0
"""Seconds after which a planned move that never bound stops counting against the limit."""


class PlannedMoves:
    """The planned moves written and not yet Bound, and whether a pass held some back."""

    def __init__(self, clock: Callable[[], float], kick: Callable[[float], None]) -> None:
        self._clock = clock
        self._kick = kick
        self._moves: dict[str, tuple[str, Reason, float]] = {}
        """claim -> (new node, reason, written at)."""
        self._held_back = False

    def room(self, now: float, pending: Mapping[str, Decision | None]) -> int:
        """How many more planned moves may start now (``pending``: the writes in flight)."""
        for name, (_, _, since) in list(self._moves.items()):
            if now - since > PLANNED_STALE:
                del self._moves[name]
        writing = sum(
            1
            for name, p in pending.items()
            if p is not None and p.reason.planned and name not in self._moves
        )
        return PLANNED_IN_FLIGHT - len(self._moves) - writing

    def held(self, claims: int) -> None:
        """A pass left ``claims`` planned moves for later."""
        self._held_back = True
        self._kick(PLANNED_STALE)  # safety net; a planned move binding kicks sooner
        log.info("placement.planned_moves_held", claims=claims, limit=PLANNED_IN_FLIGHT)

    def written(self, d: Decision, stored: Obj) -> None:
        """A planned move's write is stored: its clock runs until the new node binds it."""
        PLANNED_MOVES.labels(d.reason.value).inc()
        self._moves[d.claim] = (d.to_node, d.reason, self._clock())
        self.observe(stored)  # the new node may have bound it already

    def observe(self, obj: Obj | None, name: str = "") -> None:
        """A claim as the informer (or our write) has it: ends the clock of a planned move
        once its new node reports it Bound; forgets it if it went elsewhere or is gone."""
        name = name or name_of(obj or {})
        planned = self._moves.get(name)
        if planned is None:
            return
        to_node, reason, since = planned
        if obj is None or node_of(obj) != to_node:
            del self._moves[name]
            self._release()
        elif is_bound_on(obj, to_node):
            self._release()
            del self._moves[name]
            PLANNED_MOVE_SECONDS.labels(reason.value).observe(max(0.0, self._clock() - since))
            log.info(
                "placement.planned_move.bound",
                claim=name,
                node=to_node,
                reason=reason.value,
                seconds=round(self._clock() - since, 3),
            )

    def _release(self) -> None:
        if self._held_back:
            self._held_back = False
            self._kick(0.0)  # room for the planned moves a pass held back
