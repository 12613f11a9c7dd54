"""Proving the API reachable without writing, and deciding what a silence means.

A controller must let go of its addresses when somebody who decides can move its claims
while it cannot see what they decide (docs/liveness.md, "Outages"); `core.fence.Fence` holds
the reasons that make holding safe. This module feeds it:

- Reads. Every `interval` a GET of our own IpNode (or its NotFound) shows the API answers.
  The GET asks for resourceVersion=0, so a real API server answers from its watch cache. It
  is skipped while the writing leader vouches for us (its probes carry a digest equal to our
  claims') and our last request succeeded: that is a fresher proof than a read, and it costs
  the API nothing, so a cluster of new schedulers and controllers reads nothing per node per
  second for this. While our requests fail the reads go on, vouched or not, so that the
  API's return is seen within an interval. Any HTTP
  answer counts, a 429 of API Priority and Fairness included: a busy server is not a
  partition.
- The writer's silence. When the writer's probes stop for `probe_silence` (the scheduler's
  fence timeout), the leader has declared us dead and is moving our claims, or it cannot write
  any more. We check the API at once, and if it has not answered within `HEDGE`, ask our
  peers beside it: the API answers -> our watch will show the moves; most peers hear no
  writer either (`core.outage`) -> the control plane is down, hold, and ask again when that
  word lapses;
  anybody hears a writer, or nobody answers -> we are cut off: fence now; some answer, too
  few to tell -> the fence's deadline (about a second on) asks again and decides.
- The writer disagreeing. A writer's digest that differs from ours for `MISMATCH_GRACE` means
  our view of our claims is stale where it matters: relist them, and fence if the API does not
  answer.
- The last justification lapsing (`justify`, asked by `fencing.FenceWatch` at the fence's
  deadline): the same questions to the API and the peers before fencing, so a control plane
  that is down while no scheduler runs (or one that never ran) leaves the addresses in place
  too, confirmed again each `CONFIRM_VALID`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

import structlog

from eipctl.core.fence import Fence, FenceTransition, Justification
from eipctl.core.outage import OutageVerdict
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import NotFound, server_answered
from eipctl.kube.verbs import Gets

from .metrics import API_CHECKS, API_SILENCE, OUTAGE_HOLD, OUTAGE_VERDICTS

log = structlog.get_logger(__name__)

MISMATCH_GRACE = 1.0
"""Seconds a writer's digest may differ from ours (a watch event in flight) before we act."""
CONFIRM_VALID = 1.0
"""Seconds a quorum's "no writer" justifies holding; asked again when it lapses."""
HEDGE = 0.1
"""Seconds an API check runs alone before the peers are asked beside it (a watch-cache GET of
a healthy API server answers well within it)."""


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
        ask_peers: Callable[[], Awaitable[OutageVerdict]] | None = None,
        mismatch_since: Callable[[], float | None] = lambda: None,
        relist: Callable[[], None] = lambda: None,
        on_outage: Callable[[Justification | None, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``last_probe``: when the last probe of a possible writer came, on ``clock`` (None
        before any). ``ask_peers``: the peers' verdict (None: nobody to ask, `UNKNOWN`).
        ``mismatch_since``: since when a writer's digest differs from ours (None: it does
        not). ``on_outage(reason, seconds)``: told when a hold through failing API requests
        begins (reason) and ends (None, with how long it lasted)."""
        self._api = api
        self._node = node
        self._interval = interval
        self._probe_silence = probe_silence
        self.fence = fence
        self._on_transition = on_transition
        self._last_probe = last_probe
        self._ask_peers = ask_peers
        self._mismatch_since = mismatch_since
        self._relist = relist
        self._on_outage = on_outage
        self._clock = clock
        self._outage: tuple[Justification, float] | None = None
        self._holding_on_quorum = False

    async def check(self, within: float) -> bool:
        """One read of our IpNode; True (and the fence told) if the API answered."""
        try:
            async with asyncio.timeout(within):
                # NotFound is an answer all the same; the heartbeat re-registers
                with contextlib.suppress(NotFound):
                    await self._api.get(IPNODES, self._node, resource_version="0")
        except Exception as exc:  # ApiError, timeout, connection: maybe no answer
            if not server_answered(exc):
                API_CHECKS.labels("error").inc()
                self.fence.failed()
                log.debug("api.check_failed", node=self._node, error=repr(exc))
                return False
            log.info("api.check_refused", node=self._node, error=repr(exc))
        API_CHECKS.labels("ok").inc()
        self._holding_on_quorum = False
        self._on_transition(self.fence.succeeded())
        self._report_outage()
        return True

    def probes_silent(self) -> float | None:
        """Seconds without a writer's probe, if they came before and stopped; else None."""
        last = self._last_probe()
        if last is None:
            return None
        silence = self._clock() - last
        return silence if silence >= self._probe_silence else None

    async def run(self) -> None:
        """Check every `interval`; beside it, the guard (the module docstring). Two loops, so
        a periodic check hanging on a dead API (up to `interval`) never delays the guard."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._periodic())
            group.create_task(self._guard())

    async def _periodic(self) -> None:
        next_check = self._clock()
        while True:
            # vouched for, the check is not needed; but while our requests fail it goes on,
            # so the API's return is seen within an interval (and told: `on_outage`)
            if not self.fence.vouched_recently() or self.fence.api_failing:
                await self.check(self._interval)
            API_SILENCE.set(self.fence.api_silence())
            next_check = max(next_check + self._interval, self._clock())  # no catching up
            await asyncio.sleep(next_check - self._clock())

    async def verify(self) -> tuple[bool, OutageVerdict]:
        """The API checked and, if it has not answered within `HEDGE`, the peers asked
        beside it: (API answered, peers' verdict; UNKNOWN if they were not asked). A quorum's
        "no writer" extends the fence as soon as it is in, while the check may still hang.
        Asking the API alone first spares the cluster a query from every node to every other
        when the writer merely changed (a leader hand-over, with the API up); asking the
        peers beside a hanging check keeps a node that is cut off from everything letting go
        as soon as the check times out."""
        checking = asyncio.ensure_future(self.check(min(self._interval, self._probe_silence)))
        try:
            done, _ = await asyncio.wait({checking}, timeout=HEDGE)
            if checking in done and checking.result():
                return True, OutageVerdict.UNKNOWN
            if self._ask_peers is None:  # nobody to ask: nobody answers
                return await checking, OutageVerdict.NO_ANSWER
            verdict = await self._ask_peers()
            if verdict is OutageVerdict.OUTAGE:
                self.fence.confirmed(CONFIRM_VALID)
            answered = await checking
        finally:
            checking.cancel()
        if not answered:
            OUTAGE_VERDICTS.labels(verdict.value).inc()
        return answered, verdict

    async def justify(self) -> bool:
        """At the fence's deadline: True if the API answered or a quorum of peers confirmed
        the outage (the fence is told either way), False if nothing justifies holding any
        more (the watchdog then fences)."""
        answered, verdict = await self.verify()
        if answered:
            return True
        self._decide(verdict, fast=False, silence=None)
        return verdict is OutageVerdict.OUTAGE

    async def _guard(self) -> None:
        tick = self._probe_silence / 4
        reacted = False  # one immediate verification per silence of the writer
        mismatch_handled = False
        while True:
            await asyncio.sleep(tick)
            self._report_outage()
            if self.fence.fenced:
                continue  # RESTORE comes from an API success (a check or a beat)
            silence = self.probes_silent()  # first: a recent vouch does not hide a silence
            if silence is None:
                reacted = False  # a writer's probes arrive, or never came: the deadline decides
            if self.fence.vouched_recently() and silence is None:
                mismatch_handled = False
                continue
            since = self._mismatch_since()
            if since is None:
                mismatch_handled = False
            elif not mismatch_handled and self._clock() - since >= MISMATCH_GRACE:
                mismatch_handled = True
                await self._placement_differs()
                continue
            if silence is None or reacted:
                continue
            reacted = True
            answered, verdict = await self.verify()
            if answered:
                self._holding_on_quorum = False
                continue
            self._decide(verdict, fast=True, silence=silence)

    def _decide(self, verdict: OutageVerdict, fast: bool, silence: float | None) -> None:
        if verdict is OutageVerdict.OUTAGE:
            if not self._holding_on_quorum:
                self._holding_on_quorum = True
                log.warning(
                    "outage.holding",
                    node=self._node,
                    why="the API does not answer and most nodes hear no writing leader: "
                    "nothing can move, so the addresses stay",
                    api_silence=round(self.fence.api_silence(), 3),
                )
            return
        self._holding_on_quorum = False
        if verdict is OutageVerdict.WRITER_HEARD:
            self.fence.unconfirmed()
        if not fast:  # the deadline: the watchdog fences when this returns
            log.warning("outage.unconfirmed", node=self._node, peers=verdict.value)
            return
        if verdict in (OutageVerdict.WRITER_HEARD, OutageVerdict.NO_ANSWER):
            log.warning(
                "liveness.probes_stopped",
                node=self._node,
                silence=None if silence is None else round(silence, 3),
                api_answered=False,
                peers=verdict.value,
            )
            self._on_transition(self.fence.lose())

    async def _placement_differs(self) -> None:
        """The writer's digest has differed from ours for `MISMATCH_GRACE`: relist if the API
        answers, fence if it does not (we cannot learn what moved)."""
        answered = await self.check(min(self._interval, self._probe_silence))
        log.warning("liveness.placement_differs", node=self._node, api_answered=answered)
        if answered:
            self._relist()
        else:
            self._on_transition(self.fence.lose())

    def _report_outage(self) -> None:
        """Tell `on_outage` when a hold through failing API requests begins and ends."""
        holding = self.fence.api_failing and not self.fence.fenced
        reason = self.fence.justification() if holding else None
        if reason is Justification.API:
            reason = None  # the last answer is recent: not an outage yet
        current = self._outage
        if reason is not None and (current is None or current[0] is not reason):
            if current is not None:
                OUTAGE_HOLD.labels(current[0].value).set(0)
            OUTAGE_HOLD.labels(reason.value).set(1)
            started = current[1] if current is not None else self._clock()
            self._outage = (reason, started)
            if self._on_outage is not None:
                self._on_outage(reason, self._clock() - started)
        elif reason is None and current is not None and not self.fence.api_failing:
            OUTAGE_HOLD.labels(current[0].value).set(0)
            self._outage = None
            if self._on_outage is not None:
                self._on_outage(None, self._clock() - current[1])
        elif reason is None and current is not None and self.fence.fenced:
            OUTAGE_HOLD.labels(current[0].value).set(0)
            self._outage = None
