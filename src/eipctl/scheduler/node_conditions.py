"""The leader publishes its liveness judgement as each IpNode's Live condition.

Written on transitions only (live <-> dead, or dead for another reason), never to refresh a
message or a time, so steady state costs no write. The placement pass waits for these
writes (bounded) before it moves claims: the controller that takes a claim over reads the
previous holder's Live condition and skips its 200 ms address probe when the holder is
declared dead (docs/liveness.md, "The probe before an add").

What a pass looks at: only the nodes marked since the previous pass, so its cost grows with
the changes, not with the cluster. `NodeConditions` remembers the (status, reason) that each
IpNode carries (read from the object, or written by us) and marks a node when
- the judge's verdict on it may have moved (`changed`): a liveness reply from a node that
  was not live or that says FENCED (`NodeWatch.heard`; a live node's reply cannot move a
  verdict that is already "live", so the 10,000 replies a second of 1,000 live nodes are not
  even looked at), an IpNode event the `NodeWatch` has just judged, each transition the
  `NodeWatch` reports when a node times out, the end of our own write of it; a mark that
  leaves the verdict equal to what the IpNode carries is dropped at once. (A timeout
  is reported when the `NodeWatch` wakes, ~1 ms after the deadline: a pass that starts in
  between writes that node at the next pass, which that report kicks.)
- its IpNode's Live condition moves under us, or the IpNode is created (re-created)
  (`observe`, the IpNodes informer): somebody else's edit is put right at the next pass,
  which the mark asks for (no other change may be coming to ask for one);
- its write failed (retried at the next pass, which it asks for; NotFound is not: the object
  is gone, and its re-creation is an informer event that marks it); or its write ended with
  the verdict moved on meanwhile (a pass is asked for too).
A full walk, comparing every IpNode in the informer's cache with the verdict, runs at the
term's first pass (a new leader corrects whatever the previous one left and whatever changed
while it stood by) and then at the first pass `FULL_WALK_INTERVAL` (30 s) after the
previous walk: a safety net for a change that reached no mark, not the way edits are found.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog

from eipctl.core.fields import Obj, name_of
from eipctl.core.ipnode import (
    REASON_FENCED,
    REASON_NO_REPLY,
    REASON_REPLYING,
    live_condition,
    mark_live,
)
from eipctl.core.liveness import Liveness
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import NotFound
from eipctl.kube.verbs import WritesUpdate

log = structlog.get_logger(__name__)

WRITE_WAIT = 0.25
"""How long a placement pass waits for the condition writes before it moves claims."""

FULL_WALK_INTERVAL = 30.0
"""Seconds between two full walks of the IpNodes (the safety net; the term starts with one)."""

Verdict = tuple[bool, str]
"""(live, reason): what a Live condition is compared by (never its message or its time)."""


class NodeCache(Protocol):
    def objects(self) -> list[Obj]: ...


def carried(obj: Obj) -> Verdict | None:
    """The verdict ``obj``'s Live condition states (None: no readable Live condition)."""
    have = live_condition(obj)
    return None if have is None else (have.is_true, have.reason)


class NodeConditions:
    def __init__(
        self,
        nodes: NodeCache,
        liveness: Liveness,
        writer: WritesUpdate,
        *,
        clock: Callable[[], float],
        full_walk_interval: float = FULL_WALK_INTERVAL,
        kick: Callable[[], None] | None = None,
    ) -> None:
        """``kick``: asks for a pass (the scheduler enqueues one) when a write ends with the
        node marked again: the verdict moved on while it was written, or it failed. Without
        it that mark waited for a pass something else started, which a quiet cluster never
        does: the Live condition stayed stale (seen at 200 nodes booting under load)."""
        self._kick = kick
        self._nodes = nodes
        self._liveness = liveness
        self._writer = writer
        self._clock = clock
        self._full_walk_interval = full_walk_interval
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._carried: dict[str, Verdict | None] = {}
        """Per IpNode in the cache: the verdict its Live condition states, as far as we know."""
        self._marked: set[str] = set()
        """Nodes the next pass looks at."""
        self._next_walk: float | None = None
        """When the next pass walks every IpNode (None: the first pass of the term)."""

    def verdict(self, node: str, now: float) -> Verdict:
        lv = self._liveness
        if lv.is_live(node, now):
            return True, REASON_REPLYING
        if lv.is_fenced(node):
            return False, REASON_FENCED
        return False, REASON_NO_REPLY

    def desired(self, node: str, now: float) -> tuple[bool, str, str]:
        """(live, reason, message) as this replica judges ``node`` now."""
        live, reason = self.verdict(node, now)
        if reason == REASON_REPLYING:
            return live, reason, "answers the scheduler's liveness probes"
        if reason == REASON_FENCED:
            return live, reason, "its controller fenced itself and holds no addresses"
        lv = self._liveness
        silence = lv.silence(node, now)
        heard = "never answered" if silence is None else f"no reply for {silence:.1f}s"
        return live, reason, f"{heard} (timeout {lv.timeout:g}s)"

    # --- marks (quick: called per liveness reply and per IpNode event) -----------------------
    def changed(self, node: str) -> None:
        """The judge's verdict on ``node`` may have moved: the next pass looks at it if the
        verdict differs from what its IpNode carries."""
        if self.verdict(node, self._clock()) != self._carried.get(node):
            self._marked.add(node)

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """An IpNode event (after the `NodeWatch` judged it): note the Live condition the
        object carries when it is new or its condition moved (somebody's edit, our own write
        coming back), and mark the node if that differs from the verdict."""
        name = name_of(new or old or {})
        if new is None:
            self._carried.pop(name, None)
            self._marked.discard(name)
            return
        have = carried(new)
        if old is None or name not in self._carried or have != carried(old):
            self._carried[name] = have
        self.changed(name)
        if name in self._marked:
            self._ask_for_pass()  # put right soon, not whenever a pass happens to come

    # --- the pass -------------------------------------------------------------------------
    async def sync(self) -> int:
        """Write the Live conditions of the marked nodes (of every node on a full walk) that
        differ from the judgement; wait at most `WRITE_WAIT` for them (the rest finish in the
        background). Returns how many started."""
        now = self._clock()
        if self._next_walk is None or now >= self._next_walk:
            names: Iterable[str] = self._walk(now)
        else:
            names, self._marked = sorted(self._marked), set()
        started = [task for name in names if (task := self._start(name, now)) is not None]
        if started:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WRITE_WAIT):
                    await asyncio.gather(*(asyncio.shield(t) for t in started))
        return len(started)

    def _walk(self, now: float) -> list[str]:
        """Every IpNode, as the cache has it (the objects' conditions, not our memory)."""
        self._next_walk = now + self._full_walk_interval
        self._carried = {name_of(obj): carried(obj) for obj in self._nodes.objects()}
        self._marked = set()
        return list(self._carried)

    def _start(self, name: str, now: float) -> asyncio.Task[None] | None:
        if name not in self._carried:
            return None  # no IpNode (yet): its creation is an event that marks it
        if self._liveness.silence(name, now) is None:
            return None  # not judged yet: `NodeWatch.observe` introduces it, which marks it
        if name in self._inflight:
            return None  # the end of that write looks again (`_write`)
        live, reason, message = self.desired(name, now)
        if self._carried[name] == (live, reason):
            return None
        task = asyncio.create_task(self._write(name, live, reason, message))
        self._inflight[name] = task
        task.add_done_callback(self._done(name))
        return task

    def _done(self, node: str) -> Callable[[asyncio.Task[None]], None]:
        def forget(_task: asyncio.Task[None]) -> None:
            self._inflight.pop(node, None)

        return forget

    async def _write(self, node: str, live: bool, reason: str, message: str) -> None:
        try:
            await self._writer.update(IPNODES, node, mark_live(live, reason, message), status=True)
        except NotFound:
            return
        except Exception as exc:
            log.warning("ipnode.live_write_failed", node=node, error=repr(exc))
            self._marked.add(node)  # the next pass tries again
            self._ask_for_pass()
            return
        log.info("ipnode.live_written", node=node, live=live, reason=reason)
        if node in self._carried:  # else deleted meanwhile
            self._carried[node] = (live, reason)
            self.changed(node)  # the verdict may have moved on while we wrote
            if node in self._marked:
                self._ask_for_pass()

    def _ask_for_pass(self) -> None:
        if self._kick is not None:
            self._kick()

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
