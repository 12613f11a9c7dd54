"""Test bed for the scheduler: the API emulator, simulated IpNodes, schedulers in tasks.

Simulated nodes are IpNodes whose heartbeat counter a background task bumps through the
emulator's store (as a controller would through the API); `kill` stops the bumping,
`revive` resumes it. `PlacementLog` watches the claims from the start and records every
change of spec.nodeName, so tests can assert "placed exactly once".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

from eipctl.core.liveness_wire import Keyring
from eipctl.core.naming import GROUP, claim_name_for
from eipctl.kube.client import IPCLAIMS, KubeApi, connect
from eipctl.kube.informer import Informer
from eipctl.runtime.config import SchedulerSettings
from eipctl.scheduler.process import Scheduler
from kubemu import ApiServer
from polling import eventually

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"


class SimNodes:
    """IpNodes with heartbeats, bumped every ``interval`` while alive."""

    def __init__(self, srv: ApiServer, interval: float = 0.05) -> None:
        self.srv = srv
        self.interval = interval
        self.alive: set[str] = set()
        self.last_beat: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.srv.store.create(
            GROUP,
            "ipnodes",
            {
                "apiVersion": "eipctl.io/v1alpha1",
                "kind": "IpNode",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": {"link": "eth0"},
            },
        )
        self.alive.add(name)
        self._beat(name)
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def kill(self, name: str) -> None:
        self.alive.discard(name)

    def revive(self, name: str) -> None:
        self.alive.add(name)
        self._beat(name)

    def _beat(self, name: str) -> None:
        obj = self.srv.store.get(GROUP, "ipnodes", name)
        status = obj.setdefault("status", {})
        status["heartbeat"] = int(status.get("heartbeat") or 0) + 1
        self.srv.store.update(GROUP, "ipnodes", obj, status=True)
        self.last_beat[name] = asyncio.get_running_loop().time()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            for name in sorted(self.alive):
                self._beat(name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def make_claim(ip: str, pool: str | None = None, node: str = "") -> dict[str, Any]:
    labels = {"eipctl.io/pool": pool} if pool else {}
    spec: dict[str, Any] = {"ip": ip, "prefixLength": 32}
    if node:
        spec["nodeName"] = node
        labels["eipctl.io/node"] = node
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaim",
        "metadata": {"name": claim_name_for(ip), "labels": labels},
        "spec": spec,
    }


def add_pool(srv: ApiServer, name: str, cidr: str, **spec: Any) -> None:
    """An IpClaimPool (``spec`` in camelCase, e.g. ``placement="all"``)."""
    srv.store.create(
        GROUP,
        "ipclaimpools",
        {
            "apiVersion": "eipctl.io/v1alpha1",
            "kind": "IpClaimPool",
            "metadata": {"name": name},
            "spec": {"cidr": cidr, **spec},
        },
    )


def set_pool(srv: ApiServer, name: str, **spec: Any) -> None:
    """Change fields of a pool's spec (as `kubectl patch` would)."""
    srv.store.patch(GROUP, "ipclaimpools", name, {"spec": spec})


def add_claims(srv: ApiServer, n: int, pool: str | None = None, base: int = 0) -> list[str]:
    names = []
    for i in range(base, base + n):
        ip = f"198.51.{100 + i // 250}.{1 + i % 250}"
        srv.store.create(GROUP, "ipclaims", make_claim(ip, pool))
        names.append(claim_name_for(ip))
    return names


def placements(srv: ApiServer) -> dict[str, str]:
    """claim name -> spec.nodeName ("" when unplaced), straight from the store."""
    return {
        c["metadata"]["name"]: (c.get("spec") or {}).get("nodeName") or ""
        for c in srv.store.list(GROUP, "ipclaims")
    }


def load(srv: ApiServer) -> Counter[str]:
    return Counter(n for n in placements(srv).values() if n)


class PlacementLog:
    """Every nodeName change of every claim, as seen through a watch from the start."""

    def __init__(self, api: KubeApi) -> None:
        self.changes: dict[str, list[str]] = {}
        self.informer = Informer(api, IPCLAIMS)
        self.informer.add_handler(self)

    def _record(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        node = (obj.get("spec") or {}).get("nodeName") or ""
        history = self.changes.setdefault(name, [""])
        if history[-1] != node:
            history.append(node)

    def on_add(self, obj: dict[str, Any]) -> None:
        self._record(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._record(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        pass

    async def caught_up(self, srv: ApiServer) -> None:
        """Until the log has seen every claim's current node (the watch lags the store)."""
        final = placements(srv)
        await eventually(
            lambda: all(self.changes.get(n, [""])[-1] == node for n, node in final.items()),
            what="the placement log caught up",
        )

    def moves(self, name: str) -> int:
        """How many times the claim's node changed (1 = placed once)."""
        return len(self.changes.get(name, [""])) - 1


class ClaimEvents:
    """Every claim event in the order one watch delivers it (resourceVersion order):
    ``(type, name, spec.nodeName, marked for all nodes)``, type ADDED, MODIFIED or DELETED."""

    def __init__(self, api: KubeApi) -> None:
        self.events: list[tuple[str, str, str, bool]] = []
        self.informer = Informer(api, IPCLAIMS)
        self.informer.add_handler(self)

    def _record(self, type_: str, obj: dict[str, Any]) -> None:
        labels = obj["metadata"].get("labels") or {}
        node = (obj.get("spec") or {}).get("nodeName") or ""
        marked = labels.get("eipctl.io/placement") == "all"
        self.events.append((type_, obj["metadata"]["name"], node, marked))

    def on_add(self, obj: dict[str, Any]) -> None:
        self._record("ADDED", obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._record("MODIFIED", new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._record("DELETED", obj)

    def first(self, type_: str, name: str, node: str | None = None) -> int:
        """Index of the first such event (``node``: with that spec.nodeName); -1 if none."""
        for i, (t, n, on, _) in enumerate(self.events):
            if t == type_ and n == name and (node is None or on == node):
                return i
        return -1


_Log = TypeVar("_Log", "ClaimEvents", "PlacementLog")


@contextlib.asynccontextmanager
async def _synced(make: Callable[[KubeApi], _Log], kubeconfig: Path) -> AsyncIterator[_Log]:
    """A log built by `make` on a client of its own, its informer synced; both closed
    afterwards."""
    api = await connect(str(kubeconfig))
    log = make(api)
    log.informer.start()
    try:
        await log.informer.wait_synced()
        yield log
    finally:
        await log.informer.stop()
        await api.close()


def claim_events(kubeconfig: Path) -> contextlib.AbstractAsyncContextManager[ClaimEvents]:
    """A synced `ClaimEvents` (the events of the initial list are ADDED)."""
    return _synced(ClaimEvents, kubeconfig)


def placement_log(kubeconfig: Path) -> contextlib.AbstractAsyncContextManager[PlacementLog]:
    """A synced `PlacementLog`."""
    return _synced(PlacementLog, kubeconfig)


def settings(**overrides: Any) -> SchedulerSettings:
    base = SchedulerSettings(
        identity="sched-a",
        lease_namespace="default",
        liveness_timeout=0.5,
        lease_duration=1.0,
        renew_deadline=0.8,
        retry_period=0.1,
        orphan_grace_period=60.0,
        log_level="warning",
    )
    return dataclasses.replace(base, **overrides)


class Running:
    """A Scheduler replica running in a task, with its own clients (work and Lease)."""

    def __init__(self, scheduler: Scheduler, *apis: KubeApi) -> None:
        self.scheduler = scheduler
        self.apis = apis
        self.stop_event = asyncio.Event()
        self.task = asyncio.create_task(scheduler.run(stop=self.stop_event))

    @property
    def leading(self) -> bool:
        return self.scheduler.is_leader

    async def stop(self) -> None:
        self.stop_event.set()
        try:
            async with asyncio.timeout(10):
                await self.task
        finally:
            for api in self.apis:
                await api.close()

    async def crash(self) -> None:
        """Die without releasing anything (cancel; the Lease is not released)."""
        if self.scheduler.elector is not None:
            self.scheduler.elector.config.release_on_stop = False
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        for api in self.apis:
            await api.close()


async def start_replica(
    kubeconfig: Path, keyring: Keyring | None = None, **overrides: Any
) -> Running:
    api = await connect(str(kubeconfig))
    lease_api = await connect(str(kubeconfig))
    scheduler = Scheduler(api, settings(**overrides), lease_api=lease_api, keyring=keyring)
    return Running(scheduler, api, lease_api)


@contextlib.asynccontextmanager
async def scheduler(
    kubeconfig: Path, keyring: Keyring | None = None, **overrides: Any
) -> AsyncIterator[Running]:
    running = await start_replica(kubeconfig, keyring, **overrides)
    try:
        yield running
    finally:
        if not running.task.done():
            await running.stop()
