"""The fence watchdog, and the one place that reports the fence's transitions.

Two things prove the API reachable and feed `core.fence.Fence`: the heartbeat's writes
(`heartbeat.Heartbeat`) and the reads of `reachability.ApiReachability`; the latter also
fences at once when the probes stop. Neither owns the fence's transitions: both hand the
fence's answer to `FenceWatch.report`, so a fence or a restore is counted, logged and passed
on the same way whoever noticed it.

Fencing runs on our own monotonic clock: the watchdog sleeps until the exact moment the last
reason to hold lapses (`Fence.deadline`: the last API success `fence_timeout` old, the last
agreeing probe of the writer `vouch_window` old, the quorum's word expired), so the node
fences within a few milliseconds of the deadline even while a request hangs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog

from eipctl.core.fence import Fence, FenceTransition

from .metrics import FENCE_TRANSITIONS, FENCED

log = structlog.get_logger(__name__)


class FenceWatch:
    """Fences `fence` on time and reports every transition, from here or from an API success.

    `on_transition` is called (synchronously, on the loop) on FENCE and RESTORE only, after
    the metrics and the log.
    """

    def __init__(
        self,
        node: str,
        *,
        fence: Fence,
        on_transition: Callable[[FenceTransition], None],
        justify: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """``justify``: asked at the deadline, before fencing: True if it renewed a reason to
        hold (`reachability.ApiReachability.justify`: the API, or the peers' quorum)."""
        self._node = node
        self.fence = fence
        self._on_transition = on_transition
        self.justify = justify

    async def watchdog(self) -> None:
        """Fence exactly when the last reason to hold lapses."""
        while True:
            if self.fence.fenced:  # RESTORE comes from an API success (beat or check)
                await asyncio.sleep(self.fence.fence_timeout / 10)
                continue
            remaining = self.fence.deadline() - self.fence.clock()
            if remaining > 0:
                await asyncio.sleep(remaining)
                continue
            if self.justify is not None and await self.justify():
                continue
            self.report(self.fence.check())

    def report(self, transition: FenceTransition) -> None:
        """Count, log and pass on a fence transition (from the watchdog, a beat or a check);
        NONE is dropped."""
        if transition is FenceTransition.NONE:
            return
        FENCE_TRANSITIONS.labels(transition.value).inc()
        FENCED.set(1 if transition is FenceTransition.FENCE else 0)
        if transition is FenceTransition.FENCE:
            log.warning(
                "node.fenced",
                node=self._node,
                api_silence=round(self.fence.api_silence(), 3),
                at=time.time(),
            )
        else:
            log.warning("node.restored", node=self._node, at=time.time())
        self._on_transition(transition)
