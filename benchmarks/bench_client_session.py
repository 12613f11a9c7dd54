"""What one API request costs eipctl's own process: kubernetes-asyncio's stock session
against the session `eipctl.kube.session` gives it; prints figures.

The emulator runs as its own process (its CPU is not counted). This process makes
--requests GETs of one IpNode-sized object (a ConfigMap) and --requests merge patches,
--concurrency at a time, through `KubeApi` on each kind of session, and prints the
requests per second and this process's CPU per request (user + system, its threads
included: the stock session's environment lookups run on executor threads).

    python benchmarks/bench_client_session.py [--requests 2000] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from bench_apiserver import start_emulator
from eipctl.kube.client import KubeApi, ResourceRef, connect

CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)


def process_cpu() -> float:
    times = os.times()
    return times.user + times.system


async def _stock(api: KubeApi) -> None:
    """Put kubernetes-asyncio's own session back (trust_env=True), as it makes it."""
    from kubernetes_asyncio.client.rest import RESTClientObject

    rest = api.api_client.rest_client
    await rest.pool_manager.close()
    api.api_client.rest_client = RESTClientObject(api.api_client.configuration)


async def run(
    kubeconfig: Path, stock: bool, requests: int, concurrency: int, round_: int
) -> dict[str, Any]:
    api = await connect(str(kubeconfig))
    if stock:
        await _stock(api)
    name = f"bench-{round_}"
    body = {"metadata": {"name": name, "namespace": "default"}, "data": {"k": "v" * 200}}
    counter = iter(range(requests))

    async def one_kind(call: Any) -> tuple[float, float]:
        nonlocal counter
        counter = iter(range(requests))

        async def worker() -> None:
            for i in counter:
                await call(i)

        cpu0, t0 = process_cpu(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, process_cpu() - cpu0

    async def get(_i: int) -> None:
        await api.get(CONFIGMAPS, name, "default")

    async def patch(i: int) -> None:
        await api.patch(CONFIGMAPS, name, {"data": {"n": str(i)}}, namespace="default")

    try:
        await api.create(CONFIGMAPS, body, "default")
        gets = await one_kind(get)
        patches = await one_kind(patch)
    finally:
        await api.close()
    return {"get": gets, "patch": patches}


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, _url = await start_emulator(Path(tmp))
        try:
            kubeconfig = Path(tmp) / "kubeconfig"
            print(f"{args.requests} requests of each verb, {args.concurrency} at a time")
            print(f"{'session':<28}{'verb':<7}{'req/s':>8}{'CPU us/req':>12}")
            for round_, stock in enumerate((True, False, True, False)):
                figures = await run(kubeconfig, stock, args.requests, args.concurrency, round_)
                label = "stock (trust_env=True)" if stock else "eipctl (kube/session.py)"
                for verb, (wall, cpu) in figures.items():
                    print(
                        f"{label:<28}{verb:<7}{args.requests / wall:>8.0f}"
                        f"{cpu / args.requests * 1e6:>12.0f}",
                        flush=True,
                    )
        finally:
            proc.terminate()
            await proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"load average {os.getloadavg()}, Python {sys.version.split()[0]}")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
