"""The machinery against the API emulator over real HTTP, with faults (runs in seconds)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

from eipctl.kube.client import KubeApi, Obj, connect, object_key
from eipctl.kube.errors import AlreadyExists, Conflict, NotFound
from eipctl.kube.informer import Informer
from eipctl.kube.metrics import WATCH_RELISTS, WATCH_RESTARTS, WRITER_CONFLICTS, WRITER_RETRIES
from eipctl.kube.writer import SerializedWriter, WriterSettings
from kubemu import ApiServer
from polling import eventually

from .emulator_helpers import CONFIGMAPS, NS, cm, persist, server_state


def incr(obj: Obj) -> None:
    obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)


async def test_twenty_writers_times_fifty_increments_survive_a_rogue_writer(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    async with (
        await connect(str(kubeconfig_path)) as api,
        await connect(str(kubeconfig_path)) as rogue_api,
    ):
        await api.create(CONFIGMAPS, cm("counter", n="0", rogue="0"))
        writer = SerializedWriter(api)
        conflicts0 = WRITER_CONFLICTS.labels("configmaps")._value.get()
        stop = asyncio.Event()
        rogue_last = 0

        async def rogue() -> None:  # a foreign process: GET + PUT another field, own retries
            nonlocal rogue_last
            k = 0
            while not stop.is_set():
                k += 1
                obj = await rogue_api.get(CONFIGMAPS, "counter", NS)
                obj["data"]["rogue"] = str(k)
                try:
                    await rogue_api.replace(CONFIGMAPS, obj)
                    rogue_last = k
                except Conflict:
                    pass
                await asyncio.sleep(0.002)

        async def one_writer() -> None:
            for _ in range(50):
                await writer.update(CONFIGMAPS, "counter", incr, namespace=NS)

        rogue_task = asyncio.create_task(rogue())
        async with asyncio.timeout(60):
            await asyncio.gather(*(one_writer() for _ in range(20)))
        stop.set()
        await rogue_task
        final = await api.get(CONFIGMAPS, "counter", NS)
        assert final["data"]["n"] == "1000"
        assert final["data"]["rogue"] == str(rogue_last) != "0"
        assert WRITER_CONFLICTS.labels("configmaps")._value.get() > conflicts0


async def test_informer_cache_converges_through_drops_and_gones(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    async with await connect(str(kubeconfig_path)) as api:
        inf = Informer(api, CONFIGMAPS, namespace=NS, backoff_initial=0.01)
        seen: dict[str, str | None] = {}

        class Handler:
            def on_add(self, obj: Obj) -> None:
                seen[object_key(obj)] = obj["metadata"]["resourceVersion"]

            on_update = lambda self, old, new: self.on_add(new)  # noqa: E731

            def on_delete(self, obj: Obj) -> None:
                seen.pop(object_key(obj), None)

        inf.add_handler(Handler())
        restarts0 = WATCH_RESTARTS.labels("configmaps")._value.get()
        relists0 = WATCH_RELISTS.labels("configmaps")._value.get()
        inf.start()
        try:
            async with asyncio.timeout(5):
                await inf.wait_synced()
            rnd = random.Random(3)
            for i in range(600):
                name = f"o{rnd.randrange(150)}"
                if rnd.random() < 0.15:
                    with contextlib.suppress(NotFound):
                        await api.delete(CONFIGMAPS, name, NS)
                else:
                    try:
                        await api.create(CONFIGMAPS, cm(name, v=str(i)))
                    except AlreadyExists:
                        await api.patch(CONFIGMAPS, name, {"data": {"v": str(i)}}, NS)
                if i % 100 == 50:
                    apiserver.faults.drop_watches()
                if i % 200 == 120:
                    apiserver.faults.force_gone(1)
                    apiserver.faults.drop_watches()
            want = await server_state(api, CONFIGMAPS)
            await eventually(
                lambda: (
                    {object_key(o): o["metadata"]["resourceVersion"] for o in inf.objects()} == want
                )
            )
            assert seen == want
            assert WATCH_RESTARTS.labels("configmaps")._value.get() >= restarts0 + 5
            assert WATCH_RELISTS.labels("configmaps")._value.get() >= relists0 + 3
        finally:
            await inf.stop()


async def test_writes_and_watches_converge_with_twenty_percent_errors(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    async with await connect(str(kubeconfig_path)) as api:
        for i in range(5):
            await api.create(CONFIGMAPS, cm(f"c{i}", n="0"))
        inf = Informer(api, CONFIGMAPS, namespace=NS, backoff_initial=0.01)
        inf.start()
        writer = SerializedWriter(api, WriterSettings(max_retries=50, backoff_max=0.1))
        retries0 = WRITER_RETRIES.labels("configmaps")._value.get()
        apiserver.faults.error_rate = 0.2
        apiserver.faults.error_codes = (500, 503, 429)
        try:
            async with asyncio.timeout(60):
                await inf.wait_synced()

                async def bump(i: int) -> None:
                    for _ in range(20):
                        await writer.update(CONFIGMAPS, f"c{i % 5}", incr, namespace=NS)

                await asyncio.gather(*(bump(i) for i in range(10)))
            apiserver.faults.error_rate = 0.0
            want = await server_state(api, CONFIGMAPS)
            await eventually(
                lambda: (
                    {object_key(o): o["metadata"]["resourceVersion"] for o in inf.objects()} == want
                )
            )
            values = [
                (await persist(lambda i=i: api.get(CONFIGMAPS, f"c{i}", NS)))["data"]["n"]
                for i in range(5)
            ]
            assert values == ["40"] * 5
            assert WRITER_RETRIES.labels("configmaps")._value.get() > retries0
        finally:
            apiserver.faults.error_rate = 0.0
            await inf.stop()


async def test_kubeapi_verbs_on_a_crd_with_status(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    from eipctl.kube.client import IPCLAIMS

    await apiserver.load_crds_from_dir(Path(__file__).parents[3] / "deploy" / "crds")
    api: KubeApi
    async with await connect(str(kubeconfig_path)) as api:
        body: dict[str, Any] = {
            "metadata": {"name": "203-0-113-7", "labels": {"eipctl.io/node": "n1"}},
            "spec": {"ip": "203.0.113.7", "prefixLength": 32},
        }
        created = await api.create(IPCLAIMS, body)
        try:
            await api.create(IPCLAIMS, body)
            raise AssertionError("expected AlreadyExists")
        except AlreadyExists:
            pass
        w = SerializedWriter(api)

        def bound(o: Obj) -> None:
            o["status"] = {"phase": "Bound", "boundNode": "n1"}

        stored = await w.update_status(IPCLAIMS, "203-0-113-7", bound)
        assert stored["status"]["phase"] == "Bound"
        assert stored["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
        lst = await api.list(IPCLAIMS, label_selector="eipctl.io/node=n1")
        assert [o["metadata"]["name"] for o in lst.items] == ["203-0-113-7"]
        assert (await api.list(IPCLAIMS, label_selector="eipctl.io/node=n2")).items == []
        assert await w.delete(IPCLAIMS, "203-0-113-7") is True
        try:
            await api.get(IPCLAIMS, "203-0-113-7")
            raise AssertionError("expected NotFound")
        except NotFound:
            pass


async def test_label_selector_informer_sees_objects_enter_and_leave_its_scope(
    apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    async with await connect(str(kubeconfig_path)) as api:
        mine = {"metadata": {"name": "a", "namespace": NS, "labels": {"eipctl.io/node": "n1"}}}
        other = {"metadata": {"name": "b", "namespace": NS, "labels": {"eipctl.io/node": "n2"}}}
        await api.create(CONFIGMAPS, mine)
        await api.create(CONFIGMAPS, other)
        inf = Informer(api, CONFIGMAPS, namespace=NS, label_selector="eipctl.io/node=n1")
        deleted: list[str] = []
        inf.add_handler(
            type(
                "H",
                (),
                {
                    "on_add": lambda self, o: None,
                    "on_update": lambda self, o, n: None,
                    "on_delete": lambda self, o: deleted.append(object_key(o)),
                },
            )()
        )
        inf.start()
        try:
            async with asyncio.timeout(5):
                await inf.wait_synced()
            assert inf.keys() == ["default/a"]
            await api.patch(CONFIGMAPS, "b", {"metadata": {"labels": {"eipctl.io/node": "n1"}}}, NS)
            await eventually(lambda: sorted(inf.keys()) == ["default/a", "default/b"])
            await api.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"eipctl.io/node": "n3"}}}, NS)
            await eventually(lambda: inf.keys() == ["default/b"])
            assert deleted == ["default/a"]
        finally:
            await inf.stop()
