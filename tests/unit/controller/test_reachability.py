"""controller/reachability.py: reads prove the API; probes that stop trigger a check, and a
check that fails then fences at once instead of after the fence timeout."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from eipctl.controller.fencing import FenceWatch
from eipctl.controller.reachability import CONFIRM_VALID, MISMATCH_GRACE, ApiReachability
from eipctl.core.fence import Fence, FenceTransition, Justification
from eipctl.core.outage import OutageVerdict
from eipctl.kube.errors import ApiError, NotFound, ServerError, TransportError, error_for
from eipctl.metrics import REGISTRY
from polling import eventually


class Api:
    """GETs answer, fail, hang or say NotFound as the test sets `mode`."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.gets = 0
        self.options: list[dict[str, Any]] = []

    async def get(self, ref: Any, name: str, **kw: Any) -> dict[str, Any]:
        self.gets += 1
        self.options.append(kw)
        if self.mode == "hang":
            await asyncio.sleep(3600)
        if self.mode == "error":
            raise ServerError(503, "ServiceUnavailable", "")
        if self.mode == "gone":
            raise NotFound(404, "NotFound", "")
        return {"metadata": {"name": name}}


class Bed:
    def __init__(
        self, *, fence_timeout: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.clock = clock
        self.api = Api()
        self.fence = Fence(fence_timeout, clock)
        self.transitions: list[FenceTransition] = []
        self.last_probe: float | None = None
        self.reach = ApiReachability(
            self.api,
            "node-a",
            interval=0.2,
            probe_silence=0.2,
            fence=self.fence,
            on_transition=self._transition,
            last_probe=lambda: self.last_probe,
            clock=clock,
        )

    def _transition(self, t: FenceTransition) -> None:
        if t is not FenceTransition.NONE:
            self.transitions.append(t)

    def probed(self) -> None:
        self.last_probe = self.clock()


@contextlib.asynccontextmanager
async def running(bed: Bed) -> Any:
    task = asyncio.create_task(bed.reach.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def checks(result: str) -> float:
    return REGISTRY.get_sample_value("eipctl_controller_api_checks_total", {"result": result}) or 0


async def test_a_read_or_a_not_found_is_an_answer_an_error_or_a_hang_is_not() -> None:
    bed = Bed()
    ok, errors = checks("ok"), checks("error")
    assert await bed.reach.check(0.5)
    bed.api.mode = "gone"
    assert await bed.reach.check(0.5)
    bed.api.mode = "error"
    assert not await bed.reach.check(0.5)
    bed.api.mode = "hang"
    assert not await bed.reach.check(0.05)
    assert (checks("ok"), checks("error")) == (ok + 2, errors + 2)


async def test_the_check_may_be_answered_from_the_servers_watch_cache() -> None:
    """resourceVersion=0: no etcd quorum read per node per second on a real cluster."""
    bed = Bed()
    assert await bed.reach.check(0.5)
    assert bed.api.options == [{"resource_version": "0"}]


async def test_a_check_restores_a_fenced_node() -> None:
    bed = Bed()
    bed.fence.lose()
    assert await bed.reach.check(0.5)
    assert bed.transitions == [FenceTransition.RESTORE]


def test_reads_every_interval_keep_the_fence_fed(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock (tests/virtual_clock.py): a read every 0.2 s, so the API is never
    silent for longer than that, well inside the 0.5 s fence timeout."""

    async def main() -> None:
        bed = Bed(fence_timeout=0.5, clock=asyncio.get_running_loop().time)
        async with running(bed):
            await asyncio.sleep(1.0)
        assert bed.api.gets >= 5
        assert bed.fence.api_silence() <= 0.2
        assert bed.transitions == []

    run_virtual(main())


def test_probes_stopping_with_the_api_gone_fence_at_once(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """Cut off from both: no waiting for the 30 s fence timeout. On a virtual clock: fenced
    within a probe silence and a check's own timeout of the cut, not 30 s."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        bed = Bed(clock=loop.time)
        bed.probed()
        async with running(bed):
            await asyncio.sleep(0.05)
            bed.api.mode = "hang"
            started = loop.time()
            await eventually(lambda: bed.transitions or None, timeout=5)
            # the probes' silence reaches probe_silence (0.2 s, 0.05 s of it before the hang),
            # the guard sees it at its next tick (probe_silence / 4), the check it then makes
            # times out after min(interval, probe_silence): at most 0.45 s (0.36 s here)
            assert loop.time() - started <= 0.2 + 0.05 + 0.2
        assert bed.transitions == [FenceTransition.FENCE]
        assert bed.fence.fenced

    run_virtual(main())


async def test_probes_stopping_with_the_api_answering_fence_nothing() -> None:
    """The scheduler declared us dead (or none runs): the moves come through our watch."""
    bed = Bed()
    bed.probed()
    async with running(bed):
        await asyncio.sleep(0.8)
    assert bed.reach.probes_silent() is not None
    assert bed.transitions == []
    assert not bed.fence.fenced


async def test_no_probes_ever_is_not_a_silence() -> None:
    """A controller no scheduler probes yet (none started) keeps its addresses."""
    bed = Bed()
    assert bed.reach.probes_silent() is None
    bed.api.mode = "error"
    async with running(bed):
        await asyncio.sleep(0.5)
    assert bed.transitions == []


def test_at_the_deadline_a_hanging_api_fences_after_one_checks_timeout(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock, wired as node.py wires them: the API hangs from the start, the
    watchdog asks `justify` at the fence's deadline (fence_timeout 0.5 s), the check it makes
    gives up after min(interval, probe_silence) = 0.2 s, and with nobody else to ask the
    node fences then: at 0.7 s exactly (tests/unit/controller/test_node.py's fencing story
    runs this on the emulator and bounds only that it happens)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        bed = Bed(fence_timeout=0.5, clock=loop.time)
        bed.api.mode = "hang"
        at: list[float] = []

        def transition(t: FenceTransition) -> None:
            bed.transitions.append(t)
            at.append(loop.time())

        watch = FenceWatch(
            "node-a", fence=bed.fence, on_transition=transition, justify=bed.reach.justify
        )
        watchdog = asyncio.create_task(watch.watchdog())
        try:
            await eventually(lambda: bed.transitions, timeout=5, what="fenced")
            assert at[0] - started == pytest.approx(0.5 + 0.2)
            assert bed.transitions == [FenceTransition.FENCE]
            assert bed.api.gets == 1  # the one check at the deadline
        finally:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)

    run_virtual(main())


@pytest.mark.parametrize("mode", ["error", "hang"])
def test_one_immediate_check_per_silence(
    mode: str, run_virtual: Callable[[Coroutine[Any, Any, None]], None]
) -> None:
    """On a virtual clock: fenced within 0.6 s (the silence at 0.2 s, the check's timeout
    0.2 s), and in those 0.6 s one immediate check beside the regular reads."""

    async def main() -> None:
        bed = Bed(clock=asyncio.get_running_loop().time)
        bed.probed()
        bed.api.mode = mode
        async with running(bed):
            await asyncio.sleep(0.6)
            gets = bed.api.gets
            assert bed.transitions == [FenceTransition.FENCE]
        assert gets == 1 + 3  # the immediate one and the regular ones at 0, 0.2 and 0.4 s

    run_virtual(main())


# -- outages: the peers' verdict, vouches, digests (docs/liveness.md, "Outages") ------------


class FakeClock:
    """The monotonic clock of the fence and the reachability: it moves only when told. The
    loops still sleep on the real loop, so they run; what they see of time is this."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RaisingApi(Api):
    """GETs raise `exc` when the mode is "raise"; `events` says what happened in what order."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.exc: Exception = ApiError(429, "TooManyRequests", "")
        self.events = events
        self.release = asyncio.Event()

    async def get(self, ref: Any, name: str, **kw: Any) -> dict[str, Any]:
        self.events.append("get")
        try:
            if self.mode == "slow":  # answers once the test says so
                await self.release.wait()
            if self.mode == "raise":
                self.gets += 1
                raise self.exc
            return await super().get(ref, name, **kw)
        finally:
            self.events.append("got")


class Peers:
    """``ask_peers``: answers the next of ``verdicts`` (the last one again once they run out)
    and counts the questions."""

    def __init__(self, events: list[str], *verdicts: OutageVerdict) -> None:
        self.verdicts = list(verdicts)
        self.asked = 0
        self.events = events

    async def __call__(self) -> OutageVerdict:
        self.events.append("ask")
        self.asked += 1
        return self.verdicts[min(self.asked, len(self.verdicts)) - 1]


class OutageBed:
    """fence_timeout 1, vouch_window 0.5 on a fake clock at 100: the API's word lasts until
    101 unless renewed; the writer's probes are silent after probe_silence (0.2). Wired as
    node.py wires them: the reachability reports through the `FenceWatch`, whose watchdog
    asks `justify` at the deadline."""

    def __init__(
        self, *verdicts: OutageVerdict, interval: float = 0.2, probe_silence: float = 0.2
    ) -> None:
        self.clock = FakeClock()
        self.events: list[str] = []
        self.api = RaisingApi(self.events)
        self.fence = Fence(1.0, self.clock, vouch_window=0.5)
        self.transitions: list[FenceTransition] = []
        self.last_probe: float | None = None
        self.mismatch: float | None = None
        self.relisted = 0
        self.outages: list[tuple[Justification | None, float]] = []
        self.peers = Peers(self.events, *verdicts) if verdicts else None
        self.watch = FenceWatch("node-a", fence=self.fence, on_transition=self.transitions.append)
        self.reach = ApiReachability(
            self.api,
            "node-a",
            interval=interval,
            probe_silence=probe_silence,
            fence=self.fence,
            on_transition=self.watch.report,
            last_probe=lambda: self.last_probe,
            ask_peers=self.peers,
            mismatch_since=lambda: self.mismatch,
            relist=self._relist,
            on_outage=lambda reason, seconds: self.outages.append((reason, seconds)),
            clock=self.clock,
        )
        self.watch.justify = self.reach.justify

    def _relist(self) -> None:
        self.relisted += 1

    def asked(self) -> int:
        return 0 if self.peers is None else self.peers.asked

    def writer_fell_silent(self) -> None:
        """A writer probed at 100; now it is 100.5: silent, while the API's word holds."""
        self.last_probe = 100.0
        self.clock.now = 100.5


@contextlib.asynccontextmanager
async def serving(bed: OutageBed, *, watchdog: bool = False) -> Any:
    """The reachability's loops (and the fence watchdog) running; cancelled afterwards."""
    tasks = [asyncio.create_task(bed.reach.run())]
    if watchdog:
        tasks.append(asyncio.create_task(bed.watch.watchdog()))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def verdicts(verdict: str) -> float:
    counter = "eipctl_controller_outage_verdicts_total"
    return REGISTRY.get_sample_value(counter, {"verdict": verdict}) or 0.0


async def test_a_silent_writer_and_a_hanging_api_hold_on_a_quorums_outage() -> None:
    bed = OutageBed(OutageVerdict.OUTAGE)
    bed.api.mode = "hang"
    outages = verdicts("outage")
    async with serving(bed, watchdog=True):
        bed.writer_fell_silent()
        await eventually(lambda: verdicts("outage") > outages, what="the verdict counted")
        assert bed.asked() == 1
        assert bed.transitions == []
        assert not bed.fence.fenced
        bed.clock.now = 101.25  # the API's word lapsed; the quorum's lasts until 101.5
        assert bed.fence.justification() is Justification.QUORUM
        assert bed.fence.deadline() == 101.5
        assert bed.fence.check() is FenceTransition.NONE
        await eventually(lambda: bed.outages, what="the hold reported")
        assert bed.outages[0] == (Justification.QUORUM, 0.0)
        await asyncio.sleep(0.2)  # four guard ticks: one question per silence
        assert bed.asked() == 1
        # the quorum's word lapses: the watchdog asks again, and the peers' word is renewed
        bed.clock.now = 101.5
        await eventually(lambda: bed.fence.deadline() == 101.5 + CONFIRM_VALID, what="renewed")
        assert bed.asked() == 2
        await eventually(lambda: verdicts("outage") == outages + 2, what="counted again")
    assert bed.transitions == []
    assert not bed.fence.fenced


@pytest.mark.parametrize("verdict", [OutageVerdict.WRITER_HEARD, OutageVerdict.NO_ANSWER])
async def test_a_silent_writer_and_a_hanging_api_fence_at_once_if_cut_off(
    verdict: OutageVerdict,
) -> None:
    """Somebody hears the writer we do not, or nobody answers us: we are the one cut off."""
    bed = OutageBed(verdict)
    bed.api.mode = "hang"
    counted = verdicts(verdict.value)
    async with serving(bed):
        bed.writer_fell_silent()
        await eventually(lambda: bed.transitions, what="fenced")
        assert bed.clock.now == 100.5  # at once: the API's word had half a second left
        assert bed.fence.justification() is Justification.API
    assert bed.transitions == [FenceTransition.FENCE]
    assert bed.fence.fenced
    assert bed.asked() == 1
    assert verdicts(verdict.value) == counted + 1


@pytest.mark.parametrize(
    ("then", "fenced"),
    [
        (OutageVerdict.UNKNOWN, True),
        (OutageVerdict.WRITER_HEARD, True),
        (OutageVerdict.NO_ANSWER, True),
        (OutageVerdict.OUTAGE, False),
    ],
)
async def test_too_few_answers_leave_it_to_the_deadline_which_asks_again(
    then: OutageVerdict, fenced: bool
) -> None:
    """UNKNOWN (some answered, too few): no fence at once; at the fence's deadline the
    watchdog asks the peers once more and fences unless a quorum says OUTAGE."""
    bed = OutageBed(OutageVerdict.UNKNOWN, then)
    bed.api.mode = "hang"
    unknown = verdicts("unknown")
    async with serving(bed, watchdog=True):
        bed.writer_fell_silent()
        await eventually(lambda: verdicts("unknown") > unknown, what="the first verdict")
        await asyncio.sleep(0.2)  # four guard ticks
        assert bed.transitions == []
        assert not bed.fence.fenced
        assert bed.asked() == 1
        bed.clock.now = 101.0  # the API's word lapses: the deadline
        await eventually(lambda: bed.asked() == 2, what="asked again at the deadline")
        if fenced:
            await eventually(lambda: bed.transitions, what="fenced at the deadline")
            assert bed.transitions == [FenceTransition.FENCE]
        else:
            await eventually(lambda: bed.fence.deadline() > 101.0, what="held on")
            assert bed.fence.justification() is Justification.QUORUM
            assert bed.transitions == []


async def test_a_writer_heard_elsewhere_also_ends_an_earlier_quorums_word() -> None:
    bed = OutageBed(OutageVerdict.WRITER_HEARD)
    bed.fence.confirmed(10.0)
    bed.api.mode = "hang"
    async with serving(bed):
        bed.writer_fell_silent()
        await eventually(lambda: bed.transitions, what="fenced")
    assert bed.transitions == [FenceTransition.FENCE]
    assert bed.fence.deadline() == 101.0  # only the API's word is left


async def test_a_silent_writer_with_the_api_answering_asks_no_peer_and_fences_nothing() -> None:
    """A leader hand-over with the API up: the moves come through our watch, and no node
    queries every other."""
    bed = OutageBed(OutageVerdict.WRITER_HEARD, interval=30.0)  # one periodic read, at start
    bed.api.mode = "raise"  # a 429: the server answers, busy
    async with serving(bed):
        await eventually(lambda: bed.api.gets == 1, what="the periodic read")
        bed.writer_fell_silent()
        await eventually(lambda: bed.api.gets == 2, what="the guard's read")
        await asyncio.sleep(0.2)  # four guard ticks
        assert bed.transitions == []
        assert not bed.fence.fenced
        assert bed.fence.api_silence() == 0.0  # the 429 counted as the API's answer
    assert bed.asked() == 0


async def test_the_periodic_check_reads_nothing_while_the_writer_vouches() -> None:
    bed = OutageBed(interval=0.02)
    bed.fence.vouched()  # until 100.5 on the fake clock
    async with serving(bed):
        await asyncio.sleep(0.3)  # 15 intervals
        assert bed.api.gets == 0
        bed.clock.now = 100.5  # the vouch lapsed
        await eventually(lambda: bed.api.gets >= 2, what="reads again")
        assert bed.fence.api_silence() == 0.0
    assert bed.transitions == []


async def test_while_its_requests_fail_a_vouched_node_reads_on_to_see_the_api_return() -> None:
    """Vouched for and cut off from the API: the reads go on, so the first one that succeeds
    ends the hold (`on_outage`, the ApiReturned Event) within an interval."""
    bed = OutageBed(interval=0.02)
    bed.fence.vouched()
    bed.fence.failed()  # its last request (a heartbeat, say) failed
    async with serving(bed):
        await eventually(lambda: bed.api.gets >= 1, what="a read while failing")
        assert not bed.fence.api_failing  # the fake API answers: the outage is over
        before = bed.api.gets
        await asyncio.sleep(0.3)
        assert bed.api.gets == before  # vouched and not failing: no reads again
    assert bed.transitions == []


@pytest.mark.parametrize(
    "exc",
    [
        ApiError(429),
        ApiError(429, "TooManyRequests", "rate limited"),
        ServerError(429, "TooManyRequests", ""),  # what error_for makes of a 429
        error_for(429),
        ApiError(403, "Forbidden", ""),
    ],
    ids=repr,
)
async def test_an_http_answer_below_500_is_the_api_answering(exc: Exception) -> None:
    bed = OutageBed()
    bed.api.mode, bed.api.exc = "raise", exc
    bed.fence.lose()
    bed.fence.failed()
    bed.clock.now = 100.75
    assert await bed.reach.check(0.5)
    assert bed.transitions == [FenceTransition.RESTORE]
    assert not bed.fence.api_failing
    assert bed.fence.deadline() == 101.75


@pytest.mark.parametrize(
    "exc",
    [
        ApiError(503),
        ServerError(503, "ServiceUnavailable", ""),
        ApiError(504, "Timeout", ""),
        TransportError("connection refused"),
        OSError("no route"),
    ],
    ids=repr,
)
async def test_a_5xx_or_no_http_answer_is_not_the_api_answering(exc: Exception) -> None:
    bed = OutageBed()
    bed.api.mode, bed.api.exc = "raise", exc
    bed.clock.now = 100.75
    assert not await bed.reach.check(0.5)
    assert bed.fence.api_failing
    assert bed.fence.deadline() == 101.0
    assert bed.transitions == []


async def test_verify_asks_no_peer_when_the_api_answers_a_429() -> None:
    bed = OutageBed(OutageVerdict.WRITER_HEARD)
    bed.api.mode = "raise"
    assert await bed.reach.verify() == (True, OutageVerdict.UNKNOWN)
    assert bed.asked() == 0
    assert bed.transitions == []


async def test_verify_asks_the_peers_after_a_503() -> None:
    bed = OutageBed(OutageVerdict.WRITER_HEARD)
    bed.api.mode, bed.api.exc = "raise", ApiError(503)
    counted = verdicts("writer_heard")
    assert await bed.reach.verify() == (False, OutageVerdict.WRITER_HEARD)
    assert bed.events == ["get", "got", "ask"]
    assert verdicts("writer_heard") == counted + 1
    assert bed.transitions == []  # verify decides nothing; the guard does


async def test_a_hanging_check_gets_the_peers_asked_and_a_quorums_word_taken_at_once() -> None:
    """The quorum's "no writer" extends the fence as soon as it is in, while the check may
    still hang; the verdict is counted once the check gave up."""
    bed = OutageBed(OutageVerdict.OUTAGE)
    bed.api.mode = "hang"
    bed.clock.now = 100.5
    outages = verdicts("outage")
    verifying = asyncio.create_task(bed.reach.verify())
    await eventually(lambda: bed.fence.deadline() == 100.5 + CONFIRM_VALID, what="confirmed")
    assert bed.events[0] == "get"  # the API is asked first
    async with asyncio.timeout(5):
        assert await verifying == (False, OutageVerdict.OUTAGE)
    assert sorted(bed.events) == ["ask", "get", "got"]  # the hanging GET ended, once
    assert bed.fence.api_failing
    assert verdicts("outage") == outages + 1


async def test_a_slow_api_gets_the_peers_asked_beside_it_and_its_answer_still_counts() -> None:
    """The check runs alone for HEDGE only; an answer after that is an answer all the same,
    and the peers' verdict is not counted as an outage verdict then."""
    bed = OutageBed(OutageVerdict.WRITER_HEARD, interval=30.0, probe_silence=30.0)
    bed.api.mode = "slow"
    counted = verdicts("writer_heard")
    verifying = asyncio.create_task(bed.reach.verify())
    await eventually(bed.asked, what="the peers asked beside the slow check")
    assert not verifying.done()
    bed.api.release.set()
    async with asyncio.timeout(5):
        answered, _ = await verifying
    assert answered
    assert bed.events == ["get", "ask", "got"]
    assert bed.fence.api_silence() == 0.0
    assert verdicts("writer_heard") == counted
    assert bed.transitions == []


def api_down(bed: OutageBed) -> OutageBed:
    """GETs fail at once with a 503 (no server behind the load balancer)."""
    bed.api.mode, bed.api.exc = "raise", ApiError(503, "ServiceUnavailable", "")
    return bed


async def test_justify_on_an_outage_extends_the_fence_and_says_so() -> None:
    bed = api_down(OutageBed(OutageVerdict.OUTAGE))
    bed.clock.now = 101.0  # the deadline: the API's word just lapsed
    outages = verdicts("outage")
    assert await bed.reach.justify()
    assert bed.fence.justification() is Justification.QUORUM
    assert bed.fence.deadline() == 101.0 + CONFIRM_VALID
    assert bed.fence.check() is FenceTransition.NONE
    assert bed.transitions == []
    assert verdicts("outage") == outages + 1
    bed.clock.now += CONFIRM_VALID  # asked again when the word lapses
    assert await bed.reach.justify()
    assert bed.fence.deadline() == 102.0 + CONFIRM_VALID
    assert bed.asked() == 2


async def test_justify_when_the_api_answers_is_true_without_asking_the_peers() -> None:
    bed = OutageBed(OutageVerdict.WRITER_HEARD)
    bed.clock.now = 101.0
    assert await bed.reach.justify()
    assert bed.fence.justification() is Justification.API
    assert bed.fence.deadline() == 102.0
    assert bed.asked() == 0
    # every reason had lapsed when the API answered: a restore, so the claims are relisted
    # before a pass acts on what was cached meanwhile (a thawed controller)
    assert bed.transitions == [FenceTransition.RESTORE]


@pytest.mark.parametrize("verdict", [OutageVerdict.UNKNOWN, OutageVerdict.NO_ANSWER])
async def test_justify_without_a_quorum_is_false_and_extends_nothing(
    verdict: OutageVerdict,
) -> None:
    bed = api_down(OutageBed(verdict))
    bed.clock.now = 101.0
    counted = verdicts(verdict.value)
    assert not await bed.reach.justify()
    assert bed.fence.deadline() == 101.0
    assert bed.fence.justification() is None
    assert bed.transitions == []  # the watchdog's check() fences
    assert verdicts(verdict.value) == counted + 1


async def test_justify_when_a_peer_hears_a_writer_is_false_and_ends_the_quorums_word() -> None:
    bed = api_down(OutageBed(OutageVerdict.WRITER_HEARD))
    bed.clock.now = 100.75
    bed.fence.confirmed(0.5)  # an earlier quorum's word, until 101.25
    bed.clock.now = 101.0  # the API's word lapsed
    assert not await bed.reach.justify()
    assert bed.fence.deadline() == 101.0  # the earlier word ended
    assert bed.fence.justification() is None
    assert bed.transitions == []  # the watchdog fences
    assert bed.fence.check() is FenceTransition.FENCE


async def test_justify_with_nobody_to_ask_is_false() -> None:
    bed = api_down(OutageBed())
    bed.clock.now = 101.0
    assert not await bed.reach.justify()
    assert bed.fence.deadline() == 101.0


async def test_a_digest_mismatch_past_the_grace_with_the_api_hanging_fences() -> None:
    bed = OutageBed()
    bed.api.mode = "hang"
    bed.mismatch = bed.clock.now - MISMATCH_GRACE
    async with serving(bed):
        await eventually(lambda: bed.transitions, what="fenced")
        assert bed.fence.justification() is Justification.API  # fenced before the deadline
    assert bed.transitions == [FenceTransition.FENCE]
    assert bed.relisted == 0


async def test_a_digest_mismatch_past_the_grace_with_the_api_answering_relists_once() -> None:
    bed = OutageBed()
    bed.mismatch = bed.clock.now  # a watch event in flight, maybe
    async with serving(bed):
        await asyncio.sleep(0.3)  # six guard ticks within the grace: nothing
        assert bed.relisted == 0
        bed.clock.now += MISMATCH_GRACE
        await eventually(lambda: bed.relisted, what="relisted")
        await asyncio.sleep(0.3)
        assert bed.relisted == 1  # once per mismatch
        bed.mismatch = None  # the digests agree again...
        await asyncio.sleep(0.1)
        bed.mismatch = bed.clock.now - MISMATCH_GRACE  # ...and differ again, long enough
        await eventually(lambda: bed.relisted == 2, what="relisted again")
    # the fake clock's jump past the API's deadline may count as a restore; never a fence
    assert FenceTransition.FENCE not in bed.transitions
    assert not bed.fence.fenced
