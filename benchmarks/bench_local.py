"""What watching EndpointSlices costs the scheduler ([local]): a real `eipctl scheduler`
process, the API emulator in this process, default flags.

    python benchmarks/bench_local.py [--slices 10000] [--local 100] [--moves 50] [--window 20]

The cluster: `--nodes` IpNodes judged by their heartbeat counter (bumped in the emulator's
store), `--slices` Services each with one EndpointSlice (a pod on a random node), of which
`--local` are externalTrafficPolicy: Local and have an external IP and its claim. Printed:
the scheduler's RSS before and after the slices exist (what its cache of every slice costs),
then its CPU share over `--window` seconds idle, with `--moves` pod moves per second among
the Cluster Services (churn placement ignores), and with the same churn among the Local
Services (each move may move a claim), with the claim moves counted. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import random
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench_scheduler import CRDS, GROUP, Bed, until
from eipctl.core.naming import claim_name_for
from figures import machine
from kubemu import ApiServer


def proc_stat(pid: int) -> tuple[float, float]:
    """(CPU seconds used, RSS in MiB) of process `pid`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return cpu, rss


def service(i: int, local: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"ports": [{"port": 80}], "selector": {"app": f"s{i}"}}
    annotations = {}
    if local:
        ip = f"198.51.{100 + i // 250}.{1 + i % 250}"
        spec.update(externalIPs=[ip], externalTrafficPolicy="Local")
        annotations["eipctl.io/allocated-ips"] = ip
    return {
        "metadata": {"name": f"s{i}", "namespace": "default", "annotations": annotations},
        "spec": spec,
    }


def endpoint_slice(i: int, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"s{i}-x",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": f"s{i}"},
        },
        "addressType": "IPv4",
        "ports": [{"port": 80, "protocol": "TCP"}],
        "endpoints": [
            {
                "addresses": [f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"],
                "nodeName": node,
                "conditions": {"ready": True},
            }
        ],
    }


async def churn(
    srv: ApiServer, bed: Bed, ids: list[int], per_second: float, seconds: float
) -> None:
    """`per_second` pod moves (a slice's endpoint to another node) among `ids`."""
    rng = random.Random(7)
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        i = rng.choice(ids)
        obj = srv.store.get("discovery.k8s.io", "endpointslices", f"s{i}-x", "default")
        obj["endpoints"][0]["nodeName"] = rng.choice(bed.nodes)
        srv.store.update("discovery.k8s.io", "endpointslices", obj)
        n += 1
        await asyncio.sleep(max(0.0, start + n / per_second - time.monotonic()))


async def bind_placed(srv: ApiServer) -> None:
    """What the controllers do: report each placed claim Bound on its node (planned moves
    wait for it: the scheduler paces them by what is not Bound yet)."""
    while True:
        for c in srv.store.list(GROUP, "ipclaims"):  # copies: changed and written back
            node = (c.get("spec") or {}).get("nodeName")
            status = c.get("status") or {}
            if node and (status.get("phase"), status.get("boundNode")) != ("Bound", node):
                c["status"] = {**status, "phase": "Bound", "boundNode": node}
                with contextlib.suppress(Exception):  # a conflict: next round
                    srv.store.update(GROUP, "ipclaims", c, status=True)
        await asyncio.sleep(0.2)


def claim_nodes(srv: ApiServer) -> dict[str, str]:
    return {
        c["metadata"]["name"]: (c.get("spec") or {}).get("nodeName") or ""
        for c in srv.store.scan(GROUP, "ipclaims")
    }


async def window(pid: int, seconds: float, work: Any = None) -> tuple[float, float]:
    """(CPU % of one core, RSS MiB at the end) of `pid` over `seconds`, while `work` runs."""
    cpu0, _ = proc_stat(pid)
    t0 = time.monotonic()
    if work is None:
        await asyncio.sleep(seconds)
    else:
        await work
    cpu1, rss = proc_stat(pid)
    return 100 * (cpu1 - cpu0) / (time.monotonic() - t0), rss


async def bench(args: argparse.Namespace) -> None:
    srv = ApiServer(history_window=200_000, bookmark_interval=5.0)
    await srv.start(host="127.0.0.1", port=0)
    await srv.load_crds_from_dir(CRDS)
    tmp = tempfile.TemporaryDirectory()
    key = Path(tmp.name) / "liveness.key"
    key.write_text(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")
    key.chmod(0o600)
    bed = Bed(
        srv,
        srv.write_kubeconfig(Path(tmp.name) / "kubeconfig"),
        args.nodes,
        ["--liveness-key-file", str(key)],
    )
    rng = random.Random(1)
    local_ids = list(range(args.local))
    cluster_ids = list(range(args.local, args.slices))
    binder: asyncio.Task[None] | None = None
    try:
        bed.start_nodes()
        binder = asyncio.create_task(bind_placed(srv))
        for i in range(args.slices):
            srv.store.create("", "services", service(i, i < args.local), "default")
        for i in local_ids:
            ip = f"198.51.{100 + i // 250}.{1 + i % 250}"
            srv.store.create(
                GROUP,
                "ipclaims",
                {
                    "metadata": {"name": claim_name_for(ip)},
                    "spec": {"ip": ip, "prefixLength": 32, "services": [f"default/s{i}"]},
                },
            )
        name = await bed.start_scheduler()
        pid = bed.procs[name].pid
        await until(lambda: bed.leader() == name, limit=60, interval=0.1)
        await asyncio.sleep(5.0)
        _, rss_before = proc_stat(pid)
        t0 = time.monotonic()
        for i in range(args.slices):
            srv.store.create(
                "discovery.k8s.io", "endpointslices", endpoint_slice(i, rng.choice(bed.nodes)),
                "default",
            )  # fmt: skip
            if i % 500 == 499:
                await asyncio.sleep(0)  # let the watch flow
        made = time.monotonic() - t0
        await until(lambda: all(claim_nodes(srv).values()), limit=120, interval=0.5)
        await asyncio.sleep(5.0)
        idle, rss_after = await window(pid, args.window)
        print(f"machine: {machine()}")
        print(
            f"{args.nodes} nodes, {args.slices} Services with one EndpointSlice each "
            f"({args.local} Local, with claims); slices written in {made:.1f}s"
        )
        print(
            f"scheduler RSS {rss_before:.0f} MiB before the slices, {rss_after:.0f} MiB with "
            f"them: {(rss_after - rss_before) * 1024 / args.slices:.1f} KiB per slice"
        )
        print(f"idle: scheduler CPU {idle:.1f} % of one core over {args.window:.0f}s")
        cpu, _ = await window(
            pid, args.window, churn(srv, bed, cluster_ids, args.moves, args.window)
        )
        print(f"{args.moves} pod moves/s among Cluster Services: CPU {cpu:.1f} %")
        before = claim_nodes(srv)
        cpu, rss = await window(
            pid, args.window, churn(srv, bed, local_ids, args.moves, args.window)
        )
        await asyncio.sleep(2.0)
        after = claim_nodes(srv)
        wrong = sum(
            1
            for i in local_ids
            if after[claim_name_for(f"198.51.{100 + i // 250}.{1 + i % 250}")]
            != srv.store.get("discovery.k8s.io", "endpointslices", f"s{i}-x", "default")[
                "endpoints"
            ][0]["nodeName"]
        )
        moved = sum(1 for k in before if before[k] != after[k])
        print(
            f"{args.moves} pod moves/s among Local Services: CPU {cpu:.1f} %, RSS {rss:.0f} MiB, "
            f"{moved} claims moved; 2 s after the churn {wrong} of {args.local} claims not on "
            "their pod's node"
        )
    finally:
        if binder is not None:
            binder.cancel()
        await bed.stop_all()
        await srv.stop()
        tmp.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--slices", type=int, default=10_000)
    parser.add_argument("--local", type=int, default=100)
    parser.add_argument("--moves", type=float, default=50.0)
    parser.add_argument("--window", type=float, default=20.0)
    uvloop.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
