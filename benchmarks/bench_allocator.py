"""Allocator throughput and API writes per Service: a real `eipctl allocator` process.

    python benchmarks/bench_allocator.py [--services 2000] [--trickle 200]

The API emulator runs in this process; the allocator runs as a subprocess
(`python -m eipctl allocator`, uvloop, default flags, leader election on). Every write that
reaches the emulator's storage (create / update / delete, conflicts included) is counted by
resource, so "writes per Service" is what the API server really saw.

Prints:
- bulk: N LoadBalancer Services annotated `external-ip: auto` exist before the allocator
  starts -> all hold an IP (recorded, and in status.loadBalancer.ingress): time from
  process start, time from its first claim, Services/s;
- writes per Service on that happy path, twice: without Events (target: at most 3 = claim
  create, Service update, Service status update) and with them (the `Allocated` Normal Event
  adds one fire-and-forget write per Service), with the breakdown; Lease renewals are listed
  but not counted;
- trickle: Services created one at a time while it runs -> IP visible: p50 / p99 latency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import uvloop

from kubemu import ApiServer

CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"
POOL_CIDR = "198.18.0.0/20"  # RFC 2544 benchmarking range: 4094 addresses


def service(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"external-ip": "auto"},
        },
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]},
    }


class WriteCounter:
    """Wraps the emulator store's write paths and counts them per (verb, resource)."""

    def __init__(self, srv: ApiServer) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.failed: Counter[tuple[str, str]] = Counter()
        self.enabled = False
        store = srv.store
        for verb, attr in (
            ("create", "create_object"),
            ("update", "update_object"),
            ("delete", "delete_object"),
        ):
            setattr(store, attr, self._wrap(verb, getattr(store, attr)))

    def _wrap(self, verb: str, fn: Any) -> Any:
        def counted(rt: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.enabled:
                return fn(rt, *args, **kwargs)
            what = verb
            if verb == "update" and kwargs.get("subresource") == "status":
                what = "update/status"
            key = (what, str(getattr(rt, "plural", rt)))
            self.counts[key] += 1
            try:
                return fn(rt, *args, **kwargs)
            except Exception:
                self.failed[key] += 1
                raise

        return counted

    def total(self, *, exclude: tuple[str, ...] = ("leases",)) -> int:
        return sum(n for (_, res), n in self.counts.items() if res not in exclude)

    async def settle(self, quiet: float = 0.5, limit: float = 15.0) -> None:
        """Wait until no write has landed for `quiet` s: the debounced pool status and the
        fire-and-forget Events arrive after the last Service is served."""
        deadline = time.monotonic() + limit
        last = -1
        while time.monotonic() < deadline:
            now = self.total()
            if now == last:
                return
            last = now
            await asyncio.sleep(quiet)


def is_served(svc: dict[str, Any]) -> bool:
    annotations = svc["metadata"].get("annotations") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return bool(annotations.get("eipctl.io/allocated-ips") and ingress)


def served(srv: ApiServer) -> int:
    """Served Services, read from the store without copies (the emulator shares our CPU)."""
    rt = srv.store._type("", "services")  # private: a read-only peek, no deepcopy
    return sum(1 for svc in srv.store.list_objects(rt, "default", None) if is_served(svc))


def claim_count(srv: ApiServer) -> int:
    rt = srv.store._type("eipctl.io", "ipclaims")
    return len(srv.store.list_objects(rt, None, None))


async def spawn(kubeconfig: Path, log: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "eipctl",
        "allocator",
        "--kubeconfig",
        str(kubeconfig),
        "--identity",
        "bench",
        "--lease-namespace",
        "default",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        "--log-level",
        "warning",
        stdout=log.open("wb"),
        stderr=asyncio.subprocess.STDOUT,
    )


async def main(n_services: int, n_trickle: int) -> int:
    srv = ApiServer(history_window=max(5000, 4 * n_services))
    await srv.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-allocator-"))
    kubeconfig = srv.write_kubeconfig(tmp / "kubeconfig")
    await srv.load_crds_from_dir(CRDS)
    srv.store.create(
        "eipctl.io", "ipclaimpools", {"metadata": {"name": "bench"}, "spec": {"cidr": POOL_CIDR}}
    )
    for i in range(n_services):
        srv.store.create("", "services", service(f"s{i:05d}"), "default")
    counter = WriteCounter(srv)
    counter.enabled = True
    proc = await spawn(kubeconfig, tmp / "allocator.log")
    started = time.monotonic()
    first_claim: float | None = None
    try:
        while True:
            if first_claim is None and claim_count(srv):
                first_claim = time.monotonic()
            if served(srv) >= n_services:
                break
            if time.monotonic() - started > 600 or proc.returncode is not None:
                print(f"gave up: {served(srv)}/{n_services} served; log in {tmp}")
                return 1
            await asyncio.sleep(0.02 if first_claim is None else 0.25)
        done = time.monotonic()
        await counter.settle()
        bulk = Counter(counter.counts)
        bulk_failed = Counter(counter.failed)
        writes = counter.total(exclude=("leases", "events"))
        writes_with_events = counter.total()
        latencies = await trickle(srv, n_trickle)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await proc.wait()
        await srv.stop()
    total = done - started
    steady = done - (first_claim or started)
    print(f"bulk: {n_services} Services from one pool ({POOL_CIDR})")
    print(f"  time from process start:  {total:7.2f} s")
    print(f"  time from first claim:    {steady:7.2f} s   ({n_services / steady:7.0f} Services/s)")
    per_service = writes / n_services
    with_events = writes_with_events / n_services
    print(f"  API writes per Service:   {per_service:7.2f}     (Events excluded; target: <= 3)")
    print(f"  ... including Events:     {with_events:7.2f}     (Allocated Normal Event)")
    print(f"  API writes total:         {writes_with_events:7d}     (Lease renewals excluded)")
    for (verb, res), n in sorted(bulk.items()):
        failed = f" ({bulk_failed[(verb, res)]} failed)" if bulk_failed[(verb, res)] else ""
        print(f"    {verb:14s} {res:14s} {n:7d}{failed}")
    if latencies:
        p50 = statistics.median(latencies) * 1000
        p99 = sorted(latencies)[max(0, int(len(latencies) * 0.99) - 1)] * 1000
        print(f"trickle: {len(latencies)} Services created one at a time -> IP on the Service")
        print(f"  latency p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")
    print(f"(allocator log: {tmp / 'allocator.log'}; cpu count {os.cpu_count()})")
    return 0


async def trickle(srv: ApiServer, n: int) -> list[float]:
    latencies: list[float] = []
    for i in range(n):
        name = f"t{i:05d}"
        begin = time.monotonic()
        srv.store.create("", "services", service(name), "default")
        while not is_served(srv.store.get("", "services", name, "default")):
            if time.monotonic() - begin > 10:
                raise RuntimeError(f"{name} not served within 10 s")
            await asyncio.sleep(0.002)
        latencies.append(time.monotonic() - begin)
    return latencies


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, default=2000)
    parser.add_argument("--trickle", type=int, default=100)
    args = parser.parse_args()
    raise SystemExit(uvloop.run(main(args.services, args.trickle)))
