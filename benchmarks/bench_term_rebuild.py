"""How long the allocator's term start (`allocator.state.Term.rebuild`) holds the loop.

A new allocator leader loads every claim, pool and Service from its caches into the book and
queues every key, in one synchronous call: nothing else of the process runs meanwhile, the
Lease renewal included. Once that call takes longer than the renew deadline (0.8 s by
default) a leader loses its Lease the moment it takes office, and the next term starts over:
bench_scale.py found that livelock at 10,000 Services ([scale], docs/scale.md).

Here the rebuild runs alone, in this process, on caches filled by hand (no API, no event
loop work besides the queue): S Services annotated ``external-ip: auto``, each with the IP
it was given recorded (annotation, spec.externalIPs, status.loadBalancer.ingress) and its
claim, one pool. Prints, per size, the rebuild's time (min and median of --repeat) and per
Service. Figures only; nothing is asserted.

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


def rebuild_seconds(caches: Caches) -> float:
    term = Term(
        caches=caches,
        book=AllocationBook(),
        queue=WorkQueue[AllocatorKey]("allocator"),
        writer=cast(SerializedWriter, None),  # the rebuild writes nothing
        events=cast(EventRecorder, None),
    )
    gc.collect()
    started = time.perf_counter()
    term.rebuild()
    return time.perf_counter() - started


async def measure(sizes: list[int], repeat: int) -> None:
    print(machine())
    for size in sizes:
        caches = cluster(size)
        times = [rebuild_seconds(caches) for _ in range(repeat)]
        median = statistics.median(times)
        print(
            f"{size:>7,} Services: rebuild min {min(times) * 1000:7.1f} ms, "
            f"median {median * 1000:7.1f} ms ({median / size * 1e6:.1f} us per Service; "
            "renew deadline 800 ms)",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", default="1000,10000,50000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes = [int(s) for s in args.services.split(",") if s.strip()]
    asyncio.run(measure(sizes, args.repeat))  # the work queue wants a running loop
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
