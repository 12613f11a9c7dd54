"""Story: replicas of one process race for a Lease on the emulator, over and over.

At no instant may two of them act (their acting windows, timed on one monotonic clock,
never overlap); a leader that dies without releasing is replaced within lease duration +
retry period, and one that stops cleanly within one retry period. A leader whose renewal
was stored at once but answered late, and who is then cut off, stops before the standby may
take over (the renew deadline counts from the send).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from eipctl.kube.client import LEASES, KubeApi, connect
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector
from eipctl.runtime.config import LeaderSettings
from kubemu import ApiServer

SLACK = 0.25  # HTTP round trips and scheduling on a loaded CI box


class Replica:
    def __init__(
        self,
        api: KubeApi,
        ident: str,
        windows: list[list[Any]],
        settings: LeaderSettings | None = None,
    ) -> None:
        self.ident = ident
        self.windows = windows
        self.acting = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.api = api
        self.settings = settings
        """The processes' election settings; None: the library's own defaults."""

    def start(self) -> None:
        if self.settings is None:
            cfg = LeaderElectionConfig("eipctl-scheduler", "kube-system", self.ident)
        else:
            mine = replace(self.settings, identity=self.ident, lease_namespace="kube-system")
            cfg = mine.election("eipctl-scheduler")
        # the elector's clock is time.monotonic, the clock the acting windows are timed on
        self.elector = LeaderElector(self.api, cfg, clock=time.monotonic)
        self.acting.clear()
        self.task = asyncio.create_task(self.elector.run(self.work))

    async def work(self) -> None:
        window: list[Any] = [time.monotonic(), float("inf"), self.ident]
        self.windows.append(window)
        self.acting.set()
        try:
            await asyncio.Event().wait()
        finally:
            window[1] = time.monotonic()
            self.acting.clear()

    async def stop(self, release: bool = True) -> None:
        """Cancel the replica; release=False is a crash (the Lease is left to expire)."""
        assert self.task is not None
        self.elector.config.release_on_stop = release
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def assert_never_two(windows: list[list[Any]]) -> None:
    spans = sorted(windows)
    for a, b in itertools.pairwise(spans):
        assert a[1] <= b[0], f"{a[2]} acted until {a[1]:.3f}, {b[2]} from {b[0]:.3f}"


async def test_replicas_race_for_a_lease_and_never_act_together(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    apis = [await connect(str(kubeconfig_path)) for _ in range(3)]
    windows: list[list[Any]] = []
    replicas = [Replica(api, f"r{i}", windows) for i, api in enumerate(apis)]
    defaults = LeaderElectionConfig("x", "y", "z")
    try:
        for r in replicas:
            r.start()
        for round_ in range(8):
            async with asyncio.timeout(5):
                while not any(r.acting.is_set() for r in replicas):
                    await asyncio.sleep(0.005)
            leader = next(r for r in replicas if r.acting.is_set())
            await asyncio.sleep(0.3)
            killed = round_ % 2 == 0
            await leader.stop(release=not killed)
            stopped = time.monotonic()
            async with asyncio.timeout(5):
                while not any(r.acting.is_set() for r in replicas if r is not leader):
                    await asyncio.sleep(0.002)
            took = time.monotonic() - stopped
            if killed:
                assert took <= defaults.lease_duration + defaults.retry_period + SLACK, took
            else:
                assert took <= defaults.retry_period + SLACK, took
            leader.start()
        assert len(windows) >= 9
        assert_never_two(windows)
    finally:
        for r in replicas:
            if r.task is not None:
                await r.stop()
        for api in apis:
            await api.close()


async def test_flaky_api_causes_handovers_but_never_two_leaders(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    apis = [await connect(str(kubeconfig_path)) for _ in range(2)]
    windows: list[list[Any]] = []
    replicas = [Replica(api, f"r{i}", windows) for i, api in enumerate(apis)]
    try:
        for r in replicas:
            r.start()
        apiserver.faults.error_rate = 0.3
        apiserver.faults.latency = 0.02
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        tick = 0
        while loop.time() < end:
            await asyncio.sleep(0.3)
            tick += 1
            # every third tick, slowness beyond the renew deadline forces a step-down
            apiserver.faults.latency = 0.7 if tick % 3 == 0 else 0.02
        apiserver.faults.reset()
        async with asyncio.timeout(5):
            while not any(r.acting.is_set() for r in replicas):
                await asyncio.sleep(0.01)
        assert len(windows) >= 2  # leadership did change hands (or was re-acquired)
        assert_never_two(windows)
    finally:
        apiserver.faults.reset()
        for r in replicas:
            await r.stop()
        for api in apis:
            await api.close()


SLOW_ANSWER = 0.5
"""How long the late answer is held after the emulator stored the renewal."""


class LateAnswerRelay:
    """One replica's TCP path to the emulator (on the host's 127.0.0.1, no namespace).

    Armed with `answer_late_then_cut()`, the next request goes through at once (the emulator
    stores it), its answer is held back, then delivered, and from then on the path is dark:
    nothing more reaches either side and new connections are never answered. The emulator's
    own latency fault cannot tell this story: it delays requests before they are stored.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.armed = False
        self.dark = False
        self.last_request_at: float | None = None
        self.slow_request_at: float | None = None
        """When the slow request reached the emulator's side: no earlier than sent, no
        later than stored."""
        self.answered_at: float | None = None
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._renew_deadline = LeaderSettings().renew_deadline

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def answer_late_then_cut(self) -> None:
        self.armed = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self.dark:
            return  # accepted, never answered
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        self._writers.append(up_writer)
        slow = asyncio.Event()  # this connection carries the slow request
        pipes = (self._requests(reader, up_writer, slow), self._answers(up_reader, writer, slow))
        tasks = [asyncio.create_task(p) for p in pipes]
        self._tasks.update(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _requests(
        self, reader: asyncio.StreamReader, up: asyncio.StreamWriter, slow: asyncio.Event
    ) -> None:
        while data := await reader.read(65536):
            if self.dark:
                return
            now = time.monotonic()
            if self.armed:
                self.armed = False
                self.slow_request_at = now
                slow.set()
            else:
                self.last_request_at = now
            up.write(data)
            await up.drain()

    async def _answers(
        self, up: asyncio.StreamReader, writer: asyncio.StreamWriter, slow: asyncio.Event
    ) -> None:
        while data := await up.read(65536):
            if self.dark:
                return
            if slow.is_set():
                assert self.slow_request_at is not None
                delay = SLOW_ANSWER
                if self.last_request_at is not None:
                    # the leader gives up on a renewal at previous + renew deadline: answer
                    # 0.1 s before that (0.5 s late when the loop is on time) so it counts
                    previous_deadline = self.last_request_at + self._renew_deadline
                    delay = min(delay, previous_deadline - 0.1 - time.monotonic())
                await asyncio.sleep(delay)
                with contextlib.suppress(TimeoutError):
                    while more := await asyncio.wait_for(up.read(65536), 0.05):
                        data += more  # the rest of the answer, if it came in pieces
                writer.write(data)
                await writer.drain()
                self.answered_at = time.monotonic()
                self.dark = True
                return
            writer.write(data)
            await writer.drain()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for writer in self._writers:
            writer.transport.abort()


async def test_leader_answered_late_then_partitioned_stops_before_the_standby_takes_over(
    apiserver: ApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """With the processes' defaults (lease 1 s, renew deadline 0.8 s, retry 0.2 s): the
    leader's renewal reaches the emulator and is stored at once, its answer comes 0.5 s
    late, and then the leader is cut off from the API. A candidate may take over only a
    whole lease after it first saw the stored record, so the old leader must have stopped
    acting before `stored + leaseDurationSeconds`, and the standby's window must not
    overlap its own.

    Kills the mutant that counts the renew deadline from the answer instead of the send:
    the old leader then acts until about `stored + 1.3 s`."""
    relay = LateAnswerRelay((apiserver.host, apiserver.port))
    await relay.start()
    config = apiserver.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{relay.port}"
    relayed = tmp_path / "relayed.kubeconfig"
    relayed.write_text(yaml.safe_dump(config))
    apis = [await connect(str(relayed)), await connect(str(kubeconfig_path))]
    windows: list[list[Any]] = []
    defaults = LeaderSettings()
    leader = Replica(apis[0], "a", windows, defaults)  # through the relay
    standby = Replica(apis[1], "b", windows, defaults)
    try:
        leader.start()
        async with asyncio.timeout(5):
            await leader.acting.wait()
        standby.start()
        await asyncio.sleep(0.5)  # a warm standby, polling the Lease
        relay.answer_late_then_cut()
        async with asyncio.timeout(5):
            while not standby.acting.is_set() or leader.acting.is_set():
                await asyncio.sleep(0.002)

        assert relay.slow_request_at is not None and relay.answered_at is not None
        assert relay.answered_at - relay.slow_request_at >= 0.3, "answered late (scenario)"
        lease = await apis[1].get(LEASES, "eipctl-scheduler", "kube-system")
        duration = lease["spec"]["leaseDurationSeconds"]
        reached_api = relay.slow_request_at  # the renewal was stored no earlier than this
        (_, until, _) = next(w for w in windows if w[2] == "a")
        (since, _, _) = next(w for w in windows if w[2] == "b")
        assert until > relay.answered_at  # the late answer counted: it went on acting...
        assert until < reached_api + duration, (  # ...but stopped before a takeover
            f"the old leader acted until {until - reached_api:.3f}s after its renewal reached "
            f"the API; a standby may take over {duration}s after it was stored"
        )
        assert_never_two(windows)
        print(
            f"after the renewal reached the API: old leader stopped at "
            f"+{until - reached_api:.3f}s, standby acted from +{since - reached_api:.3f}s"
        )
    finally:
        for r in (leader, standby):
            if r.task is not None:
                await r.stop()
        for api in apis:
            await api.close()
        await relay.stop()
