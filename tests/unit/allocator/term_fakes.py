"""Fakes for unit tests of one allocator term (`allocator.state`) and its pool reconciler.

A `Cluster` is the in-memory API (tests/unit/kube/kube_fakes.py) plus the allocator's caches
of it, filled by hand so a test says exactly what the watch has delivered. The caches answer
index lookups with the index functions the allocator gives its informers, as an informer
would; the term's queue and Event recorder record what they are handed. Holds no tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import ip_address
from typing import Any, cast

from kube.kube_fakes import FakeApi

from allocator.test_services import Cache
from eipctl.allocator.keys import AllocatorKey
from eipctl.allocator.state import CLAIM_INDEXERS, Caches, Term
from eipctl.core.allocation import AllocationBook
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import LABEL_ORIGIN, ORIGIN_ALL_NODES, ORIGIN_MANUAL, claim_name_for
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, SERVICES, Obj, ResourceRef, object_key
from eipctl.kube.events import EventRecorder
from eipctl.kube.informer import IndexFunc
from eipctl.kube.workqueue import WorkQueue
from eipctl.kube.writer import SerializedWriter, WriterSettings


class IndexedCache(Cache):
    """An informer stand-in (`test_services.Cache`) that also answers index lookups, with the
    index functions the allocator gives its informers."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        super().__init__()
        self.indexers = dict(indexers or {})

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for o in self.by_key.values() if value in self.indexers[index](o)]


class RecordingQueue:
    """Stands in for the term's WorkQueue: the keys added (a set: the queue folds repeats)
    and those added with a delay."""

    def __init__(self) -> None:
        self.added: set[AllocatorKey] = set()
        self.delayed: set[tuple[AllocatorKey, float]] = set()

    def add(self, key: AllocatorKey) -> None:
        self.added.add(key)

    def add_after(self, key: AllocatorKey, delay: float) -> None:
        self.delayed.add((key, delay))

    def take(self) -> set[AllocatorKey]:
        """The keys added since the last call (delayed ones apart)."""
        added, self.added = self.added, set()
        return added


class Posted:
    """Stands in for the EventRecorder: the Events posted, as (kind/name, type, reason,
    message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def emit(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        name = involved["metadata"]["name"]
        self.events.append((f"{involved.get('kind')}/{name}", type_, reason, message))

    def tell(self, involved: Obj, type_: str, reason: str, message: str, **_: object) -> None:
        """The Event `EventRecorder.tell` posts (its log line is tested in kube/)."""
        self.emit(involved, type_, reason, message)


class Cluster:
    """The in-memory API and the allocator's caches of it; `term` begins a leadership term."""

    def __init__(self, api: FakeApi | None = None) -> None:
        self.api = api or FakeApi()
        self.services = IndexedCache()
        self.claims = IndexedCache(CLAIM_INDEXERS)
        self.pools = IndexedCache()
        self.namespaces = IndexedCache()
        self.caches = Caches(*cast(Any, (self.services, self.claims, self.pools, self.namespaces)))
        self.queue = RecordingQueue()
        self.posted = Posted()

    def cache(self, ref: ResourceRef) -> IndexedCache:
        caches = {SERVICES: self.services, IPCLAIMS: self.claims, IPCLAIMPOOLS: self.pools}
        return caches.get(ref, self.namespaces)

    def add(self, ref: ResourceRef, obj: Obj, *, seen: bool = True) -> Obj:
        """Store `obj` in the API; `seen`: the allocator's watch has delivered it too."""
        stored = self.api.put(ref, obj)
        if seen:
            self.cache(ref).by_key[object_key(stored)] = stored
        return stored

    def remove(self, ref: ResourceRef, key: str) -> Obj:
        """Delete from the API and the cache; returns the object as the cache had it."""
        self.api.remove(ref, key)
        return self.cache(ref).by_key.pop(key)

    def stored(self, ref: ResourceRef, key: str) -> Obj:
        return self.api.objects[(ref.plural, key)]

    async def term(self, *, purge: bool = False, serve_unclassed: bool = False) -> Term:
        """A term, rebuilt from the caches as the allocator does when it starts leading."""
        term = self.new_term(purge=purge, serve_unclassed=serve_unclassed)
        await term.rebuild()
        return term

    def new_term(self, *, purge: bool = False, serve_unclassed: bool = False) -> Term:
        """A term before its rebuild."""
        return Term(
            caches=self.caches,
            book=AllocationBook(purge_on_pool_delete=purge, serve_unclassed=serve_unclassed),
            queue=cast(WorkQueue[AllocatorKey], self.queue),
            writer=SerializedWriter(self.api, WriterSettings(backoff_initial=0.001)),
            events=cast(EventRecorder, self.posted),
        )

    async def leading(self, *, purge: bool = False, waiting: tuple[str, ...] = ()) -> Term:
        """A term past its first pass (its keys taken), so the queue shows only what comes
        next; `waiting`: Services it knows to be waiting for space or a pool."""
        term = await self.term(purge=purge)
        term.waiting.update(waiting)
        self.queue.take()
        return term


# --- objects ---------------------------------------------------------------------------------
def pool(name: str, cidr: str, *, created: str = "2024-01-01T00:00:00Z", **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "creationTimestamp": created, "generation": 1},
        "spec": {"cidr": cidr, **spec},
    }


def service(name: str, namespace: str = "default", *, port: int = 80, **annotations: str) -> Obj:
    """A ClusterIP Service; `annotations` with ``_`` for ``-`` (external_ip="auto")."""
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {k.replace("_", "-"): v for k, v in annotations.items()},
        },
        "spec": {"type": "ClusterIP", "ports": [{"port": port, "protocol": "TCP"}]},
    }


def auto(name: str, namespace: str = "default", **annotations: str) -> Obj:
    """A Service that asks for an IP from any pool."""
    return service(name, namespace, external_ip="auto", **annotations)


def by_hand(name: str, ip: str) -> Obj:
    """A Service that carries ``ip`` without asking the allocator for it."""
    obj = service(name)
    obj["spec"]["externalIPs"] = [ip]
    return obj


def claim(ip: str, pool_name: str, *services: str, sharing_key: str = "") -> Obj:
    """The claim the allocator makes for `services` (the first one made it)."""
    obj = allocator_claim(
        ip_address(ip),
        pool=pool_name,
        prefix_length=None,
        service=services[0] if services else "",
        sharing_key=sharing_key,
    )
    obj["spec"]["services"] = list(services)
    return obj


def manual_claim(ip: str, pool_name: str, *services: str) -> Obj:
    """The scheduler's claim of an IP set by hand on `services` (origin ``manual``)."""
    obj = claim(ip, pool_name, *services)
    obj["metadata"]["labels"][LABEL_ORIGIN] = ORIGIN_MANUAL
    return obj


def per_node_copy(ip: str, pool_name: str, node: str) -> Obj:
    """The scheduler's copy of a claim for placement policy ``all`` (same IP and pool)."""
    obj = claim(ip, pool_name)
    obj["metadata"]["name"] = f"{claim_name_for(ip_address(ip))}.{node}"
    obj["metadata"]["labels"][LABEL_ORIGIN] = ORIGIN_ALL_NODES
    return obj


def namespace(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels}}


def deleting(obj: Obj) -> Obj:
    """`obj` with a deletionTimestamp (held by a finalizer)."""
    return {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2024-01-02T00:00:00Z"}}
