"""Stories: the allocator was down, or was killed mid-way; on start it repairs everything.

Nothing leaks (no claim without a Service), nothing is handed out twice, half-done work
is finished, and claims the scheduler made for hand-set IPs are left alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from test_allocator_support import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    SERVICES,
    allocator,
    check_consistent,
    claims,
    create,
    eventually,
    ips_of,
    pool,
    service,
)

from eipctl.kube.client import KubeApi, Obj


def _claim(ip: str, services: list[str], origin: str = "allocator", pool_: str = "p") -> Obj:
    return {
        "metadata": {
            "name": ip.replace(".", "-"),
            "labels": {"eipctl.io/pool": pool_, "eipctl.io/origin": origin},
        },
        "spec": {"ip": ip, "prefixLength": 32, "services": services},
    }


def _recorded(name: str, ip: str, annotations: dict[str, str] | None = None) -> Obj:
    svc = service(name, annotations, external_ips=[ip])
    svc["metadata"]["annotations"]["eipctl.io/allocated-ips"] = ip
    return svc


async def test_start_repairs_half_done_work_and_releases_what_went_while_down(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/28"))
    # deleted while we were down: its claim remains
    await create(api, IPCLAIMS, _claim("192.0.2.1", ["default/deleted"]))
    # crash between claim create and Service patch: claim, but the Service lacks the IP
    await create(api, IPCLAIMS, _claim("192.0.2.2", ["default/half"]))
    await create(api, SERVICES, service("half"))
    # the Service records an IP whose claim is gone
    await create(api, SERVICES, _recorded("noclaim", "192.0.2.5"))
    # annotation removed while we were down
    await create(api, IPCLAIMS, _claim("192.0.2.3", ["default/quit"]))
    await create(api, SERVICES, _recorded("quit", "192.0.2.3", annotations={}))
    # the scheduler's claim for a hand-set IP, whose Service is gone: not ours to delete
    await create(api, IPCLAIMS, _claim("192.0.2.9", ["default/manual"], origin="manual"))
    # a newcomer must not get any of the IPs above
    await create(api, SERVICES, service("new"))
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "half")) == ["192.0.2.2"]
        assert await eventually(lambda: ips_of(api, "noclaim")) == ["192.0.2.5"]
        await eventually(lambda: _claim_lists(api, "192.0.2.5", ["default/noclaim"]))
        assert await eventually(lambda: ips_of(api, "new")) == ["192.0.2.4"]
        await eventually(lambda: _gone(api, "192.0.2.1"))
        await eventually(lambda: _gone(api, "192.0.2.3"))
        assert await ips_of(api, "quit") == []
        held = await claims(api)
        assert held["192.0.2.9"]["spec"]["services"] == ["default/manual"]
        assert sorted(held) == ["192.0.2.2", "192.0.2.4", "192.0.2.5", "192.0.2.9"]


async def test_sigkill_mid_way_through_200_allocations_then_restart(
    api: KubeApi, kubeconfig_path: Path, tmp_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/24"))
    for i in range(200):
        await create(api, SERVICES, service(f"s{i:03d}", type_="LoadBalancer"))
    first = await _spawn(kubeconfig_path, "first", tmp_path / "first.log")
    try:
        await eventually(lambda: _claim_count_at_least(api, 60), timeout=60, step=0.01)
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    done = len(await claims(api))
    assert 0 < done < 200, f"killed after {done} claims: not mid-way"
    second = await _spawn(kubeconfig_path, "second", tmp_path / "second.log")
    try:
        await eventually(lambda: _all_consistent(api, 200), timeout=90, step=0.25)
    finally:
        second.send_signal(signal.SIGTERM)
        await second.wait()
    await check_consistent(api, 200)


async def _spawn(kubeconfig: Path, identity: str, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "eipctl",
        "allocator",
        "--kubeconfig",
        str(kubeconfig),
        "--identity",
        identity,
        "--lease-namespace",
        "default",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        stdout=log.open("wb"),
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


async def _claim_count_at_least(api: KubeApi, n: int) -> bool:
    return len(await claims(api)) >= n


async def _all_consistent(api: KubeApi, n: int) -> bool:
    try:
        await check_consistent(api, n)
    except AssertionError:
        return False
    return True


async def _claim_lists(api: KubeApi, ip: str, services: list[str]) -> bool:
    claim = (await claims(api)).get(ip)
    return claim is not None and claim["spec"].get("services") == services


async def _gone(api: KubeApi, ip: str) -> bool:
    return ip not in await claims(api)
