"""Throughput of the kube machinery against the in-process API emulator.

    python benchmarks/bench_machinery.py [--objects 2000]

Prints informer throughput (objects/s from a list, watch events/s into the cache) and
writer throughput (writes/s on distinct objects; mutations/s on one contended object,
with the number of API writes they were coalesced into).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path

from eipctl.kube.client import KubeApi, Obj, ObjectList, ResourceRef, WatchEvent, connect
from eipctl.kube.informer import Informer
from eipctl.kube.metrics import WRITER_COALESCED, WRITER_CONFLICTS, WRITER_WRITES
from eipctl.kube.writer import SerializedWriter
from kubemu import ApiServer

CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)
NS = "default"


def incr(obj: Obj) -> None:
    data = obj.setdefault("data", {})
    data["n"] = str(int(data.get("n", "0")) + 1)


async def bounded(n: int, limit: int, fn) -> None:  # type: ignore[no-untyped-def]
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> None:
        async with sem:
            await fn(i)

    await asyncio.gather(*(one(i) for i in range(n)))


def counter(metric, *labels: str) -> float:  # type: ignore[no-untyped-def]
    return float(metric.labels(*labels)._value.get())


class SyntheticStream:
    """A ListWatchApi that lists nothing and streams `n` synthetic events at once."""

    def __init__(self, n: int, keys: int) -> None:
        self.n, self.keys = n, keys
        self.done = asyncio.Event()

    async def list(self, ref: ResourceRef, namespace: str | None = None, **_: object) -> ObjectList:
        return ObjectList([], "0")

    async def watch(
        self, ref: ResourceRef, namespace: str | None = None, **_: object
    ) -> AsyncGenerator[WatchEvent, None]:
        for i in range(1, self.n + 1):
            meta = {"name": f"o{i % self.keys}", "namespace": NS, "resourceVersion": str(i)}
            yield WatchEvent("ADDED" if i <= self.keys else "MODIFIED", {"metadata": meta})
        self.done.set()
        await asyncio.Event().wait()


async def bench_ingest(n: int = 200_000, keys: int = 5000) -> None:
    stream = SyntheticStream(n, keys)
    inf = Informer(stream, CONFIGMAPS, namespace=NS)
    inf.add_key_handler(lambda key: None)
    t0 = time.perf_counter()
    inf.start()
    await stream.done.wait()
    dt = time.perf_counter() - t0
    await inf.stop()
    print(
        f"informer ingest (no HTTP): {n} events over {keys} keys in {dt:.3f}s"
        f" = {n / dt:,.0f} events/s into the cache"
    )


async def bench(objects: int) -> None:
    await bench_ingest()
    srv = ApiServer(history_window=max(1000, objects * 3), bookmark_interval=5.0)
    await srv.start(host="127.0.0.1", port=0)
    tmp = tempfile.TemporaryDirectory()
    kc = srv.write_kubeconfig(Path(tmp.name) / "kubeconfig")
    api: KubeApi = await connect(str(kc))
    try:
        await bounded(
            objects,
            32,
            lambda i: api.create(
                CONFIGMAPS, {"metadata": {"name": f"o{i}", "namespace": NS}, "data": {"n": "0"}}
            ),
        )

        inf = Informer(api, CONFIGMAPS, namespace=NS)
        t0 = time.perf_counter()
        inf.start()
        await inf.wait_synced()
        dt = time.perf_counter() - t0
        print(f"informer list:   {objects} objects in {dt:.3f}s = {objects / dt:,.0f} objects/s")

        all_seen = asyncio.Event()
        updated: set[str] = set()

        class Counter:
            def on_add(self, obj: Obj) -> None:
                pass

            def on_update(self, old: Obj, new: Obj) -> None:
                updated.add(new["metadata"]["name"])
                if len(updated) == objects:
                    all_seen.set()

            def on_delete(self, obj: Obj) -> None:
                pass

        inf.add_handler(Counter())
        async with await connect(str(kc)) as other:
            t0 = time.perf_counter()
            await bounded(
                objects,
                32,
                lambda i: other.patch(CONFIGMAPS, f"o{i}", {"data": {"n": "1"}}, NS),
            )
            await all_seen.wait()
            dt = time.perf_counter() - t0
        print(
            f"informer watch:  {objects} events in {dt:.3f}s = {objects / dt:,.0f} events/s "
            "(bounded by the server taking the patches)"
        )
        await inf.stop()

        writer = SerializedWriter(api)
        w0 = counter(WRITER_WRITES, "configmaps", "update")
        t0 = time.perf_counter()
        await asyncio.gather(
            *(writer.update(CONFIGMAPS, f"o{i}", incr, namespace=NS) for i in range(objects))
        )
        dt = time.perf_counter() - t0
        writes = counter(WRITER_WRITES, "configmaps", "update") - w0
        print(
            f"writer, no contention (GET+PUT): {writes:.0f} writes in {dt:.3f}s"
            f" = {writes / dt:,.0f} writes/s"
        )

        cache = Informer(api, CONFIGMAPS, namespace=NS)
        cache.start()
        await cache.wait_synced()
        cached_writer = SerializedWriter(api)
        cached_writer.use_cache(CONFIGMAPS, cache)
        w0 = counter(WRITER_WRITES, "configmaps", "update")
        t0 = time.perf_counter()
        await asyncio.gather(
            *(cached_writer.update(CONFIGMAPS, f"o{i}", incr, namespace=NS) for i in range(objects))
        )
        dt = time.perf_counter() - t0
        writes = counter(WRITER_WRITES, "configmaps", "update") - w0
        print(
            f"writer, no contention (informer copy, PUT only): {writes:.0f} writes in"
            f" {dt:.3f}s = {writes / dt:,.0f} writes/s"
        )
        await cache.stop()

        for writers, each in ((20, 50), (50, 20)):
            w0 = counter(WRITER_WRITES, "configmaps", "update")
            c0 = counter(WRITER_COALESCED, "configmaps")
            k0 = counter(WRITER_CONFLICTS, "configmaps")

            async def one_writer(each: int = each) -> None:
                for _ in range(each):
                    await writer.update(CONFIGMAPS, "o0", incr, namespace=NS)

            t0 = time.perf_counter()
            await asyncio.gather(*(one_writer() for _ in range(writers)))
            dt = time.perf_counter() - t0
            muts = writers * each
            writes = counter(WRITER_WRITES, "configmaps", "update") - w0
            print(
                f"writer, {writers} writers x {each} on one object: {muts} mutations in {dt:.3f}s"
                f" = {muts / dt:,.0f} mutations/s in {writes:.0f} writes"
                f" ({counter(WRITER_COALESCED, 'configmaps') - c0:.0f} coalesced,"
                f" {counter(WRITER_CONFLICTS, 'configmaps') - k0:.0f} conflicts)"
            )

        # contention from outside: another process keeps writing the same object
        stop = asyncio.Event()

        async def rogue() -> None:
            async with await connect(str(kc)) as r:
                while not stop.is_set():  # ~ a few hundred foreign writes/s
                    await r.patch(CONFIGMAPS, "o0", {"data": {"rogue": str(time.time())}}, NS)
                    await asyncio.sleep(0.002)

        rt = asyncio.create_task(rogue())
        w0 = counter(WRITER_WRITES, "configmaps", "update")
        k0 = counter(WRITER_CONFLICTS, "configmaps")
        t0 = time.perf_counter()
        for _ in range(300):
            await writer.update(CONFIGMAPS, "o0", incr, namespace=NS)
        dt = time.perf_counter() - t0
        stop.set()
        await rt
        print(
            f"writer vs rogue writer: 300 sequential updates in {dt:.3f}s = {300 / dt:,.0f}"
            f" writes/s, {counter(WRITER_CONFLICTS, 'configmaps') - k0:.0f} conflicts re-applied"
        )
    finally:
        await api.close()
        await srv.stop()
        tmp.cleanup()


def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(bench(args.objects))


if __name__ == "__main__":
    main()
