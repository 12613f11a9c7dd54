"""Benchmark the Kubernetes API emulator: create, update and watch fan-out rates.

Runs the emulator as its own process (uvloop), drives it over loopback HTTP with aiohttp,
and prints writes/s and watch-delivery figures:

    python benchmarks/bench_apiserver.py [--writes 5000] [--watchers 100] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

NS_URL = "/api/v1/namespaces/default/configmaps"


async def start_emulator(tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    kc = tmp / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubemu",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kc),
        "--history-window",
        "100000",
        "--bookmark-interval",
        "0",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    for _ in range(400):
        if kc.exists() and kc.stat().st_size:
            break
        await asyncio.sleep(0.05)
    url = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
    return proc, url


def cpu_seconds(pid: int) -> float:
    """User+system CPU the emulator process has used (other load on the machine does not count)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_pool(n: int, concurrency: int, one: object) -> float:
    """Run one(i) for i in range(n) with `concurrency` workers; returns seconds taken."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await one(i)  # type: ignore[operator]

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


async def bench_writes(
    http: aiohttp.ClientSession, n: int, concurrency: int, pid: int
) -> tuple[float, float, float, float]:
    """Creates then merge patches; returns wall-clock rates and rates per server CPU second."""

    async def create(i: int) -> None:
        body = {"metadata": {"name": f"cm-{i}", "labels": {"bench": "1"}}, "data": {"i": str(i)}}
        async with http.post(NS_URL, json=body) as r:
            assert r.status == 201, await r.text()
            await r.read()

    async def update(i: int) -> None:
        patch = {"data": {"i": f"u{i}"}}
        async with http.patch(
            f"{NS_URL}/cm-{i}",
            data=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        ) as r:
            assert r.status == 200, await r.text()
            await r.read()

    cpu0 = cpu_seconds(pid)
    t_create = await run_pool(n, concurrency, create)
    cpu1 = cpu_seconds(pid)
    t_update = await run_pool(n, concurrency, update)
    cpu2 = cpu_seconds(pid)
    return n / t_create, n / t_update, n / max(cpu1 - cpu0, 1e-3), n / max(cpu2 - cpu1, 1e-3)


async def bench_watch(
    url: str, http: aiohttp.ClientSession, watchers: int, n: int, concurrency: int
) -> tuple[float, float, float]:
    """Open `watchers` watches, write n objects, time until every watcher has every event."""
    async with http.get(NS_URL, params={"limit": "1"}) as r:
        rv = (await r.json())["metadata"]["resourceVersion"]
    received = [0] * watchers
    done = asyncio.Event()
    conn = aiohttp.TCPConnector(limit=0)
    wsess = aiohttp.ClientSession(url, connector=conn, timeout=aiohttp.ClientTimeout(total=None))
    ready = 0
    all_ready = asyncio.Event()

    async def watch(k: int) -> None:
        nonlocal ready
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "120"}
        async with wsess.get(NS_URL, params=params) as resp:
            ready += 1
            if ready == watchers:
                all_ready.set()
            async for chunk in resp.content.iter_any():
                received[k] += chunk.count(b"\n")
                if received[k] >= n and all(c >= n for c in received):
                    done.set()
                    return
                if received[k] >= n:
                    return

    tasks = [asyncio.create_task(watch(k)) for k in range(watchers)]
    async with asyncio.timeout(30):
        await all_ready.wait()

    async def create(i: int) -> None:
        body = {"metadata": {"name": f"w-{i}"}, "data": {"i": str(i)}}
        async with http.post(NS_URL, json=body) as r:
            assert r.status == 201
            await r.read()

    start = time.perf_counter()
    t_write = await run_pool(n, concurrency, create)
    async with asyncio.timeout(120):
        await asyncio.gather(*tasks)
    t_all = time.perf_counter() - start
    await wsess.close()
    lag = t_all - t_write
    return n / t_write, n * watchers / t_all, lag


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--writes", type=int, default=5000)
    p.add_argument("--watch-writes", type=int, default=2000)
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=32)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = await start_emulator(Path(tmp))
        try:
            conn = aiohttp.TCPConnector(limit=args.concurrency)
            async with aiohttp.ClientSession(url, connector=conn) as http:
                c_rate, u_rate, c_cpu, u_cpu = await bench_writes(
                    http, args.writes, args.concurrency, proc.pid
                )
                print(
                    f"create: {c_rate:8.0f} writes/s  ({c_cpu:.0f} per server CPU-second; "
                    f"{args.writes} ConfigMaps, {args.concurrency} concurrent)"
                )
                print(
                    f"update: {u_rate:8.0f} writes/s  ({u_cpu:.0f} per server CPU-second; "
                    "merge patches)"
                )
                w_rate, deliv, lag = await bench_watch(
                    url, http, args.watchers, args.watch_writes, args.concurrency
                )
                print(
                    f"watch:  {w_rate:8.0f} writes/s while {args.watchers} watchers follow; "
                    f"{deliv:.0f} events/s delivered in total; "
                    f"last watcher done {lag * 1000:.0f} ms after the last write"
                )
        finally:
            proc.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await proc.wait()


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
