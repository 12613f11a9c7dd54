"""Proving the API reachable without writing, and fencing at once when the probes stop.

A controller must let go of its addresses when it cannot see the API (it could not learn
that its claims moved). Writes are not needed to know that: every `interval` a GET of our
own IpNode (or its NotFound) shows the API answers, and feeds `core.fence.Fence`. The GET
asks for resourceVersion=0, so a real API server answers from its watch cache instead of a
quorum read of etcd: one read per node per second must stay cheap, and any version of the
object proves the server answers.

The schedulers' liveness probes (`net.liveness`) say something more: while they arrive, the
scheduler sees us. When they stop for `probe_silence` (the scheduler's node timeout), the
scheduler has declared us dead and is moving our claims, or no scheduler runs. We check the
API at once: if it answers, we will see the moves through our watch (or nothing moves);
if it does not, we are cut off from both and fence now, not `node_timeout` later, so the
addresses go at about the time other nodes take them (docs/liveness.md, "Every partition case").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from eipctl.core.fence import Fence, FenceTransition
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import NotFound
from eipctl.kube.verbs import Gets

from .metrics import API_CHECKS, API_SILENCE

log = structlog.get_logger(__name__)


class ApiReachability:
    def __init__(
        self,
        api: Gets,
        node: str,
        *,
        interval: float,
        probe_silence: float,
        fence: Fence,
        on_transition: Callable[[FenceTransition], None],
        last_probe: Callable[[], float | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``last_probe``: when the last valid liveness probe arrived, on ``clock``."""
        self._api = api
        self._node = node
        self._interval = interval
        self._probe_silence = probe_silence
        self.fence = fence
        self._on_transition = on_transition
        self._last_probe = last_probe
        self._clock = clock

    async def check(self, within: float) -> bool:
        """One read of our IpNode; True (and the fence told) if the API answered."""
        try:
            async with asyncio.timeout(within):
                # NotFound is an answer all the same; the heartbeat re-registers
                with contextlib.suppress(NotFound):
                    await self._api.get(IPNODES, self._node, resource_version="0")
        except Exception as exc:  # ApiError, timeout, connection: the API did not answer
            API_CHECKS.labels("error").inc()
            log.debug("api.check_failed", node=self._node, error=repr(exc))
            return False
        API_CHECKS.labels("ok").inc()
        self._on_transition(self.fence.succeeded())
        return True

    def probes_silent(self) -> float | None:
        """Seconds without a probe, if probes came before and stopped; else None."""
        last = self._last_probe()
        if last is None:
            return None
        silence = self._clock() - last
        return silence if silence >= self._probe_silence else None

    async def run(self) -> None:
        """Check every `interval`; beside it, check at once (and fence on failure) when the
        probes stop. Two loops, so a periodic check hanging on a dead API (up to `interval`)
        never delays noticing the silence."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._periodic())
            group.create_task(self._on_silence())

    async def _periodic(self) -> None:
        next_check = self._clock()
        while True:
            await self.check(self._interval)
            API_SILENCE.set(self.fence.api_silence())
            next_check = max(next_check + self._interval, self._clock())  # no catching up
            await asyncio.sleep(next_check - self._clock())

    async def _on_silence(self) -> None:
        tick = self._probe_silence / 4
        reacted = False  # one immediate check per silence
        while True:
            silence = self.probes_silent()
            if silence is None:
                reacted = False
            elif not reacted:
                reacted = True
                answered = await self.check(min(self._interval, self._probe_silence))
                log.warning(
                    "liveness.probes_stopped",
                    node=self._node,
                    silence=round(silence, 3),
                    api_answered=answered,
                )
                if not answered:
                    self._on_transition(self.fence.lose())
            await asyncio.sleep(tick)
