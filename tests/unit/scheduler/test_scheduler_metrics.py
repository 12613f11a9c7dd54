"""The scheduler's metrics, read back from REGISTRY: claims by phase, heartbeat ages, failover
durations and the shared leader gauge."""

from __future__ import annotations

from pathlib import Path

from scheduler_harness import GROUP, SimNodes, add_claims, placements, scheduler

from eipctl.allocator import metrics as allocator_metrics
from eipctl.core.claims import phase_of
from eipctl.core.fields import Obj
from eipctl.kube import metrics as kube_metrics
from eipctl.metrics import REGISTRY
from eipctl.scheduler import metrics
from eipctl.scheduler.keys import Pass
from kubemu import ApiServer
from polling import eventually


def sample(name: str, labels: dict[str, str] | None = None) -> float | None:
    return REGISTRY.get_sample_value(name, labels or {})


def test_claim_phases_count_pending_for_no_status_and_zero_emptied_phases() -> None:
    try:
        claims: list[Obj] = [
            {},
            {"status": {}},
            {"status": {"phase": "Bound"}},
            {"status": {"phase": "Bound"}},
        ]
        metrics.set_claim_phases(phase_of(c) for c in claims)
        assert sample("eipctl_claims", {"phase": "Pending"}) == 2
        assert sample("eipctl_claims", {"phase": "Bound"}) == 2
        metrics.set_claim_phases(["Scheduled"])
        assert sample("eipctl_claims", {"phase": "Scheduled"}) == 1
        assert sample("eipctl_claims", {"phase": "Bound"}) == 0
        assert sample("eipctl_claims", {"phase": "Pending"}) == 0
    finally:
        metrics.clear_claim_phases()
    assert sample("eipctl_claims", {"phase": "Scheduled"}) is None


def test_leader_is_one_metric_shared_by_component() -> None:
    # a second "eipctl_leader" on REGISTRY would have failed at import (duplicate series)
    kube_metrics.LEADER.labels(allocator_metrics.COMPONENT).set(1)
    kube_metrics.LEADER.labels(metrics.COMPONENT).set(0)
    assert sample("eipctl_leader", {"component": "allocator"}) == 1
    assert sample("eipctl_leader", {"component": "scheduler"}) == 0
    kube_metrics.LEADER.labels(allocator_metrics.COMPONENT).set(0)


async def test_scheduler_metrics_follow_placement_death_and_deletion(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for i in range(3):
        nodes.add(f"mnode-{i}")
    names = add_claims(srv, 9)
    failovers_before = sample("eipctl_failover_duration_seconds_count") or 0.0
    leader = {"component": "scheduler"}
    async with scheduler(kubeconfig, liveness_timeout=0.5) as running:
        await eventually(lambda: all(placements(srv).values()), what="every claim placed")
        await eventually(lambda: sample("eipctl_leader", leader) == 1, what="leader gauge")
        sched = running.scheduler

        # claims by phase: the pass after the Scheduled writes counts them
        def scheduled() -> bool:
            sched.manager.enqueue(Pass.PLACE)
            return sample("eipctl_claims", {"phase": "Scheduled"}) == len(names)

        await eventually(scheduled, what="eipctl_claims{phase=Scheduled}")

        # heartbeat age per node, from the liveness loop
        await eventually(
            lambda: all(
                sample("eipctl_node_silence_seconds", {"node": f"mnode-{i}"}) is not None
                for i in range(3)
            ),
            what="silence series",
        )

        # a death: each of its claims' moves is one failover observation
        victims = [n for n, node in placements(srv).items() if node == "mnode-1"]
        assert victims
        nodes.kill("mnode-1")
        await eventually(
            lambda: "mnode-1" not in placements(srv).values(), what="mnode-1's claims moved"
        )
        await eventually(
            lambda: (
                (sample("eipctl_failover_duration_seconds_count") or 0.0) - failovers_before
                == len(victims)
            ),
            what="one failover observation per claim moved",
        )
        assert "mnode-1" in sched.dead_since
        age = sample("eipctl_node_silence_seconds", {"node": "mnode-1"})
        assert age is not None and age >= 0.5

        # a deleted IpNode loses its series
        nodes.kill("mnode-2")
        srv.store.delete(GROUP, "ipnodes", "mnode-2")
        await eventually(
            lambda: sample("eipctl_node_silence_seconds", {"node": "mnode-2"}) is None,
            what="series removed with the IpNode",
        )
        assert "mnode-2" not in sched.dead_since
    assert sample("eipctl_leader", leader) == 0
    assert sample("eipctl_claims", {"phase": "Scheduled"}) is None  # only the leader publishes
