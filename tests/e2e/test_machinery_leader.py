"""Story: replicas of one process race for a Lease on the emulator, over and over.

At no instant may two of them act (their acting windows, timed on one monotonic clock,
never overlap); a leader that dies without releasing is replaced within lease duration +
retry period, and one that stops cleanly within one retry period.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from eipctl.kube.client import KubeApi, connect
from eipctl.kube.leader import LeaderElectionConfig, LeaderElector
from eipctl.sandbox.apiserver import ApiServer

SLACK = 0.25  # HTTP round trips and scheduling on a loaded CI box


class Replica:
    def __init__(self, api: KubeApi, ident: str, windows: list[list[Any]]) -> None:
        self.ident = ident
        self.windows = windows
        self.acting = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.api = api

    def start(self) -> None:
        cfg = LeaderElectionConfig("eipctl-scheduler", "kube-system", self.ident)
        self.elector = LeaderElector(self.api, cfg)
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
