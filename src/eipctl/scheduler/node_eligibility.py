"""The leader says on each IpNode why it holds no external IP: the condition ``Eligible``.

``False`` with reason ``NodeExcluded`` / ``NodeTainted`` / ``NodeCordoned`` while the Node is
excluded (`core.eligibility`), ``True`` / ``Eligible`` once it is back. A node that was never
excluded carries no such condition, so a cluster without maintenance costs no write, and a
new leader writes nothing for the nodes that are fine. Written on transitions only: after
each placement pass, the pass's exclusions are compared with the condition each IpNode in
the cache carries (status and reason, never the message or a time), and only a difference
is written; a write in flight is not started twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol

import structlog

from eipctl.core.conditions import Condition, find_condition, put_condition, readable_conditions
from eipctl.core.eligibility import EXCLUDE_LABEL, EXCLUDE_TAINT, Exclusion
from eipctl.core.fields import Obj, name_of
from eipctl.core.ipnode import CONDITIONS, ELIGIBLE, REASON_ELIGIBLE
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import NotFound
from eipctl.kube.verbs import WritesUpdate

log = structlog.get_logger(__name__)

Verdict = tuple[bool, str]
"""(eligible, reason) of an Eligible condition."""

_MESSAGES: Mapping[Exclusion, str] = {
    Exclusion.EXCLUDED: f"the Node has the label {EXCLUDE_LABEL}",
    Exclusion.TAINTED: f"the Node has the taint {EXCLUDE_TAINT}",
    Exclusion.CORDONED: "the Node is cordoned (spec.unschedulable) and the scheduler runs "
    "with --exclude-cordoned-nodes",
}


class NodeCache(Protocol):
    def objects(self) -> list[Obj]: ...


def carried(obj: Obj) -> Verdict | None:
    """The (eligible, reason) the IpNode's Eligible condition states; None: none."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    have = find_condition(readable_conditions(status.get(CONDITIONS)), ELIGIBLE)
    return None if have is None else (have.is_true, have.reason)


def wanted(why: Exclusion | None, have: Verdict | None) -> Verdict | None:
    """The verdict to write, or None when the IpNode already says it (or needs nothing)."""
    want: Verdict = (True, REASON_ELIGIBLE) if why is None else (False, why.value)
    if have == want or (why is None and have is None):
        return None
    return want


def message(why: Exclusion | None) -> str:
    if why is None:
        return "may hold external IPs"
    return f"holds no external IP: {_MESSAGES[why]}; its IPs move to other nodes"


class NodeEligibility:
    """One term's writer of the Eligible conditions."""

    def __init__(
        self, nodes: NodeCache, writer: WritesUpdate, *, kick: Callable[[float], None]
    ) -> None:
        self._nodes = nodes
        self._writer = writer
        self._kick = kick
        """Ask for another pass after a delay (a failed write is tried again then)."""
        self._inflight: dict[str, asyncio.Task[None]] = {}

    def sync(self, excluded: Mapping[str, Exclusion]) -> int:
        """Start the writes where an IpNode's condition differs from ``excluded``; returns
        how many started (they finish in the background: nothing waits for them)."""
        started = 0
        for obj in self._nodes.objects():
            name = name_of(obj)
            if name in self._inflight:
                continue  # the pass after that write looks again
            why = excluded.get(name)
            want = wanted(why, carried(obj))
            if want is None:
                continue
            task = asyncio.create_task(self._write(name, *want, message(why)))
            self._inflight[name] = task
            task.add_done_callback(self._done(name))
            started += 1
        return started

    def _done(self, node: str) -> Callable[[asyncio.Task[None]], None]:
        def forget(_task: asyncio.Task[None]) -> None:
            self._inflight.pop(node, None)

        return forget

    async def _write(self, node: str, eligible: bool, reason: str, text: str) -> None:
        condition = Condition(
            type=ELIGIBLE,
            status="True" if eligible else "False",
            reason=reason,
            message=text,
            last_transition_time=datetime.now(UTC),
        )
        try:  # put_condition moves lastTransitionTime only when True/False flips
            await self._writer.update(
                IPNODES,
                node,
                lambda obj: put_condition(obj.setdefault("status", {}), condition),
                status=True,
            )
        except NotFound:
            return
        except Exception as exc:
            log.warning("ipnode.eligible_write_failed", node=node, error=repr(exc))
            self._kick(1.0)  # the next pass compares again
            return
        log.info("ipnode.eligible_written", node=node, eligible=eligible, reason=reason)

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
