"""Which nodes are live, on this replica's own clock, from the liveness path.

Runs on every replica, leader or not (manager runnables), so a standby that takes the Lease
already knows which nodes are dead and acts at once. `observe` is the IpNodes informer
handler: it keeps the prober's targets (each IpNode's spec.livenessAddress/livenessPort),
introduces new nodes, and passes on restart graces. `heard` is the prober's reply handler.
`run` wakes when a node could turn dead, logs every death and return, and asks for a
placement pass (`kick`) when one happens. docs/liveness.md has the whole model.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable
from typing import Final

import structlog
from prometheus_client import Gauge

from eipctl.core.fields import Obj, ResourceError, labels_of, name_of
from eipctl.core.ipnode import HEARTBEAT, IpNode
from eipctl.core.liveness import Liveness, Transition
from eipctl.core.liveness_wire import Flag
from eipctl.scheduler import metrics
from eipctl.scheduler.metrics import KNOWN_NODES, LIVE_NODES, LIVENESS_STALLED, NODE_SILENCE

log = structlog.get_logger(__name__)

_API_STALE: Final = int(Flag.API_STALE)
_FENCED: Final = int(Flag.FENCED)

HEARTBEAT_TIMEOUT = 0.75
"""The node timeout of the heartbeat design (200 ms beats), kept for the controllers judged by
their counter (no liveness endpoint: an older version during an upgrade), so that an upgrade
of the schedulers first does not judge them against a timeout of two beats."""

Targets = Callable[[dict[str, tuple[str, int]]], None]
"""Where to probe: node -> (address, port) (`net.liveness.LivenessProber.set_targets`)."""


class NodeWatch:
    def __init__(
        self,
        liveness: Liveness,
        *,
        clock: Callable[[], float],
        kick: Callable[[], None],
        leading: Callable[[], bool],
        identity: str,
        set_targets: Targets,
        on_transitions: Callable[[list[Transition]], None] | None = None,
        drain: Callable[[], None] | None = None,
    ) -> None:
        self.liveness = liveness
        self.clock = clock
        self.kick = kick
        """Ask for a placement pass (dropped while standing by)."""
        self.leading = leading
        self.set_targets = set_targets
        self.on_transitions = on_transitions
        self.drain = drain
        """Read the replies queued at the socket now (`LivenessProber.drain`): called before
        every judgement, so a reply that has arrived counts even when this loop fell behind
        (a flood, CPU starvation) and was not read yet."""
        """Told of the transitions `run` finds (the leader's Live conditions), before `kick`."""
        self.dead_since: dict[str, float] = {}
        """When this replica declared each dead node dead (failover duration starts there)."""
        self.returned_at: dict[str, float] = {}
        """When each node declared dead was live again (the placement's hold-down)."""
        self._targets: dict[str, tuple[str, int]] = {}
        self._heartbeats: dict[str, int | None] = {}
        """Last API heartbeat counter seen per node: a restart grace counts once, with it."""
        self._replies = itertools.count(1)
        self._silences: dict[str, Gauge] = {}
        """Each node's `NODE_SILENCE` series, looked up once (``labels`` costs more than
        ``set``, and the loop sets every node's a few times a second)."""
        self._log = log.bind(identity=identity)

    def _publish_silences(self, known: Iterable[str], now: float) -> None:
        silences = self._silences
        for node in known:
            silence = self.liveness.silence(node, now)
            if silence is None:
                continue
            gauge = silences.get(node)
            if gauge is None:
                gauge = silences[node] = NODE_SILENCE.labels(node)
            gauge.set(silence)

    # --- inputs ---------------------------------------------------------------------------
    def heard(self, node: str, flags: Flag) -> bool:
        """An authenticated, fresh liveness reply (the prober accepts each reply once).

        True if the judge's verdict on ``node`` may have moved (it was not live, or it says
        it fenced): the Live condition's marks need a look. The common reply, from a live
        node that says nothing new, only refreshes it: 10,000 of them a second at 1,000
        nodes, so that path is kept short (ints, not the enum's slow ``&``).
        """
        now = self.clock()
        bits = int(flags)
        liveness = self.liveness
        was_live = liveness.is_live(node, now)
        stale = bool(bits & _API_STALE)
        if liveness.mark_api_stale(node, stale):
            if stale:
                self._log.info("node.api_stale", node=node)
            else:
                self._log.info("node.api_back", node=node)
                self.kick()  # it may take claims again
        if bits & _FENCED:
            liveness.fence(node, now)
            if was_live:
                self._log.info("node.fenced_reply", node=node, leader=self.leading())
                self.kick()
            return True
        liveness.observe(node, next(self._replies), now)
        if not was_live:
            self.kick()
        return not was_live

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """An IpNode changed: its liveness endpoint, a restart grace, labels, or it is gone."""
        now = self.clock()
        name = name_of(new or old or {})
        if new is None:
            self.liveness.forget(name)
            self.dead_since.pop(name, None)
            self.returned_at.pop(name, None)
            self._heartbeats.pop(name, None)
            if self._targets.pop(name, None) is not None:
                self.set_targets(dict(self._targets))
            metrics.forget_node(name)
            self._silences.pop(name, None)
            self.kick()
            return
        was_live = self.liveness.is_live(name, now)
        try:
            ipnode: IpNode | None = IpNode.from_dict(new)
        except ResourceError:
            ipnode = None  # the CRD's schema refuses such an object: no endpoint, no grace
        endpoint = ipnode.spec.liveness_endpoint if ipnode else None
        self._target(name, endpoint)
        self.liveness.introduce(name, now)
        written = (new.get("status") or {}).get(HEARTBEAT) is not None
        heartbeat = ipnode.status.heartbeat if ipnode is not None and written else None
        if heartbeat != self._heartbeats.get(name, None) or name not in self._heartbeats:
            self._heartbeats[name] = heartbeat
            grace = ipnode.status.restart_grace if ipnode else 0.0
            if grace > 0:  # a controller stopping for a restart said so with this heartbeat
                self.liveness.observe(name, ("grace", heartbeat), now)
                self.liveness.grant_grace(name, now, grace)
                self._log.info("node.restart_grace", node=name, grace=grace)
            elif heartbeat is not None and self.liveness.end_grace(name, now):
                # the restarted process's first beat; its stopping predecessor's late replies
                # (after the grace was seen) ended nothing: docs/liveness.md "The judge"
                self._log.info("node.restart_grace_ended", node=name)
            if grace <= 0 and endpoint is None and heartbeat is not None:
                # no liveness path (a controller from before it): its counter is its sign
                self.liveness.observe(name, ("heartbeat", heartbeat), now, HEARTBEAT_TIMEOUT)
        relabelled = old is not None and labels_of(old) != labels_of(new)
        if not was_live or relabelled:
            self.kick()

    def _target(self, name: str, endpoint: tuple[str, int] | None) -> None:
        if self._targets.get(name) == endpoint:
            return
        if endpoint is None:
            self._targets.pop(name, None)
        else:
            self._targets[name] = endpoint
        self.set_targets(dict(self._targets))

    # --- the judge's clock ------------------------------------------------------------------
    async def run(self) -> None:
        """Log every death and return once, and start a placement pass when one happens.

        Sleeps until the earliest moment a node could turn dead; a node heard later always
        has a later deadline, so nothing is missed. While every node has gone silent (our
        view is stale: see `core.liveness`), it polls, and says so once.
        """
        stalled = False
        while True:
            if self.drain is not None:
                self.drain()
            now = self.clock()
            changes = self.liveness.transitions(now)
            for t in changes:
                if t.live:
                    if self.dead_since.pop(t.node, None) is not None:
                        self.returned_at[t.node] = now
                else:
                    self.dead_since.setdefault(t.node, now)
                silence = self.liveness.silence(t.node, now)
                seen = {
                    "node": t.node,
                    "silence": None if silence is None else round(silence, 3),
                    "fenced": self.liveness.is_fenced(t.node),
                    "leader": self.leading(),
                }
                if t.live:
                    self._log.info("node.live", **seen)
                else:
                    self._log.info("node.dead", **seen)
            for node in [n for n in self.dead_since if self.liveness.is_live(n, now)]:
                del self.dead_since[node]  # e.g. a pass saw it dead, then it replied again
                self.returned_at[node] = now
            if changes:
                if self.on_transitions is not None:
                    self.on_transitions(changes)
                self.kick()
                LIVE_NODES.set(len(self.liveness.live(now)))
            known = self.liveness.known()
            KNOWN_NODES.set(len(known))
            self._publish_silences(known, now)
            suspects = self.liveness.suspects(now)
            if bool(suspects) != stalled:
                stalled = bool(suspects)
                LIVENESS_STALLED.set(1 if stalled else 0)
                if stalled:
                    self._log.warning(
                        "liveness.stalled",
                        silent=len(suspects),
                        why="every node went silent at once: our view may be stale, "
                        "so no node is declared dead until replies flow again",
                    )
                else:
                    self._log.info("liveness.flowing")
            deadline = self.liveness.next_death(now)
            delay = self.liveness.timeout if deadline is None else deadline - now
            if stalled:
                delay = min(delay, self.liveness.timeout / 10)
            await asyncio.sleep(max(delay, 0.0) + 0.001)
