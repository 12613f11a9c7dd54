"""How long the allocator's term start (`allocator.state.Term.rebuild`) holds the loop.

A new allocator leader loads every claim, pool and Service from its caches into the book and
queues every key. It did so in one synchronous call: nothing else of the process ran
meanwhile, the Lease renewal included, and once that call took longer than the renew
deadline (0.8 s by default) a leader lost its Lease the moment it took office, and the next
term started over: bench_scale.py found that livelock at 10,000 Services ([scale],
docs/scale.md). The rebuild now gives the loop back every few milliseconds
(`kube.slices.in_slices`); what counts is the longest the loop waits on it.

Here the rebuild runs alone, in this process, on caches filled by hand (no API, no event
loop work besides the queue): S Services annotated ``external-ip: auto``, each with the IP
it was given recorded (annotation, spec.externalIPs, status.loadBalancer.ingress) and its
claim, one pool. Prints, per size, the rebuild's time (min and median of --repeat), per
Service, and the longest the loop waited for its turn meanwhile (a task that only yields,
beside it: the most any other task, such as the Lease's renewal, waits). The caches are
settled first (`kube.heap.settle`: frozen out of the collector's sight, as the process does
once synced; ``--no-settle`` leaves them in it). Figures only; nothing is asserted.

Run: python benchmarks/bench_term_rebuild.py [--services 1000,10000,50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import logging
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import structlog

from eipctl.allocator.keys import AllocatorKey
from eipctl.allocator.state import CLAIM_INDEXERS, Caches, Term
from eipctl.core.allocation import AllocationBook
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import ANNOTATION_ALLOCATED_IPS, ANNOTATION_EXTERNAL_IP, AUTO
from eipctl.kube import heap
from eipctl.kube.events import EventRecorder
from eipctl.kube.workqueue import WorkQueue
from eipctl.kube.writer import SerializedWriter
from figures import machine

Obj = dict[str, Any]
POOL_CIDR = "10.0.0.0/8"


class FilledCache:
    """What a synced informer answers the term: its objects, one by key, an index."""

    def __init__(
        self, objects: Iterable[Obj], indexers: Mapping[str, Callable[[Obj], Any]] | None = None
    ) -> None:
        self._objects = list(objects)
        self._by_key = {_key(o): o for o in self._objects}
        self._indexers = dict(indexers or {})

    def objects(self) -> list[Obj]:
        return list(self._objects)

    def get(self, key: str) -> Obj | None:
        return self._by_key.get(key)

    def keys(self) -> list[str]:
        return list(self._by_key)

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for o in self._objects if value in self._indexers[index](o)]

    def __len__(self) -> int:
        return len(self._objects)


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def cluster(services: int) -> Caches:
    net = ipaddress.ip_network(POOL_CIDR)
    pool = {
        "metadata": {"name": "p", "creationTimestamp": "2024-01-01T00:00:00Z", "generation": 1},
        "spec": {"cidr": POOL_CIDR},
    }
    svcs: list[Obj] = []
    claims: list[Obj] = []
    for i in range(services):
        ip = net[i + 1]
        svcs.append(
            {
                "metadata": {
                    "name": f"s{i}",
                    "namespace": "default",
                    "annotations": {
                        ANNOTATION_EXTERNAL_IP: AUTO,
                        ANNOTATION_ALLOCATED_IPS: str(ip),
                    },
                },
                "spec": {
                    "type": "ClusterIP",
                    "ports": [{"port": 80, "protocol": "TCP"}],
                    "externalIPs": [str(ip)],
                },
                "status": {"loadBalancer": {"ingress": [{"ip": str(ip)}]}},
            }
        )
        claims.append(
            allocator_claim(
                ip, pool="p", prefix_length=None, service=f"default/s{i}", sharing_key=""
            )
        )
    return Caches(
        *cast(
            Any,
            (
                FilledCache(svcs),
                FilledCache(claims, CLAIM_INDEXERS),
                FilledCache([pool]),
                FilledCache([]),
            ),
        )
    )


async def rebuild_seconds(caches: Caches) -> tuple[float, float]:
    """(the rebuild's wall time, the longest gap a task that only yields saw meanwhile)."""
    term = Term(
        caches=caches,
        book=AllocationBook(),
        queue=WorkQueue[AllocatorKey]("allocator"),
        writer=cast(SerializedWriter, None),  # the rebuild writes nothing
        events=cast(EventRecorder, None),
    )
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    gc.collect()
    watch = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    await term.rebuild()
    took = time.perf_counter() - started
    done = True
    await watch
    return took, longest


async def measure(sizes: list[int], repeat: int, *, settle: bool) -> None:
    print(machine())
    for size in sizes:
        caches = cluster(size)
        if settle:
            heap.settle()  # as the process does once its caches have synced
        runs = [await rebuild_seconds(caches) for _ in range(repeat)]
        times = [t for t, _ in runs]
        median = statistics.median(times)
        held = max(h for _, h in runs)
        print(
            f"{size:>7,} Services: rebuild min {min(times) * 1000:7.1f} ms, "
            f"median {median * 1000:7.1f} ms ({median / size * 1e6:.1f} us per Service); "
            f"the loop held at most {held * 1000:.1f} ms (renew deadline 800 ms)",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="leave the heap unfrozen (the process before kube.heap.settle)",
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes = [int(s) for s in args.services.split(",") if s.strip()]
    # the work queue wants a running loop
    asyncio.run(measure(sizes, args.repeat, settle=not args.no_settle))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
