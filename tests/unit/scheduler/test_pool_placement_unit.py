"""A placement policy per pool, without an API: the pool's ``spec.placement`` as the scheduler
reads it, the per-node claims kept while a claim leaves policy ``all``, and the order of the
Placer's writes when a pool switches (stub caches; a writer that logs and stores)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from eipctl.core.claims import per_node_claim
from eipctl.core.fields import Mutation, Obj, name_of
from eipctl.core.placement import Cluster, Policies, Policy
from eipctl.kube.errors import AlreadyExists, NotFound
from eipctl.scheduler.per_node import per_node_changes
from eipctl.scheduler.placing import Placer
from eipctl.scheduler.view import PoolViews, policies_for, pool_view

# ---------------------------------------------------------------- the pool's placement


def pool(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def test_the_pool_placement_as_read() -> None:
    assert pool_view(pool("p", cidr="192.0.2.0/24", placement="all")).placement is Policy.ALL
    assert pool_view(pool("p", cidr="192.0.2.0/24", placement="single")).placement is (
        Policy.SINGLE
    )
    assert pool_view(pool("p", cidr="192.0.2.0/24", placement="spread")).placement is (
        Policy.SPREAD
    )
    for unset in ({}, {"placement": ""}, {"placement": None}):
        assert pool_view(pool("p", cidr="192.0.2.0/24", **unset)).placement is None
    # unreadable: the pool's claims follow --policy, the rest of the pool is still read
    for bad in ("everywhere", 3, ["all"]):
        view = pool_view(
            pool("p", cidr="192.0.2.0/24", placement=bad, nodeSelector={"matchLabels": {"a": "1"}})
        )
        assert view.placement is None
        assert view.pool is not None and view.admits_node({"a": "1"})
    # a broken cidr keeps the placement (like the nodeSelector)
    assert pool_view(pool("p", cidr="nonsense", placement="all")).placement is Policy.ALL


def test_policies_from_the_pools() -> None:
    views = PoolViews().build(
        [
            pool("bgp", cidr="192.0.2.0/24", placement="all"),
            pool("l2", cidr="198.51.100.0/24", placement=""),
            pool("odd", cidr="203.0.113.0/24", placement="bogus"),
        ]
    )
    policies = policies_for(views, Policy.SINGLE)
    assert policies == Policies(Policy.SINGLE, {"bgp": Policy.ALL})
    assert [policies.of(p) for p in ("bgp", "l2", "odd", "gone", None)] == [
        Policy.ALL,
        *[Policy.SINGLE] * 4,
    ]


# ---------------------------------------------------------------- per-node claims kept

NODES = frozenset({"n1", "n2", "n3"})


def base(name: str = "198-51-100-7", node: str = "", pool: str = "p") -> Obj:
    labels = {"eipctl.io/pool": pool}
    spec: Obj = {"ip": "198.51.100.7", "prefixLength": 32}
    if node:
        spec["nodeName"] = node
        labels["eipctl.io/node"] = node
    return {
        "metadata": {"name": name, "labels": labels, "uid": "u1", "resourceVersion": "1"},
        "spec": spec,
    }


def made(claim: Obj, *nodes: str) -> dict[str, Obj]:
    out = {}
    for node in nodes:
        body = per_node_claim(claim, node)
        assert body is not None
        body["metadata"]["resourceVersion"] = "1"
        out[name_of(body)] = body
    return out


def test_copies_of_a_claim_leaving_all_stay_until_it_is_placed() -> None:
    snapshot = Cluster(NODES, NODES, {"p": frozenset({"n1", "n2"})})
    claim = base()
    existing = made(claim, "n1", "n2", "n3")  # n3: the pool no longer admits it
    waiting = per_node_changes([], existing, snapshot, [claim])
    assert waiting.create == ()
    assert [name_of(o) for o in waiting.kept] == ["198-51-100-7.n1", "198-51-100-7.n2"]
    assert [name_of(o) for o in waiting.delete] == ["198-51-100-7.n3"]
    # placed (not in unplaced any more): every copy goes
    placed = per_node_changes([], existing, snapshot, [])
    assert placed.kept == ()
    assert len(placed.delete) == 3
    # a hand-made per-node claim is never deleted, kept or not
    handmade = base("198-51-100-7.n1", "n1")
    assert per_node_changes([], {name_of(handmade): handmade}, snapshot, []).delete == ()


# ---------------------------------------------------------------- the Placer's writes


class Stub:
    def __init__(self, objs: list[Obj] | None = None) -> None:
        self.objs = objs or []

    def objects(self) -> list[Obj]:
        return [copy.deepcopy(o) for o in self.objs]


class Live:
    timeout = 0.4

    def __init__(self, nodes: frozenset[str]) -> None:
        self.nodes = nodes

    def live(self, _now: float) -> frozenset[str]:
        return self.nodes

    def is_live(self, node: str, _now: float) -> bool:
        return node in self.nodes

    def api_stale(self) -> frozenset[str]:
        return frozenset()


class Writer:
    """Stores objects, logs each write as (verb, name), hands back what it stored."""

    def __init__(self, objs: list[Obj]) -> None:
        self.store = {name_of(o): copy.deepcopy(o) for o in objs}
        self.log: list[tuple[str, str]] = []
        self.rv = 100

    def _stored(self, name: str, obj: Obj) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.store[name] = obj
        return copy.deepcopy(obj)

    async def update(self, _ref: Any, name: str, mutate: Mutation, **_: Any) -> Obj:
        await asyncio.sleep(0)
        if name not in self.store:
            raise NotFound(name)
        obj = copy.deepcopy(self.store[name])
        mutate(obj)
        if obj == self.store[name]:
            return copy.deepcopy(obj)  # nothing changed: no write (as the real writer)
        self.log.append(("update", name))
        return self._stored(name, obj)

    async def update_status(self, ref: Any, name: str, mutate: Mutation, **kw: Any) -> Obj:
        return await self.update(ref, name, mutate, **kw)

    async def create(self, _ref: Any, obj: Obj) -> Obj:
        await asyncio.sleep(0)
        name = name_of(obj)
        if name in self.store:
            raise AlreadyExists(name)
        self.log.append(("create", name))
        return self._stored(name, copy.deepcopy(obj))

    async def delete(self, _ref: Any, name: str, **_: Any) -> bool:
        await asyncio.sleep(0)
        self.log.append(("delete", name))
        return self.store.pop(name, None) is not None


class Nobody:
    def tell(self, *_: Any, **__: Any) -> None:
        pass

    def placed(self, *_: Any) -> tuple[str, ...]:
        return ()

    def unplaceable(self, *_: Any) -> tuple[str, ...]:
        return ()


def placer(
    claims: Stub,
    pools: list[Obj],
    writer: Writer,
    kicks: list[float],
    live: frozenset[str] = NODES,
    labels: dict[str, dict[str, str]] | None = None,
) -> Placer:
    nodes = Stub(
        [{"metadata": {"name": n, "labels": (labels or {}).get(n, {})}} for n in sorted(NODES)]
    )
    return Placer(
        claims=claims,
        nodes=nodes,
        pools=Stub(pools),
        liveness=Live(live),  # type: ignore[arg-type]
        writer=writer,  # type: ignore[arg-type]
        recorder=Nobody(),
        services=Nobody(),
        policy="spread",
        clock=lambda: 0.0,
        kick=kicks.append,
    )


async def settle(p: Placer) -> None:
    for _ in range(1000):  # fakes answer at once: a few loop turns; a write that never ends
        if not p.in_flight:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{p.in_flight} writes still in flight after 1,000 loop turns")


async def test_placer_marks_only_once_the_old_holders_copy_is_cached() -> None:
    claim = base(node="n1")
    claims = Stub([claim])
    writer = Writer([claim])
    p = placer(claims, [pool("p", cidr="198.51.100.0/24", placement="all")], writer, [])
    await p.reconcile()
    await settle(p)
    # first the copies, the claim untouched (still on n1)
    assert sorted(writer.log) == [("create", f"{name_of(claim)}.{n}") for n in sorted(NODES)] + [
        ("update", f"{name_of(claim)}.{n}") for n in sorted(NODES)
    ]
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n1"
    writer.log.clear()
    await p.reconcile()  # the cache has not seen the copies yet: still no mark
    await settle(p)
    assert writer.log == []
    claims.objs = list(writer.store.values())  # the informer catches up
    await p.reconcile()
    await settle(p)
    assert writer.log == [("update", name_of(claim)), ("update", name_of(claim))]
    stored = writer.store[name_of(claim)]
    assert "nodeName" not in stored["spec"]
    assert stored["metadata"]["labels"]["eipctl.io/placement"] == "all"


async def test_placer_marks_a_claim_on_a_node_left_out_once_another_copy_is_cached() -> None:
    claim = base(node="n1")  # the pool admits n2 and n3 only
    claims = Stub([claim])
    writer = Writer([claim])
    all_ab = pool(
        "p", cidr="198.51.100.0/24", placement="all", nodeSelector={"matchLabels": {"r": "a"}}
    )
    rack_a = {"n2": {"r": "a"}, "n3": {"r": "a"}}
    p = placer(claims, [all_ab], writer, [], labels=rack_a)
    await p.reconcile()
    await settle(p)
    assert sorted(n for verb, n in writer.log if verb == "create") == [
        f"{name_of(claim)}.n2",
        f"{name_of(claim)}.n3",
    ]
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n1"
    writer.log.clear()
    claims.objs = [claim, writer.store[f"{name_of(claim)}.n3"]]  # one copy seen: enough
    await p.reconcile()
    await settle(p)
    assert ("update", name_of(claim)) in writer.log
    assert "nodeName" not in writer.store[name_of(claim)]["spec"]


async def test_placer_deletes_copies_only_after_the_placement_is_written() -> None:
    claim = base()
    claim["metadata"]["labels"]["eipctl.io/placement"] = "all"
    claim["status"] = {"phase": "Scheduled"}
    copies = made(claim, "n1", "n2", "n3")
    claims = Stub([claim, *copies.values()])
    writer = Writer([claim, *copies.values()])
    kicks: list[float] = []
    p = placer(claims, [pool("p", cidr="198.51.100.0/24", placement="spread")], writer, kicks)
    await p.reconcile()
    await settle(p)
    assert writer.log == [("update", name_of(claim)), ("update", name_of(claim))]
    assert writer.store[name_of(claim)]["spec"]["nodeName"] == "n1"
    assert kicks == [0.0]  # a pass follows the written placement (the copies wait for it)
    writer.log.clear()
    await p.reconcile()  # the cache still has it unplaced; the written copy is laid over it
    await settle(p)
    assert sorted(writer.log) == [("delete", name) for name in sorted(copies)]


async def test_placer_keeps_copies_while_no_live_node_may_hold_the_claim() -> None:
    claim = base()
    claim["metadata"]["labels"]["eipctl.io/placement"] = "all"
    copies = made(claim, "n1", "n2")
    writer = Writer([claim, *copies.values()])
    kicks: list[float] = []
    spread = pool(
        "p", cidr="198.51.100.0/24", placement="spread", nodeSelector={"matchLabels": {"r": "a"}}
    )
    rack_a = {"n1": {"r": "a"}, "n2": {"r": "a"}}  # both dead; n3 lives, not admitted
    claims = Stub([claim, *copies.values()])
    p = placer(claims, [spread], writer, kicks, live=frozenset({"n3"}), labels=rack_a)
    for _ in range(3):
        await p.reconcile()
        await settle(p)
    assert writer.log == [("update", name_of(claim))]  # NoLiveNode said once; no delete
    assert "nodeName" not in writer.store[name_of(claim)]["spec"]
    assert kicks == []  # and no pass after pass
