"""Story: the API server stops answering for 3 s (an etcd hiccup, a slow upgrade step).

The allocator's Lease is client-go's (renew deadline 10 s): it keeps leading through the
stall, and a Service created during it gets its IP from the same term. With the scheduler's
short Lease (renew deadline 0.8 s, which its failover budget needs) the same stall ends the
term; the second case shows the first one could fail.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_allocator_support import (
    IPCLAIMPOOLS,
    SERVICES,
    allocator,
    create,
    eventually,
    ips_of,
    pool,
    service,
)

from eipctl.kube.client import KubeApi
from eipctl.metrics import REGISTRY
from kubemu import ApiServer

STALL = 3.0
SCHEDULERS_LEASE = {"lease_duration": 1.0, "renew_deadline": 0.8, "retry_period": 0.2}


def _leading() -> bool:
    return REGISTRY.get_sample_value("eipctl_leader", {"component": "allocator"}) == 1


@pytest.mark.parametrize(
    ("timings", "keeps_leading"),
    [({}, True), (SCHEDULERS_LEASE, False)],
    ids=["allocator-defaults", "scheduler-timings"],
)
async def test_a_3s_stall_of_the_api_server_costs_the_allocator_no_term(
    api: KubeApi,
    apiserver: ApiServer,
    kubeconfig_path: Path,
    timings: dict[str, Any],
    keeps_leading: bool,
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/28"))
    await create(api, SERVICES, service("before"))
    async with allocator(kubeconfig_path, leader_elect=True, **timings):
        before = await eventually(lambda: ips_of(api, "before"), timeout=20)
        assert await eventually(_leading)
        stepped_down = False

        async def watch_leading() -> None:
            nonlocal stepped_down
            while True:
                stepped_down = stepped_down or not _leading()
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch_leading())
        try:
            stalled = apiserver.faults.pause(STALL)
            during = asyncio.create_task(create(api, SERVICES, service("during")))  # held
            await stalled
            await during
            during_ips = await eventually(lambda: ips_of(api, "during"), timeout=20)
            await asyncio.sleep(0.5)  # a renewal after the stall
        finally:
            watcher.cancel()
        assert len(before) == len(during_ips) == 1 and before != during_ips
        assert stepped_down is not keeps_leading
        assert _leading()  # either way, leading again once the API server answers
