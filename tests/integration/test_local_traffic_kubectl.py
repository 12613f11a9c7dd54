"""A user's externalTrafficPolicy: Local Service, applied with the real kubectl, and its
EndpointSlice as kube-controller-manager would apply it: the real scheduler (in this loop,
against the API emulator) places the IP where the pod is and follows it when the slice is
applied again with the pod elsewhere; `kubectl get endpointslices` reads the emulator's own
table, and kubectl's own validation errors come back for a slice the apiserver refuses."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from kubectl_runner import run_kubectl

from eipctl.kube.client import IPCLAIMS, IPNODES, KubeApi
from eipctl.runtime.config import SchedulerSettings, parse_bind_address
from eipctl.runtime.health import Health
from eipctl.sandbox.boot import endpoint_slice
from eipctl.scheduler.process import run as run_scheduler
from polling import eventually

pytestmark = pytest.mark.kubectl

IP = "198.51.100.7"
NODES = ("node-0", "node-1", "node-2")
OFF = parse_bind_address("0")


async def kubectl(kubeconfig: Path, home: Path, *args: str, stdin: str = "") -> tuple[int, str]:
    code, out, err = await run_kubectl(kubeconfig, home, *args, stdin=stdin)
    return code, out + err


async def beating(api: KubeApi) -> None:
    """IpNodes without a liveness endpoint, judged by their heartbeat counter (as during an
    upgrade): bumped every 0.2 s."""
    for name in NODES:
        await api.create(IPNODES, {"metadata": {"name": name}, "spec": {"link": "eth0"}})
    n = 0
    while True:
        n += 1
        for name in NODES:
            await api.patch(IPNODES, name, {"status": {"heartbeat": n}}, status=True)
        await asyncio.sleep(0.2)


def local_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "type": "NodePort",
            "externalTrafficPolicy": "Local",
            "externalIPs": [IP],
            "selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": 8080}],
        },
    }


async def test_a_local_service_applied_with_kubectl_is_placed_where_its_pod_is(
    api: KubeApi, kubeconfig_path: Path, tmp_path: Path
) -> None:
    code, out = await kubectl(
        kubeconfig_path, tmp_path, "apply", "-f", "-", stdin=json.dumps(local_service())
    )
    assert code == 0, out
    code, out = await kubectl(
        kubeconfig_path,
        tmp_path,
        "apply",
        "-f",
        "-",
        stdin=json.dumps(endpoint_slice("web", ["node-1"], "default")),
    )
    assert code == 0, out
    await api.create(
        IPCLAIMS,
        {
            "metadata": {"name": IP.replace(".", "-")},
            "spec": {"ip": IP, "prefixLength": 32, "services": ["default/web"]},
        },
    )

    async def node_of_ip() -> str:
        claim = await api.get(IPCLAIMS, IP.replace(".", "-"))
        return str((claim.get("spec") or {}).get("nodeName") or "")

    stop = asyncio.Event()
    health = Health()
    await health.start(OFF, OFF)
    settings = SchedulerSettings(
        kubeconfig=str(kubeconfig_path),
        identity="scheduler-0",
        lease_namespace="default",
        metrics_bind_address=OFF,
        health_probe_bind_address=OFF,
    )
    beats = asyncio.create_task(beating(api))
    task = asyncio.ensure_future(run_scheduler(settings, health=health, stop=stop))
    try:

        async def placed_on(node: str) -> bool:
            return await node_of_ip() == node

        await eventually(lambda: placed_on("node-1"), timeout=15, step=0.1, what="placed there")
        moved = endpoint_slice("web", ["node-2"], "default")
        code, out = await kubectl(
            kubeconfig_path, tmp_path, "apply", "-f", "-", stdin=json.dumps(moved)
        )
        assert code == 0, out
        await eventually(lambda: placed_on("node-2"), timeout=15, step=0.1, what="followed")
        code, out = await kubectl(kubeconfig_path, tmp_path, "get", "endpointslices")
        assert code == 0 and "web-pods" in out and "IPv4" in out, out
        bad = {**moved, "addressType": "IPv5"}
        code, out = await kubectl(
            kubeconfig_path, tmp_path, "apply", "-f", "-", stdin=json.dumps(bad)
        )
        assert code != 0 and "addressType" in out and "IPv5" in out, out
    finally:
        stop.set()
        beats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beats
        async with asyncio.timeout(10):
            await task
