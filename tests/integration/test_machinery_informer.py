"""Story: 5,000 objects churn while the API keeps dropping watches and expiring history.

The informer's cache must end equal to the server's state, and a handler must have seen
the final state of every object (and the disappearance of every deleted one).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path

from eipctl.kube.client import Obj, ResourceRef, connect, object_key
from eipctl.kube.errors import NotFound
from eipctl.kube.informer import Informer
from eipctl.kube.metrics import WATCH_RELISTS, WATCH_RESTARTS
from kubemu import ApiServer

CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)
NS = "default"
OBJECTS = 5000


async def test_informer_survives_drops_and_gones_under_5000_object_churn(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    async with await connect(str(kubeconfig_path)) as api:
        inf = Informer(api, CONFIGMAPS, namespace=NS, backoff_initial=0.01)
        seen: dict[str, str] = {}

        class Handler:
            def on_add(self, obj: Obj) -> None:
                seen[object_key(obj)] = obj["metadata"]["resourceVersion"]

            def on_update(self, old: Obj, new: Obj) -> None:
                self.on_add(new)

            def on_delete(self, obj: Obj) -> None:
                del seen[object_key(obj)]

        inf.add_handler(Handler())
        restarts0 = WATCH_RESTARTS.labels("configmaps")._value.get()
        relists0 = WATCH_RELISTS.labels("configmaps")._value.get()
        inf.start()
        stop = asyncio.Event()

        async def chaos() -> None:
            rnd = random.Random(11)
            n = 0
            while not stop.is_set():
                await asyncio.sleep(rnd.uniform(0.1, 0.4))
                n += 1
                if n % 3 == 0:
                    apiserver.faults.force_gone(1)
                apiserver.faults.drop_watches()

        sem = asyncio.Semaphore(16)

        async def change(i: int, rnd: random.Random) -> None:
            name = f"o{i}"
            async with sem:
                await api.create(CONFIGMAPS, {"metadata": {"name": name, "namespace": NS}})
                if rnd.random() < 0.3:
                    await api.patch(CONFIGMAPS, name, {"data": {"v": str(i)}}, NS)
                if rnd.random() < 0.1:
                    with contextlib.suppress(NotFound):
                        await api.delete(CONFIGMAPS, name, NS)

        chaos_task = asyncio.create_task(chaos())
        try:
            async with asyncio.timeout(10):
                await inf.wait_synced()
            rnd = random.Random(5)
            async with asyncio.timeout(240):
                await asyncio.gather(*(change(i, rnd) for i in range(OBJECTS)))
            stop.set()
            await chaos_task
            lst = await api.list(CONFIGMAPS, NS)
            want = {object_key(o): o["metadata"]["resourceVersion"] for o in lst.items}
            assert len(want) > OBJECTS * 0.8

            def cached() -> dict[str, str]:
                return {object_key(o): o["metadata"]["resourceVersion"] for o in inf.objects()}

            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    while cached() != want:
                        await asyncio.sleep(0.05)
            got = cached()
            diff = {k: (got.get(k), want.get(k)) for k in got.keys() | want.keys()}
            diff = {k: v for k, v in diff.items() if v[0] != v[1]}
            assert not diff, (
                f"{len(diff)} differ (cache rv, server rv), e.g. {sorted(diff.items())[:5]};"
                f" informer rv={inf.resource_version} server list rv={lst.resource_version}"
            )
            assert seen == want
            assert WATCH_RESTARTS.labels("configmaps")._value.get() > restarts0
            assert WATCH_RELISTS.labels("configmaps")._value.get() > relists0
        finally:
            stop.set()
            await asyncio.gather(chaos_task, return_exceptions=True)
            await inf.stop()
