"""A placement policy per pool (``spec.placement``) against the API emulator: mixed pools,
``""`` following --policy, and pools switching policy at runtime, make before break."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from scheduler_harness import (
    GROUP,
    ClaimEvents,
    SimNodes,
    add_claims,
    add_pool,
    claim_events,
    placements,
    scheduler,
    set_pool,
)

from kubemu import ApiServer
from polling import eventually

L2_CIDR = "198.51.100.0/24"  # add_claims(base=0..249)
BGP_CIDR = "198.51.101.0/24"  # add_claims(base=250..)


def claim(srv: ApiServer, name: str) -> dict[str, Any]:
    return srv.store.get(GROUP, "ipclaims", name)


def copies(srv: ApiServer) -> dict[str, str]:
    """Per-node claims: name -> node."""
    return {n: node for n, node in placements(srv).items() if "." in n}


def reason(obj: dict[str, Any]) -> str:
    """The reason of the claim's Scheduled condition."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Scheduled":
            return str(condition.get("reason"))
    return ""


def load(srv: ApiServer) -> Counter[str]:
    """Claims per node, per-node claims left out."""
    return Counter(node for n, node in placements(srv).items() if node and "." not in n)


def marked(srv: ApiServer, names: list[str]) -> bool:
    """Every claim marked for all nodes, on none, and Scheduled so (AllNodes)."""
    for name in names:
        obj = claim(srv, name)
        labels = obj["metadata"].get("labels") or {}
        if (
            labels.get("eipctl.io/placement") != "all"
            or "nodeName" in obj["spec"]
            or "eipctl.io/node" in labels
            or (obj.get("status") or {}).get("phase") != "Scheduled"
            or reason(obj) != "AllNodes"
        ):
            return False
    return True


def placed(srv: ApiServer, names: list[str]) -> bool:
    """Every claim on one node, not marked, Scheduled there (Placed)."""
    for name in names:
        obj = claim(srv, name)
        labels = obj["metadata"].get("labels") or {}
        node = obj["spec"].get("nodeName")
        if (
            not node
            or labels.get("eipctl.io/node") != node
            or "eipctl.io/placement" in labels
            or (obj.get("status") or {}).get("phase") != "Scheduled"
            or reason(obj) != "Placed"
        ):
            return False
    return True


def everywhere(names: list[str], nodes: list[str]) -> dict[str, str]:
    return {f"{n}.{node}": node for n in names for node in nodes}


async def test_mixed_pools_spread_and_all(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "l2", L2_CIDR)  # placement "": --policy (spread)
    add_pool(srv, "bgp", BGP_CIDR, placement="all")
    hosts = [f"node-{i}" for i in range(3)]
    for host in hosts:
        nodes.add(host)
    l2 = add_claims(srv, 6, pool="l2")
    bgp = add_claims(srv, 2, pool="bgp", base=250)
    async with scheduler(kubeconfig, policy="spread"):
        await eventually(lambda: placed(srv, l2), what="the l2 pool's claims placed")
        await eventually(lambda: marked(srv, bgp), what="the bgp pool's claims marked")
        await eventually(lambda: copies(srv) == everywhere(bgp, hosts), what="copies of bgp")
        # spread over every node, the marked claims weigh on none
        assert sorted(load(srv).values()) == [2, 2, 2]
        condition = claim(srv, bgp[0])["status"]["conditions"][0]
        assert (condition["reason"], condition["message"]) == (
            "AllNodes",
            "policy all: held by every node its pool admits",
        )


async def test_a_pool_without_placement_follows_the_policy_flag(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "dflt", L2_CIDR, placement="")
    add_pool(srv, "l2", BGP_CIDR, placement="spread")
    hosts = ["node-0", "node-1"]
    for host in hosts:
        nodes.add(host)
    dflt = add_claims(srv, 2, pool="dflt")
    unpooled = add_claims(srv, 1, base=10)
    l2 = add_claims(srv, 2, pool="l2", base=250)
    async with scheduler(kubeconfig, policy="all"):
        await eventually(lambda: marked(srv, dflt + unpooled), what="--policy all for them")
        await eventually(lambda: placed(srv, l2), what="the spread pool's claims placed")
        await eventually(
            lambda: copies(srv) == everywhere(dflt + unpooled, hosts), what="their copies only"
        )
        assert sorted(load(srv).values()) == [1, 1]


async def test_switching_a_pool_from_spread_to_all_copies_before_marking(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "p", L2_CIDR)
    hosts = [f"node-{i}" for i in range(3)]
    for host in hosts:
        nodes.add(host)
    names = add_claims(srv, 4, pool="p")
    async with scheduler(kubeconfig):
        await eventually(lambda: placed(srv, names), what="placed by spread")
        was = {n: node for n, node in placements(srv).items() if n in names}
        async with claim_events(kubeconfig) as log:
            set_pool(srv, "p", placement="all")
            await eventually(lambda: marked(srv, names), what="marked for all nodes")
            await eventually(lambda: copies(srv) == everywhere(names, hosts), what="copies")
            await eventually(lambda: _seen_marked(log, names), what="the watch saw the marks")
        for name, node in was.items():
            # the old holder's copy existed before the claim left that node: its controller
            # keeps the address on the link (the copy takes it over), no gap
            copy_added = log.first("ADDED", f"{name}.{node}")
            left = next(
                i
                for i, (t, n, on, _) in enumerate(log.events)
                if t == "MODIFIED" and n == name and not on
            )
            assert 0 <= copy_added < left, (name, log.events)
        assert not any(t == "DELETED" for t, *_ in log.events)


def _seen_marked(log: ClaimEvents, names: list[str]) -> bool:
    return all(any(n == name and m for _, n, _, m in log.events) for name in names)


async def test_switching_a_pool_from_all_to_spread_places_before_deleting_copies(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "p", L2_CIDR, placement="all")
    hosts = [f"node-{i}" for i in range(3)]
    for host in hosts:
        nodes.add(host)
    names = add_claims(srv, 3, pool="p")
    async with scheduler(kubeconfig):
        await eventually(lambda: marked(srv, names), what="marked for all nodes")
        await eventually(lambda: copies(srv) == everywhere(names, hosts), what="copies")
        async with claim_events(kubeconfig) as log:
            set_pool(srv, "p", placement="spread")
            await eventually(lambda: placed(srv, names), what="each on one node")
            await eventually(lambda: copies(srv) == {}, what="copies deleted")
            await eventually(
                lambda: sum(t == "DELETED" for t, *_ in log.events) == len(names) * len(hosts),
                what="the watch saw the deletes",
            )
        assert sorted(load(srv).values()) == [1, 1, 1]
        for name in names:
            on = next(i for i, (t, n, node, _) in enumerate(log.events) if n == name and t and node)
            deletes = [i for i, (t, n, *_) in enumerate(log.events) if t == "DELETED"]
            mine = [i for i in deletes if log.events[i][1].startswith(name + ".")]
            assert len(mine) == len(hosts)
            assert on < min(mine), (name, log.events)  # placed first, then the copies go
        message = claim(srv, names[0])["status"]["conditions"][0]["message"]
        assert message.endswith("(no longer policy all)")


async def test_leaving_all_with_no_live_node_keeps_the_copies(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "p", L2_CIDR, placement="all", nodeSelector={"matchLabels": {"rack": "a"}})
    nodes.add("a-1", {"rack": "a"})
    nodes.add("b-1", {"rack": "b"})  # live, not admitted: the view of the nodes is fine
    names = add_claims(srv, 2, pool="p")
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        sched = running.scheduler
        await eventually(lambda: marked(srv, names), what="marked")
        want = everywhere(names, ["a-1"])
        await eventually(lambda: copies(srv) == want, what="copies on a-1")
        nodes.kill("a-1")
        await eventually(lambda: not sched.liveness.is_live("a-1", sched.now()), what="a-1 dead")
        set_pool(srv, "p", placement="spread")

        def waiting() -> bool:
            return all(
                (claim(srv, n).get("status", {}).get("conditions") or [{}])[0].get("reason")
                == "NoLiveNode"
                for n in names
            )

        await eventually(waiting, what="NoLiveNode: the claims wait for a node")
        placer = sched.placer
        assert placer is not None
        await eventually(lambda: placer.in_flight == 0, what="the reports' writes done")
        await placer.reconcile()  # decides NoLiveNode again, and has nothing to write
        assert placer.in_flight == 0
        passes = sched.placement_passes
        await asyncio.sleep(0.5)
        assert sched.placement_passes - passes < 10  # no pass after pass while they wait
        assert copies(srv) == want  # the IP is kept where it was, for when a-1 is back
        assert all(not node for n, node in placements(srv).items() if n in names)
        async with claim_events(kubeconfig) as log:
            nodes.revive("a-1")
            await eventually(lambda: placed(srv, names), what="placed on the revived a-1")
            await eventually(lambda: copies(srv) == {}, what="then the copies go")
            await eventually(
                lambda: sum(t == "DELETED" for t, *_ in log.events) == len(names),
                what="the watch saw the deletes",
            )
        for name in names:
            assert 0 <= log.first("MODIFIED", name, "a-1") < log.first("DELETED", f"{name}.a-1")


async def test_rebalance_evens_out_a_spread_pool_under_policy_all(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    add_pool(srv, "l2", L2_CIDR, placement="spread")
    nodes.add("node-0")
    nodes.add("node-1")
    l2 = add_claims(srv, 4, pool="l2")
    rest = add_claims(srv, 2, base=10)  # unpooled: --policy all
    async with scheduler(
        kubeconfig, policy="all", rebalance=True, rebalance_interval=0.3, rebalance_max_moves=2
    ):
        await eventually(lambda: placed(srv, l2) and marked(srv, rest), what="settled")
        assert sorted(load(srv).values()) == [2, 2]
        nodes.add("node-2")
        nodes.add("node-3")
        await eventually(
            lambda: sorted(load(srv).values()) == [1, 1, 1, 1], what="the spread pool rebalanced"
        )
        assert marked(srv, rest)
