"""LeaderElector in detail: the Lease it writes, how it reads other holders' Leases, the
exact timing of waiting one out, renewing, losing and stopping.

Every story runs on a virtual clock: `VirtualLoop` (tests/virtual_clock.py) is an event loop whose time only moves
when nothing is ready to run, straight to the next timer. Sleeps, `asyncio.wait` timeouts,
`asyncio.timeout` budgets and the renew watchdog all run on it, and the elector is handed
the loop's clock, so the tests assert exact instants without real waits or flakiness.
The API is `LeaseStore`: one Lease in memory that records every request (verb, virtual
time, body, namespace) and can fail or hang a request on demand.
"""

from __future__ import annotations

import asyncio
import copy
import os
import re
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

from eipctl.kube.client import LEASES, Obj, ResourceRef
from eipctl.kube.errors import AlreadyExists, ApiError, Conflict, NotFound, ServerError
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector
from polling import eventually
from virtual_clock import run_virtual

LEASE = "eipctl-test"
NAMESPACE = "team-a"
ME = "me"
START = 1000.0
"""The virtual clock's reading when a story starts."""
OLD = "2024-01-01T00:00:00.000000Z"
MICRO_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
HANG = "hang"


def run_story(story: Callable[[], Coroutine[Any, Any, None]], limit: float = 60.0) -> None:
    """Run `story` on a virtual clock; it fails if it takes more than `limit` virtual s."""

    async def bounded() -> None:
        async with asyncio.timeout(limit):
            await story()

    run_virtual(bounded(), start=START)


def now() -> float:
    """Virtual seconds since the story started."""
    return asyncio.get_running_loop().time() - START


# --- the API --------------------------------------------------------------------------
@dataclass
class Request:
    verb: str
    at: float  # virtual seconds since the start
    body: Obj | None = None
    namespace: str | None = None


class LeaseStore:
    """The elector's LeaseApi: one Lease (name LEASE in NAMESPACE), requests recorded.

    `faults[verb]` holds what the next requests of that verb do instead of answering: an
    ApiError raised, or HANG (never answered). `before[verb]` runs first on each request
    (another writer acting at that moment). Writes check resourceVersion like the server.
    """

    def __init__(self, spec: Obj | None = None) -> None:
        self.lease: Obj | None = None
        self.rv = 0
        self.requests: list[Request] = []
        self.faults: dict[str, list[ApiError | str]] = {"get": [], "create": [], "replace": []}
        self.before: dict[str, Callable[[], None]] = {}
        self.latency: dict[str, float] = {}  # virtual s a request of that verb takes
        if spec is not None:
            self.put(spec)

    def put(self, spec: Obj) -> None:
        """Another writer (or the test's setup) stores this spec."""
        self.rv += 1
        self.lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": LEASE, "namespace": NAMESPACE, "resourceVersion": str(self.rv)},
            "spec": copy.deepcopy(spec),
        }

    def change(self, **fields: Any) -> None:
        assert self.lease is not None
        self.put({**self.lease["spec"], **fields})

    @property
    def spec(self) -> Obj:
        assert self.lease is not None
        return self.lease["spec"]

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.verb in ("create", "replace")]

    def at(self, verb: str) -> list[float]:
        return [r.at for r in self.requests if r.verb == verb]

    async def _enter(self, verb: str, ref: ResourceRef, body: Obj | None, ns: str | None) -> None:
        assert ref is LEASES
        self.requests.append(Request(verb, now(), copy.deepcopy(body), ns))
        await asyncio.sleep(self.latency.get(verb, 0))
        if verb in self.before:
            self.before[verb]()
        if self.faults[verb]:
            fault = self.faults[verb].pop(0)
            if fault == HANG:
                await asyncio.Event().wait()
            assert isinstance(fault, ApiError)
            raise fault

    async def get(
        self, ref: ResourceRef, name: str, namespace: str | None = None, *, status: bool = False
    ) -> Obj:
        await self._enter("get", ref, None, namespace)
        if self.lease is None or (name, namespace) != (LEASE, NAMESPACE):
            raise NotFound(404, "NotFound", name)
        return copy.deepcopy(self.lease)

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        await self._enter("create", ref, obj, namespace)
        if self.lease is not None:
            raise AlreadyExists(409, "AlreadyExists", LEASE)
        assert (obj["metadata"]["name"], namespace) == (LEASE, NAMESPACE), "created elsewhere"
        self.put(obj["spec"])
        assert self.lease is not None
        self.lease.update({k: obj[k] for k in ("apiVersion", "kind") if k in obj})
        return copy.deepcopy(self.lease)

    async def replace(self, ref: ResourceRef, obj: Obj, *, status: bool = False) -> Obj:
        await self._enter("replace", ref, obj, None)
        if self.lease is None:
            raise NotFound(404, "NotFound", LEASE)
        if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", LEASE)
        self.put(obj["spec"])
        return copy.deepcopy(self.lease)


def config(
    retry: float = 0.25, renew: float = 0.5, lease: float = 1.0, **kw: Any
) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        LEASE, NAMESPACE, ME, lease_duration=lease, renew_deadline=renew, retry_period=retry, **kw
    )


def elector(store: LeaseStore, cfg: LeaderElectionConfig | None = None, **kw: Any) -> LeaderElector:
    return LeaderElector(store, cfg or config(), clock=asyncio.get_running_loop().time, **kw)


def held_by(holder: str, duration: int | None = 1, **more: Any) -> Obj:
    spec: Obj = {"holderIdentity": holder, "acquireTime": OLD, "renewTime": OLD, **more}
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return spec


class Work:
    """What the elector runs while leading: records each term, runs `length` s or forever,
    and sees `is_leader` when it is cancelled."""

    def __init__(self, el: LeaderElector | None = None, length: float | None = None) -> None:
        self.el = el
        self.length = length
        self.slow_stop = 0.0  # virtual s it takes to stop once cancelled
        self.terms: list[list[float]] = []  # [from, until]; until is inf while running
        self.leader_when_cancelled: list[Any] = []
        self.started = asyncio.Event()

    async def __call__(self) -> None:
        term = [now(), float("inf")]
        self.terms.append(term)
        self.started.set()
        try:
            if self.length is None:
                await asyncio.Event().wait()
            else:
                await asyncio.sleep(self.length)
        except asyncio.CancelledError:
            self.leader_when_cancelled.append(self.el.is_leader if self.el else None)
            if self.slow_stop:
                await asyncio.sleep(self.slow_stop)
            raise
        finally:
            term[1] = now()


async def until(check: Callable[[], Any], step: float = 0.01) -> None:
    """Poll ``check`` on the virtual clock; fails saying so after 30 virtual s."""
    await eventually(check, timeout=30.0, step=step)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


# --- configuration ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("retry", "renew", "lease"),
    [(0, 0.5, 1), (-0.1, 0.5, 1), (0.5, 0.5, 1), (0.6, 0.5, 1), (0.2, 1, 1), (0.2, 1.2, 1)],
)
def test_config_needs_0_below_retry_below_renew_below_lease(
    retry: float, renew: float, lease: float
) -> None:
    """Each of the three strict inequalities is checked, and the message names them."""
    with pytest.raises(
        ValueError, match=r"^need 0 < retry_period < renew_deadline < lease_duration$"
    ):
        config(retry, renew, lease)


def test_config_accepts_any_strictly_increasing_timings() -> None:
    cfg = config(0.001, 0.002, 0.003)
    assert (cfg.retry_period, cfg.renew_deadline, cfg.lease_duration) == (0.001, 0.002, 0.003)


# --- the Lease written --------------------------------------------------------------------
def test_a_missing_lease_is_created_whole_in_the_configured_namespace() -> None:
    """A complete coordination.k8s.io/v1 Lease, created in NAMESPACE (the request's
    namespace and the body's), duration rounded up to whole seconds, no transition yet."""
    store = LeaseStore()

    async def story() -> None:
        await elector(store, config(lease=1.5)).run(Work(length=0))

    run_story(story)
    get, create = store.requests[:2]
    assert (get.verb, get.namespace) == ("get", NAMESPACE)
    assert (create.verb, create.namespace) == ("create", NAMESPACE)
    assert create.body is not None
    written = create.body["spec"]["renewTime"]
    assert MICRO_UTC.fullmatch(written)
    assert create.body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": NAMESPACE},
        "spec": {
            "holderIdentity": ME,
            "leaseDurationSeconds": 2,
            "acquireTime": written,
            "renewTime": written,
            "leaseTransitions": 0,
        },
    }


@pytest.mark.parametrize(("before", "after"), [(3, 4), (None, 1)])
def test_taking_over_counts_a_transition_and_keeps_the_rest_of_the_spec(
    before: int | None, after: int
) -> None:
    """A takeover writes our identity and duration, acquireTime = renewTime = now, and
    leaseTransitions + 1 (from 0 when absent); fields it does not own are kept."""
    more = {} if before is None else {"leaseTransitions": before}
    store = LeaseStore(held_by("old", 1, preferredHolder="x", **more))

    async def story() -> None:
        await elector(store, config(lease=2.5)).run(Work(length=0))

    run_story(story)
    takeover = store.writes()[0]
    assert takeover.verb == "replace" and takeover.body is not None
    spec = takeover.body["spec"]
    assert MICRO_UTC.fullmatch(spec["renewTime"])
    assert spec == {
        "holderIdentity": ME,
        "leaseDurationSeconds": 3,
        "acquireTime": spec["renewTime"],
        "renewTime": spec["renewTime"],
        "leaseTransitions": after,
        "preferredHolder": "x",
    }


def test_renewing_refreshes_renew_time_and_duration_only() -> None:
    """Renewing a Lease that already names us (here: from before a restart) writes a new
    renewTime and our own duration; acquireTime and leaseTransitions stay."""
    store = LeaseStore(held_by(ME, 7, leaseTransitions=2))

    async def story() -> None:
        await elector(store).run(Work(length=0.6))

    run_story(story)
    renewals = [w.body["spec"] for w in store.writes() if w.body is not None][:-1]  # - release
    assert len(renewals) == 3  # at once, then two retry periods into the 0.6 s of work
    for spec in renewals:
        assert MICRO_UTC.fullmatch(spec["renewTime"]) and spec["renewTime"] != OLD
        assert spec == {
            "holderIdentity": ME,
            "leaseDurationSeconds": 1,
            "acquireTime": OLD,
            "renewTime": spec["renewTime"],
            "leaseTransitions": 2,
        }
    assert renewals[0]["renewTime"] <= renewals[1]["renewTime"] <= renewals[2]["renewTime"]


@pytest.fixture
def zone_east_of_utc() -> Iterator[None]:
    """The host's local time zone is UTC+05:30 (a POSIX TZ string: no tz database needed)."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "EIP-05:30"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


@pytest.mark.usefixtures("zone_east_of_utc")
def test_times_are_written_in_utc_whatever_the_hosts_zone() -> None:
    store = LeaseStore()

    async def story() -> None:
        await elector(store).run(Work(length=0))

    run_story(story)
    spec = store.writes()[0].body["spec"]  # type: ignore[index]
    for field in ("acquireTime", "renewTime"):
        written = datetime.strptime(spec[field], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        assert abs(datetime.now(UTC) - written) < timedelta(minutes=1), (field, spec[field])


# --- stopping and releasing ---------------------------------------------------------------
def test_stopping_releases_by_clearing_only_the_holder() -> None:
    store = LeaseStore()

    async def story() -> None:
        el = elector(store)
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        held = copy.deepcopy(store.spec)
        with structlog.testing.capture_logs() as logs:
            await stop(task)
        assert el.is_leader is False
        assert store.spec == {**held, "holderIdentity": ""}
        assert work.terms[0][1] <= store.requests[-1].at  # work stopped before the release
        assert [e["event"] for e in logs] == ["leader.released"]

    run_story(story)


def test_a_failed_release_is_logged_and_the_stop_completes() -> None:
    store = LeaseStore()

    async def story() -> None:
        el = elector(store)
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        store.faults["replace"] = [ServerError(503, "ServiceUnavailable", "busy")]
        with structlog.testing.capture_logs() as logs:
            await stop(task)
        assert task.cancelled()
        assert store.spec["holderIdentity"] == ME  # the Lease expires instead
        failed = events(logs, "leader.release_failed")
        assert len(failed) == 1 and "503" in failed[0]["error"]

    run_story(story)


@pytest.mark.parametrize(("retry", "bound"), [(0.1, 1.0), (1.5, 1.5)])
def test_a_hanging_release_is_abandoned_after_one_second_or_one_retry_period(
    retry: float, bound: float
) -> None:
    store = LeaseStore()

    async def story() -> None:
        el = elector(store, config(retry, retry * 2, retry * 4))
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        store.faults["replace"] = [HANG]
        stopped = now()
        await stop(task)
        assert now() - stopped == pytest.approx(bound)

    run_story(story)


def test_work_that_returns_ends_the_run_and_releases() -> None:
    """`run` returns when the work returns by itself: no second term, Lease released."""
    store = LeaseStore()
    work = Work(length=1.0)

    async def story() -> None:
        el = elector(store)
        await el.run(work)
        assert el.is_leader is False

    run_story(story)
    assert len(work.terms) == 1 and work.terms[0] == pytest.approx([0.0, 1.0])
    assert store.spec["holderIdentity"] == ""


# --- waiting out another holder -----------------------------------------------------------
@pytest.mark.parametrize(
    ("retry", "gets"),
    [(0.3, [0, 0.3, 0.6, 0.9, 1.002]), (0.25, [0, 0.25, 0.5, 0.75, 1.0])],
)
def test_takes_over_as_the_holders_lease_expires_not_a_retry_period_later(
    retry: float, gets: list[float]
) -> None:
    """An unchanged record expires exactly leaseDurationSeconds after it was first seen:
    the candidate wakes 2 ms after that instant (never before it) when the expiry falls
    between two polls, and takes over at it when a poll lands on it exactly."""
    store = LeaseStore(held_by("old", 1))

    async def story() -> None:
        await elector(store, config(retry, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    assert store.at("get") == pytest.approx(gets)
    assert store.writes()[0].at == pytest.approx(gets[-1])


@pytest.mark.parametrize(("declared", "expires"), [(3, 3.0), (None, 1.0)])
def test_the_holders_declared_duration_is_waited_out_not_ours(
    declared: int | None, expires: float
) -> None:
    """leaseDurationSeconds of the Lease read decides; our own only when it declares none."""
    store = LeaseStore(held_by("old", declared))

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    assert store.writes()[0].at == pytest.approx(expires)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("holderIdentity", "other"),
        ("renewTime", "2024-01-01T00:00:01.000000Z"),
        ("acquireTime", "2024-01-01T00:00:01.000000Z"),
        ("leaseDurationSeconds", 1),
    ],
)
def test_any_change_of_the_record_restarts_the_wait(field: str, value: Any) -> None:
    """Holder, renewTime, acquireTime and leaseDurationSeconds make the record: a change of
    any of them, seen at 1.0 s, means the Lease lives (new duration) s from then."""
    store = LeaseStore(held_by("old", 2))

    def changes_at_one_second() -> None:
        if now() == 1.0:
            store.change(**{field: value})

    store.before["get"] = changes_at_one_second

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    expires = 1.0 + (value if field == "leaseDurationSeconds" else 2)
    assert store.writes()[0].at == pytest.approx(expires)


def test_a_holder_that_keeps_renewing_is_never_taken_over() -> None:
    store = LeaseStore(held_by("old", 1))
    renewals = iter(range(1, 20))

    def renews_every_half_second() -> None:
        if now() % 0.5 == 0 and now() <= 5.0:
            store.change(renewTime=f"2024-01-01T00:00:{next(renewals):02d}.000000Z")

    store.before["get"] = renews_every_half_second

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    assert store.writes()[0].at == pytest.approx(6.0)  # last renewal seen at 5.0, + 1 s


@pytest.mark.parametrize("holder", ["", ME])
def test_failed_writes_to_a_lease_naming_no_other_holder_are_retried_each_period(
    holder: str,
) -> None:
    """Only another holder's expiry shortens the wait: a free Lease, or one naming us
    (a restart), whose writes fail is retried a full retry period after each failure."""
    store = LeaseStore(held_by(holder, 1))
    store.faults["replace"] = [ServerError(503, "ServiceUnavailable", "busy")] * 5

    store.latency["replace"] = 0.1  # each write takes 0.1 s to fail

    async def story() -> None:
        with structlog.testing.capture_logs() as logs:
            await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))
        failed = events(logs, "lease.attempt_failed")
        assert len(failed) == 5 and all("503" in e["error"] for e in failed)

    run_story(story)
    assert store.at("get") == pytest.approx([0, 0.35, 0.7, 1.05, 1.4, 1.75])
    assert store.writes()[-2].at == pytest.approx(1.75)  # the takeover; then the release


def test_a_takeover_that_fails_at_expiry_is_retried_a_retry_period_later() -> None:
    store = LeaseStore(held_by("old", 1))
    store.faults["replace"] = [ServerError(503, "ServiceUnavailable", "busy")]

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    assert store.at("replace")[:2] == pytest.approx([1.0, 1.25])


def test_a_takeover_that_loses_the_race_waits_out_the_new_record() -> None:
    """The holder renews just before our takeover lands: Conflict; we read the new record
    and wait its full duration again (from when we saw it)."""
    store = LeaseStore(held_by("old", 1))

    def holder_renews_first() -> None:
        if store.spec["holderIdentity"] == "old" and store.spec["renewTime"] == OLD:
            store.change(renewTime="2024-01-01T00:00:01.000000Z")

    store.before["replace"] = holder_renews_first

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(Work(length=0))

    run_story(story)
    assert store.at("replace")[:2] == pytest.approx([1.0, 2.25])


# --- who leads ----------------------------------------------------------------------------
def test_a_new_elector_is_not_leader_and_knows_no_leader() -> None:
    async def story() -> None:
        el = elector(LeaseStore())
        assert el.is_leader is False
        assert el.leader_identity == ""

    run_story(story)


def test_on_new_leader_hears_each_change_of_holder_once() -> None:
    """Renewals are no news; a release is (holder ""); a free Lease seen first is not."""
    store = LeaseStore(held_by("old", 1))
    heard: list[str] = []
    renewals = iter(range(1, 20))

    def old_renews_then_releases() -> None:
        if now() < 1.0:
            store.change(renewTime=f"2024-01-01T00:00:{next(renewals):02d}.000000Z")
        elif now() == 1.0:
            store.change(holderIdentity="")

    store.before["get"] = old_renews_then_releases

    async def story() -> None:
        el = elector(store, on_new_leader=heard.append)
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        assert el.leader_identity == ME
        await asyncio.sleep(1.0)  # renewing
        await stop(task)

    run_story(story)
    assert heard == ["old", "", ME]


def test_a_free_lease_seen_first_is_no_news() -> None:
    store = LeaseStore(held_by("", 1))
    heard: list[str] = []

    async def story() -> None:
        await elector(store, on_new_leader=heard.append).run(Work(length=0))

    run_story(story)
    assert heard == [ME]


def test_the_log_tells_who_was_seen_and_when_we_lead() -> None:
    store = LeaseStore(held_by("old", 1))

    async def story() -> None:
        with structlog.testing.capture_logs() as logs:
            await elector(store).run(Work(length=0))
        got = [(e["event"], e.get("holder")) for e in logs]
        assert got == [
            ("leader.observed", "old"),
            ("leader.observed", ME),
            ("leader.acquired", None),
            ("leader.released", None),
        ]
        assert all((e["lease"], e["identity"]) == (LEASE, ME) for e in logs)

    run_story(story)


# --- leading, losing ----------------------------------------------------------------------
def test_a_leader_renews_each_retry_period_from_its_own_copy() -> None:
    """While leading, each renewal is one write of the last copy (no read), and the work
    runs through many renew deadlines."""
    store = LeaseStore()
    work = Work(length=2.9)

    async def story() -> None:
        await elector(store, config(0.25, 0.5, 1.0)).run(work)

    run_story(story)
    assert work.terms == [pytest.approx([0.0, 2.9])]
    assert store.at("get") == [0.0]
    renewals = store.at("replace")[:-1]  # then the release
    assert renewals == pytest.approx([0.25 * i for i in range(1, 12)])


@pytest.mark.parametrize(
    "failure",
    [ServerError(503, "ServiceUnavailable", "busy"), Conflict(409, "Conflict", "stale")],
)
def test_a_failed_renewal_is_retried_with_a_fresh_read(failure: ApiError) -> None:
    store = LeaseStore()
    work = Work(length=2.0)

    async def story() -> None:
        el = elector(store, config(0.25, 0.9, 1.5))
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        store.faults["replace"] = [failure]
        await task

    run_story(story)
    assert work.terms == [[0.0, 2.0]]  # never stopped
    verbs = [(r.verb, r.at) for r in store.requests[:5]]
    assert verbs == [("get", 0), ("create", 0), ("replace", 0.25), ("get", 0.5), ("replace", 0.5)]


@pytest.mark.parametrize("slow_stop", [0.0, 0.4])
def test_a_leader_that_cannot_renew_stops_at_the_renew_deadline_and_contends_again(
    slow_stop: float,
) -> None:
    """Renewals fail: the work is cancelled exactly renew_deadline after the last write was
    sent, `is_leader` already False when it is; then the elector contends again and, once
    the API answers, leads again (also when the work is slow to stop)."""
    store = LeaseStore()
    store.faults["replace"] = [ServerError(503, "ServiceUnavailable", "busy")] * 3

    async def story() -> None:
        el = elector(store, config(0.25, 0.9, 1.5))
        work = Work(el)
        work.slow_stop = slow_stop
        leader_while_contending: list[Any] = []
        store.before["get"] = lambda: leader_while_contending.append((now(), el.is_leader))
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(el.run(work))
            await until(lambda: len(work.terms) == 2)
        assert work.terms[0][0] == 0.0
        assert work.leader_when_cancelled == [False]
        assert [e["event"] for e in logs if e["event"] != "lease.attempt_failed"] == [
            "leader.observed",
            "leader.acquired",
            "leader.renew_deadline_passed",
            "leader.lost",
            "leader.acquired",
        ]
        assert el.is_leader is True
        await stop(task)
        after_loss = [lead for at, lead in leader_while_contending if at >= work.terms[0][1]]
        assert after_loss and all(lead is False for lead in after_loss)
        if not slow_stop:
            assert work.terms[0][1] == pytest.approx(0.9)

    run_story(story)


def test_a_hanging_renewal_is_given_up_at_the_renew_deadline() -> None:
    """A renewal never answered is abandoned when the renew deadline passes (its budget is
    what is left of it), so the elector contends again at once."""
    store = LeaseStore()

    async def story() -> None:
        el = elector(store, config(0.25, 0.9, 1.5))
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        store.faults["replace"] = [HANG]
        await until(lambda: len(work.terms) == 2)
        assert work.terms[0][1] == pytest.approx(0.9)
        assert work.terms[1][0] == pytest.approx(0.9)
        assert store.at("get") == pytest.approx([0.0, 0.9])
        await stop(task)

    run_story(story)


def test_a_leader_that_reads_another_holder_stops_at_once() -> None:
    """Someone else overwrote the Lease: the next renewal gets Conflict, the one after reads
    the new holder and stops the work then, long before the renew deadline; a stop
    afterwards does not release a Lease that is not ours."""
    store = LeaseStore()

    def overwritten_at_1_1() -> None:
        store.change(holderIdentity="other", renewTime="2024-01-01T00:00:01.000000Z")

    async def story() -> None:
        el = elector(store, config(0.25, 5.0, 10.0))
        work = Work(el)
        task = asyncio.create_task(el.run(work))
        await work.started.wait()
        loop = asyncio.get_running_loop()
        loop.call_later(1.1, overwritten_at_1_1)
        await until(lambda: work.terms[0][1] != float("inf"))
        assert work.terms[0][1] == pytest.approx(1.5)
        assert work.leader_when_cancelled == [False]
        assert el.leader_identity == "other"
        await asyncio.sleep(1.0)
        await stop(task)
        assert store.spec["holderIdentity"] == "other"
        assert store.writes()[-1].at == pytest.approx(1.25)  # the Conflict; no release

    run_story(story)
