"""Placement against the API emulator with simulated IpNodes: spread, death, return, policies."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scheduler_harness import (
    GROUP,
    SimNodes,
    add_claims,
    load,
    placement_log,
    placements,
    scheduler,
)

from kubemu import ApiServer
from polling import eventually


def claim(srv: ApiServer, name: str) -> dict:
    return srv.store.get(GROUP, "ipclaims", name)


def all_placed(srv: ApiServer) -> bool:
    return all(placements(srv).values())


async def test_spread_places_every_claim_evenly(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(4):
        nodes.add(f"node-{i}")
    names = add_claims(srv, 42)
    async with scheduler(kubeconfig):
        await eventually(lambda: all_placed(srv), what="every claim placed")
        counts = load(srv)
        assert sorted(counts.values()) == [10, 10, 11, 11]
        for name in names:
            obj = claim(srv, name)
            assert obj["metadata"]["labels"]["eipctl.io/node"] == obj["spec"]["nodeName"]
        await eventually(
            lambda: all(claim(srv, n).get("status", {}).get("phase") == "Scheduled" for n in names),
            what="phase Scheduled",
        )
        cond = claim(srv, names[0])["status"]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Scheduled", "True", "Placed")


async def test_node_death_moves_exactly_its_claims(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(4):
        nodes.add(f"node-{i}")
    add_claims(srv, 40)
    async with scheduler(kubeconfig, liveness_timeout=0.5) as running:
        await eventually(lambda: all_placed(srv))
        before = placements(srv)
        victims = {n for n, node in before.items() if node == "node-1"}
        assert len(victims) == 10
        loop = asyncio.get_running_loop()
        nodes.kill("node-1")
        killed_at = nodes.last_beat["node-1"]
        await eventually(
            lambda: not any(node == "node-1" for node in placements(srv).values()),
            what="node-1's claims moved",
        )
        moved_after = loop.time() - killed_at
        assert moved_after >= 0.5  # not before the node timeout
        assert running.scheduler.placer is not None
        assert running.scheduler.placer.failovers == 1  # its claims alone, ahead of a pass
        after = placements(srv)
        changed = {n for n in before if before[n] != after[n]}
        assert changed == victims
        assert sorted(load(srv).values()) == [13, 13, 14]
        assert not running.scheduler.liveness.is_live("node-1", loop.time())
        first = sorted(victims)[0]
        await eventually(
            lambda: (
                "node node-1 is dead" in claim(srv, first)["status"]["conditions"][0]["message"]
            ),
            what="condition says why",
        )
        assert claim(srv, first)["status"]["phase"] == "Scheduled"


async def test_node_return_moves_nothing(srv: ApiServer, kubeconfig: Path, nodes: SimNodes) -> None:
    for i in range(3):
        nodes.add(f"node-{i}")
    add_claims(srv, 12)
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        await eventually(lambda: all_placed(srv))
        nodes.kill("node-0")
        await eventually(lambda: "node-0" not in load(srv), what="node-0 emptied")
        settled = placements(srv)
        sched = running.scheduler
        passes = sched.placement_passes
        nodes.revive("node-0")
        # the return triggers a placement pass; once it has run, nothing has moved
        await eventually(lambda: sched.placement_passes > passes, what="a pass after the return")
        assert placements(srv) == settled
        # the returned node is eligible again: new claims go to it first (fewest claims)
        new = add_claims(srv, 2, base=100)
        await eventually(lambda: all_placed(srv))
        assert {placements(srv)[n] for n in new} == {"node-0"}


async def test_single_policy_keeps_everything_on_one_node(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(3):
        nodes.add(f"node-{i}")
    add_claims(srv, 15)
    async with scheduler(kubeconfig, policy="single", liveness_timeout=0.3):
        await eventually(lambda: all_placed(srv))
        assert set(load(srv)) == {"node-0"}
        nodes.kill("node-0")
        await eventually(lambda: "node-0" not in load(srv))
        await eventually(lambda: all_placed(srv))
        assert list(load(srv).values()) == [15]


async def test_all_policy_marks_claims_for_every_node(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(2):
        nodes.add(f"node-{i}")
    names = add_claims(srv, 5)
    async with scheduler(kubeconfig, policy="all", liveness_timeout=0.3) as running:

        def marked() -> bool:
            objs = [claim(srv, n) for n in names]
            return all(
                o["metadata"]["labels"].get("eipctl.io/placement") == "all"
                and o.get("status", {}).get("phase") == "Scheduled"
                for o in objs
            )

        await eventually(marked, what="claims marked for all nodes")
        for n in names:
            obj = claim(srv, n)
            assert "nodeName" not in obj["spec"]
            assert "eipctl.io/node" not in obj["metadata"]["labels"]
            assert obj["status"]["conditions"][0]["reason"] == "AllNodes"

        def per_node() -> dict[str, str]:
            return {n: node for n, node in placements(srv).items() if "." in n}

        # one per-node claim per IP and node, which the controllers hold as their own
        want = {f"{n}.node-{i}": f"node-{i}" for n in names for i in range(2)}
        await eventually(lambda: per_node() == want, what="per-node claims")
        copy = claim(srv, f"{names[0]}.node-1")
        assert copy["spec"]["nodeBound"] is True
        assert copy["spec"]["ip"] == claim(srv, names[0])["spec"]["ip"]
        assert copy["metadata"]["labels"]["eipctl.io/node"] == "node-1"
        assert copy["metadata"]["ownerReferences"][0]["name"] == names[0]
        await eventually(
            lambda: claim(srv, f"{names[0]}.node-1").get("status", {}).get("phase") == "Scheduled"
        )
        # a dead node keeps its copies (nothing to rewrite when it returns); nothing moves
        sched = running.scheduler
        passes = sched.placement_passes
        nodes.kill("node-0")
        await eventually(lambda: sched.placement_passes > passes, what="a pass after the death")
        assert per_node() == want
        assert all(not node for n, node in placements(srv).items() if "." not in n)
        # a node that joins gets copies; one that leaves loses them
        nodes.add("node-2")
        srv.store.delete(GROUP, "ipnodes", "node-0")
        want = {f"{n}.node-{i}": f"node-{i}" for n in names for i in (1, 2)}
        await eventually(lambda: per_node() == want, what="copies follow the nodes")
        # an IP that goes takes its copies with it
        srv.store.delete(GROUP, "ipclaims", names[0])
        want = {k: v for k, v in want.items() if not k.startswith(names[0] + ".")}
        await eventually(lambda: per_node() == want, what="copies of a deleted claim removed")


async def test_pool_node_selector_is_honoured(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    srv.store.create(
        GROUP,
        "ipclaimpools",
        {
            "apiVersion": "eipctl.io/v1alpha1",
            "kind": "IpClaimPool",
            "metadata": {"name": "rack-a"},
            "spec": {"cidr": "198.51.100.0/24", "nodeSelector": {"matchLabels": {"rack": "a"}}},
        },
    )
    nodes.add("a-1", {"rack": "a"})
    nodes.add("a-2", {"rack": "a"})
    nodes.add("b-1", {"rack": "b"})
    nodes.add("b-2", {"rack": "b"})  # 3 of 5 still heard once two die: deaths may be
    nodes.add("b-3", {"rack": "b"})  # declared (core.outage: half the nodes heard)
    add_claims(srv, 6, pool="rack-a")
    async with scheduler(kubeconfig, liveness_timeout=0.3):
        await eventually(lambda: all_placed(srv))
        assert set(load(srv)) == {"a-1", "a-2"}
        nodes.kill("a-1")
        nodes.kill("a-2")
        # no live eligible node: claims stay put (b-* are live but not admitted) and say so
        await eventually(
            lambda: all(
                (c.get("status", {}).get("conditions") or [{}])[0].get("reason") == "NoLiveNode"
                for c in srv.store.list(GROUP, "ipclaims")
            ),
            what="NoLiveNode reported",
        )
        assert set(load(srv)) == {"a-1", "a-2"}
        nodes.revive("a-2")
        await eventually(lambda: set(load(srv)) == {"a-2"}, what="all on the revived a-2")


async def test_claims_are_placed_once(srv: ApiServer, kubeconfig: Path, nodes: SimNodes) -> None:
    for i in range(5):
        nodes.add(f"node-{i}")
    names = add_claims(srv, 300)
    async with placement_log(kubeconfig) as log, scheduler(kubeconfig):
        await eventually(lambda: all_placed(srv), timeout=30)
        await eventually(lambda: all(log.moves(n) == 1 for n in names), timeout=5)
        await log.caught_up(srv)
        assert max(log.moves(n) for n in names) == 1


async def test_stale_heartbeat_view_moves_nothing(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(4):
        nodes.add(f"node-{i}")
    add_claims(srv, 20)
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        await eventually(lambda: all_placed(srv))
        settled = placements(srv)
        sched = running.scheduler
        # the IpNode watch goes quiet (a hung stream) while the nodes are fine
        await sched.nodes.stop()
        await eventually(
            lambda: len(sched.liveness.suspects(sched.now())) == 4,
            what="every node silent, judged a stale view",
        )
        assert sched.liveness.live(sched.now()) == {f"node-{i}" for i in range(4)}
        sched.nodes.start()
        await eventually(lambda: not sched.liveness.suspects(sched.now()), what="flowing again")
        # a real death is still seen once the view is current again
        nodes.kill("node-2")
        await eventually(lambda: "node-2" not in load(srv), what="node-2 emptied")
        after = placements(srv)
        assert {n for n in settled if settled[n] != after[n]} == {
            n for n, node in settled.items() if node == "node-2"
        }


async def test_rebalance_evens_out_after_joins_within_its_budget(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    nodes.add("node-1")
    add_claims(srv, 20)
    async with (
        placement_log(kubeconfig) as log,
        scheduler(kubeconfig, rebalance=True, rebalance_interval=0.4, rebalance_max_moves=2),
    ):
        await eventually(lambda: all_placed(srv))
        assert sorted(load(srv).values()) == [10, 10]
        loop = asyncio.get_running_loop()
        joined = loop.time()
        nodes.add("node-2")
        nodes.add("node-3")
        await eventually(
            lambda: sorted(load(srv).values()) == [5, 5, 5, 5],
            timeout=15,
            what="even after rebalancing",
        )
        took = loop.time() - joined
        await log.caught_up(srv)
        rebalanced = sum(log.moves(n) - 1 for n in log.changes)
        assert rebalanced == 10  # exactly the moves needed, none back and forth
        # at most 2 moves per 0.4 s interval: 10 moves need at least 4 intervals
        assert took >= 4 * 0.4 - 0.05


async def test_node_death_during_a_large_batch_is_handled_at_once(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(6):
        nodes.add(f"node-{i}")
    names = add_claims(srv, 600)
    async with placement_log(kubeconfig) as log, scheduler(kubeconfig, liveness_timeout=0.3):
        await eventually(
            lambda: sum(1 for n in placements(srv).values() if n) >= 60,
            timeout=20,
            step=0.002,
        )
        nodes.kill("node-3")
        loop = asyncio.get_running_loop()
        dead_at = nodes.last_beat["node-3"] + 0.3
        await eventually(lambda: all_placed(srv), timeout=60)
        await eventually(lambda: "node-3" not in load(srv), timeout=10)
        emptied = loop.time()
        counts = load(srv)
        assert max(counts.values()) - min(counts.values()) <= 1
        await log.caught_up(srv)
        odd = {n: log.changes[n] for n in names if log.moves(n) not in (1, 2)}
        assert not odd
        odd = {n: log.changes[n] for n in names if log.changes[n][1:].count("node-3") > 1}
        assert not odd
        assert emptied - dead_at < 30
