"""The leader publishes its liveness judgement as each IpNode's Live condition.

Written on transitions only (live <-> dead, or dead for another reason), never to refresh a
message or a time, so steady state costs no write. The placement pass waits for these
writes (bounded) before it moves claims: the controller that takes a claim over reads the
previous holder's Live condition and skips its 200 ms address probe when the holder is
declared dead (docs/liveness.md, "The probe before an add").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
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


class NodeCache(Protocol):
    def objects(self) -> list[Obj]: ...


class NodeConditions:
    def __init__(
        self,
        nodes: NodeCache,
        liveness: Liveness,
        writer: WritesUpdate,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._nodes = nodes
        self._liveness = liveness
        self._writer = writer
        self._clock = clock
        self._inflight: dict[str, asyncio.Task[None]] = {}

    def desired(self, node: str, now: float) -> tuple[bool, str, str]:
        """(live, reason, message) as this replica judges ``node`` now."""
        lv = self._liveness
        if lv.is_live(node, now):
            return True, REASON_REPLYING, "answers the scheduler's liveness probes"
        if lv.is_fenced(node):
            return False, REASON_FENCED, "its controller fenced itself and holds no addresses"
        silence = lv.silence(node, now)
        heard = "never answered" if silence is None else f"no reply for {silence:.1f}s"
        return False, REASON_NO_REPLY, f"{heard} (timeout {lv.timeout:g}s)"

    async def sync(self) -> int:
        """Write every Live condition that differs from the judgement; wait at most
        `WRITE_WAIT` for them (the rest finish in the background). Returns how many started."""
        now = self._clock()
        started = []
        for obj in self._nodes.objects():
            name = name_of(obj)
            if name not in self._liveness.known() or name in self._inflight:
                continue
            live, reason, message = self.desired(name, now)
            have = live_condition(obj)
            if have is not None and have.is_true == live and have.reason == reason:
                continue
            task = asyncio.create_task(self._write(name, live, reason, message))
            self._inflight[name] = task
            task.add_done_callback(self._done(name))
            started.append(task)
        if started:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WRITE_WAIT):
                    await asyncio.gather(*(asyncio.shield(t) for t in started))
        return len(started)

    def _done(self, node: str) -> Callable[[asyncio.Task[None]], None]:
        def forget(_task: asyncio.Task[None]) -> None:
            self._inflight.pop(node, None)

        return forget

    async def _write(self, node: str, live: bool, reason: str, message: str) -> None:
        try:
            await self._writer.update(IPNODES, node, mark_live(live, reason, message), status=True)
        except NotFound:
            return
        except Exception as exc:  # the next pass sees the old condition and tries again
            log.warning("ipnode.live_write_failed", node=node, error=repr(exc))
            return
        log.info("ipnode.live_written", node=node, live=live, reason=reason)

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
