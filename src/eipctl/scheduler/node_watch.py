"""IpNode heartbeats on this replica's own clock: which nodes are live, and since when dead.

Runs on every replica, leader or not (a manager runnable), so a standby that takes the Lease
already knows which nodes are dead and acts at once. `observe` is the IpNodes informer
handler; `run` wakes when a node could turn dead, logs every death and return, and asks for
a placement pass (`kick`) when one happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from eipctl.core.fields import Obj, ResourceError, labels_of, name_of
from eipctl.core.ipnode import HEARTBEAT, IpNode
from eipctl.core.liveness import Liveness
from eipctl.scheduler import metrics
from eipctl.scheduler.metrics import KNOWN_NODES, LIVE_NODES, NODE_HEARTBEAT_AGE

log = structlog.get_logger(__name__)


class NodeWatch:
    def __init__(
        self,
        liveness: Liveness,
        *,
        clock: Callable[[], float],
        kick: Callable[[], None],
        leading: Callable[[], bool],
        identity: str,
    ) -> None:
        self.liveness = liveness
        self.clock = clock
        self.kick = kick
        """Ask for a placement pass (dropped while standing by)."""
        self.leading = leading
        self.dead_since: dict[str, float] = {}
        """When this replica declared each dead node dead (failover duration starts there)."""
        self._log = log.bind(identity=identity)

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """An IpNode changed: a heartbeat, a restart grace, labels, or it is gone."""
        now = self.clock()
        name = name_of(new or old or {})
        if new is None:
            self.liveness.forget(name)
            self.dead_since.pop(name, None)
            metrics.forget_node(name)
            self.kick()
            return
        was_live = self.liveness.is_live(name, now)
        heartbeat, grace = _heartbeat_and_grace(new)
        self.liveness.observe(name, heartbeat, now, grace=grace)
        relabelled = old is not None and labels_of(old) != labels_of(new)
        if not was_live or relabelled:
            self.kick()

    async def run(self) -> None:
        """Log every death and return once, and start a placement pass when one happens.

        Sleeps until the earliest moment a node could turn dead; a node seen later always
        has a later deadline, so nothing is missed. While every heartbeat has stalled (our
        watch is stale: see `core.liveness`), it polls, and says so once.
        """
        stalled = False
        while True:
            now = self.clock()
            changes = self.liveness.transitions(now)
            for t in changes:
                if t.live:
                    self.dead_since.pop(t.node, None)
                else:
                    self.dead_since.setdefault(t.node, now)
                age = self.liveness.heartbeat_age(t.node, now)
                seen = {
                    "node": t.node,
                    "heartbeat_age": None if age is None else round(age, 3),
                    "leader": self.leading(),
                }
                if t.live:
                    self._log.info("node.live", **seen)
                else:
                    self._log.info("node.dead", **seen)
            for node in [n for n in self.dead_since if self.liveness.is_live(n, now)]:
                del self.dead_since[node]  # e.g. a pass saw it dead, then it beat again
            if changes:
                self.kick()
                LIVE_NODES.set(len(self.liveness.live(now)))
            known = self.liveness.known()
            KNOWN_NODES.set(len(known))
            for node in known:
                age = self.liveness.heartbeat_age(node, now)
                if age is not None:
                    NODE_HEARTBEAT_AGE.labels(node).set(age)
            suspects = self.liveness.suspects(now)
            if bool(suspects) != stalled:
                stalled = bool(suspects)
                if stalled:
                    self._log.warning(
                        "heartbeats.stalled",
                        silent=len(suspects),
                        why="every heartbeat stopped at once: our view may be stale, "
                        "so no node is declared dead until heartbeats flow again",
                    )
                else:
                    self._log.info("heartbeats.flowing")
            deadline = self.liveness.next_death(now)
            delay = self.liveness.timeout if deadline is None else deadline - now
            if stalled:
                delay = min(delay, self.liveness.timeout / 10)
            await asyncio.sleep(max(delay, 0.0) + 0.001)


def _heartbeat_and_grace(obj: Obj) -> tuple[int | None, float]:
    """An IpNode's heartbeat and announced restart grace (0: none).

    The heartbeat is None until the controller has written one: the typed status reads a
    missing counter as 0, and a 0 written after none must count as a change. A status that
    does not parse (the CRD's schema refuses one) has no heartbeat and no grace.
    """
    try:
        status = IpNode.from_dict(obj).status
    except ResourceError:
        return None, 0.0
    written = (obj.get("status") or {}).get(HEARTBEAT) is not None
    return (status.heartbeat if written else None), status.restart_grace
