"""How long one placement pass (`scheduler.placing.Placer.reconcile`) holds the loop.

The scheduler's leader runs a pass for each batch of claim or node changes; the pass reads
the caches and hands `core.placement.plan` every claim. A pass holds the scheduler's loop,
which also reads the liveness replies of every node (a reply read 400 ms late is a false
death) and renews the Lease (0.8 s renew deadline). bench_scale.py found passes at ~10,000
claims long enough for both ([scale], docs/scale.md).

Here the pass runs alone, in this process, on caches filled by hand: N IpNodes, all live;
C claims of one pool (spread), each Bound on a node round-robin, each listing its Service;
C Services (Cluster traffic policy) in the Service cache the pass's `LocalTraffic` reads;
no EndpointSlices. Prints, per size: a steady pass (nothing to decide; min and median of
--repeat), a pass after one claim changed (a new claim to place), a pass after a node died
(its C/N claims to move). Each figure is the pass's wall time and, after "held", the longest
the loop waited on it without a turn (the pass works in slices of `kube.slices.SLICE`, so a
long pass no longer holds the loop throughout). Figures only; nothing is asserted.

Run: python benchmarks/bench_placement_pass.py [--sizes 100x1000,1000x10000,1000x50000]
        [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import logging
import statistics
import time
from typing import Any, cast

import structlog

from eipctl.core.fields import Mutation, Obj, name_of
from eipctl.core.liveness import Liveness
from eipctl.kube import heap
from eipctl.kube.writer import SerializedWriter
from eipctl.scheduler.local_traffic import LocalTraffic
from eipctl.scheduler.placing import Placer
from figures import machine

POOL = "p"


class Cache:
    """What a synced informer answers the pass: its objects, one by key, an index."""

    def __init__(self, objects: list[Obj]) -> None:
        self.by_key = {name_of(o): o for o in objects}

    def objects(self) -> list[Obj]:
        return list(self.by_key.values())

    def get(self, key: str) -> Obj | None:
        return self.by_key.get(key)

    def by_index(self, _index: str, _value: str) -> list[Obj]:
        return []


class Live:
    """Every node live but ``dead``."""

    timeout = 0.4

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = frozenset(nodes)

    def live(self, _now: float) -> frozenset[str]:
        return self.nodes

    def api_stale(self) -> frozenset[str]:
        return frozenset()


class NoWrites:
    """Takes the pass's writes and stores nothing: the pass is what is timed, not them."""

    async def update(self, _ref: Any, name: str, mutate: Mutation, **_: Any) -> Obj:
        await asyncio.Event().wait()  # never returns: the write stays in flight
        raise AssertionError(name, mutate)

    update_status = update


class Nobody:
    def tell(self, *_: Any, **__: Any) -> None:
        pass

    def placed(self, *_: Any) -> tuple[str, ...]:
        return ()

    def unplaceable(self, *_: Any) -> tuple[str, ...]:
        return ()


def _ip(i: int) -> str:
    return f"10.{200 + i // 65536}.{i // 256 % 256}.{i % 256}"


def claim(i: int, node: str) -> Obj:
    labels = {"eipctl.io/pool": POOL}
    spec: Obj = {"ip": _ip(i), "prefixLength": 32, "services": [f"default/s{i}"]}
    status: Obj = {}
    if node:
        labels["eipctl.io/node"] = node
        spec["nodeName"] = node
        status = {"phase": "Bound", "boundNode": node}
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaim",
        "metadata": {
            "name": _ip(i).replace(".", "-"),
            "labels": labels,
            "uid": f"u{i}",
            "resourceVersion": str(i + 1),
        },
        "spec": spec,
        "status": status,
    }


def cluster(nodes: int, claims: int) -> tuple[Cache, Cache, Cache, Cache, list[str]]:
    names = [f"node-{n}" for n in range(nodes)]
    ipnodes = [
        {
            "metadata": {"name": n, "labels": {}, "resourceVersion": "1"},
            "spec": {},
            "status": {"conditions": [{"type": "Live", "status": "True"}]},
        }
        for n in names
    ]
    pool = {
        "metadata": {"name": POOL, "resourceVersion": "1"},
        "spec": {"cidr": "10.200.0.0/14", "placement": "spread"},
    }
    services = [
        {
            "metadata": {"name": f"s{i}", "namespace": "default"},
            "spec": {"externalTrafficPolicy": "Cluster"},
        }
        for i in range(claims)
    ]
    claim_objs = [claim(i, names[i % nodes]) for i in range(claims)]
    service_cache = Cache([])
    service_cache.by_key = {f"default/{name_of(s)}": s for s in services}
    return Cache(claim_objs), Cache(ipnodes), Cache([pool]), service_cache, names


def placer(claims: Cache, ipnodes: Cache, pools: Cache, services: Cache, live: Live) -> Placer:
    return Placer(
        claims=claims,
        nodes=ipnodes,
        pools=pools,
        liveness=cast(Liveness, live),
        writer=cast(SerializedWriter, NoWrites()),
        recorder=Nobody(),
        services=Nobody(),
        policy="spread",
        clock=time.monotonic,
        kick=lambda _delay: None,
        local=LocalTraffic(services, Cache([])),
    )


async def timed(p: Placer) -> tuple[float, float]:
    """One pass of ``p``: its wall time and the longest it held the loop."""
    started = time.perf_counter()
    await p.reconcile()
    return time.perf_counter() - started, p.longest_hold


async def measure(nodes: int, claims: int, repeat: int) -> str:
    claim_cache, ipnodes, pools, services, names = cluster(nodes, claims)
    heap.settle()  # as the process does once its caches have synced
    live = Live(names)
    p = placer(claim_cache, ipnodes, pools, services, live)
    await p.reconcile()  # the first pass of a term reads every claim; later ones, the changed
    steady = [await timed(p) for _ in range(repeat)]
    one_new = []
    for k in range(repeat):
        new = claim(claims + k, "")
        claim_cache.by_key[name_of(new)] = new
        one_new.append(await timed(p))
    dead = []
    for k in range(repeat):
        q = placer(copy.copy(claim_cache), ipnodes, pools, services, Live(names))
        await q.reconcile()
        q.liveness = cast(Liveness, Live([n for n in names if n != names[k]]))
        dead.append(await timed(q))
        await q.close()
    await p.close()

    def ms(runs: list[tuple[float, float]]) -> str:
        walls, holds = [w for w, _ in runs], [h for _, h in runs]
        return (
            f"{statistics.median(walls) * 1000:6.1f} ms (max {max(walls) * 1000:.1f}), "
            f"held {max(holds) * 1000:.1f}"
        )

    return (
        f"{nodes:>5,} nodes x {claims:>6,} claims: steady {ms(steady)}; one new claim "
        f"{ms(one_new)}; a node dead ({claims // nodes} claims move) {ms(dead)}"
    )


async def main_async(sizes: list[tuple[int, int]], repeat: int) -> None:
    print(machine(), flush=True)
    for nodes, claims in sizes:
        gc.collect()
        print(await measure(nodes, claims, repeat), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x1000,1000x10000,1000x50000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes = [
        (int(n), int(c)) for n, c in (s.split("x") for s in args.sizes.split(",") if s.strip())
    ]
    asyncio.run(main_async(sizes, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
