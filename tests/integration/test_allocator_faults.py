"""Story: a flaky API server (errors, dropped watches, 410 Gone) while Services come and go.

The allocator keeps running, retries, and ends with every Service holding exactly one IP,
every IP exactly one claim, and no orphaned claim.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_allocator_support import (
    IPCLAIMPOOLS,
    SERVICES,
    allocator,
    check_consistent,
    create,
    eventually,
    pool,
    service,
)

from eipctl.kube.client import KubeApi
from eipctl.kube.errors import ApiError
from kubemu import ApiServer


async def test_flaky_api_server_heals_to_a_consistent_state(
    api: KubeApi, apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/24"))
    async with allocator(kubeconfig_path):
        apiserver.faults.error_rate = 0.2
        for i in range(60):
            await _persist(lambda i=i: api.create(SERVICES, service(f"s{i:02d}")))
            if i % 15 == 0:
                apiserver.faults.drop_watches()
                apiserver.faults.force_gone(2)
        for i in range(0, 60, 3):
            await _persist(lambda i=i: api.delete(SERVICES, f"s{i:02d}", "default"))
        await asyncio.sleep(1.0)
        apiserver.faults.reset()
        await eventually(lambda: _consistent(api, 40), timeout=60, step=0.25)
    await check_consistent(api, 40)


async def _persist(call) -> None:  # type: ignore[no-untyped-def]
    """The test's own requests retry through the injected faults (not what is under test)."""
    for _ in range(100):
        try:
            await call()
            return
        except ApiError as exc:
            if exc.status not in (0, 429, 500, 503):
                raise
            await asyncio.sleep(0.01)
    raise AssertionError("request kept failing")


async def _consistent(api: KubeApi, n: int) -> bool:
    try:
        await check_consistent(api, n)
    except AssertionError:
        return False
    return True
