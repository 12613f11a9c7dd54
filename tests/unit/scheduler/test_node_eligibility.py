"""The IpNode condition Eligible (`scheduler.node_eligibility`), the exclusions the scheduler
reads off Nodes (`scheduler.view.exclusions`) and the Event wording of a planned move."""

from __future__ import annotations

import asyncio
from typing import Any

from eipctl.core.eligibility import EXCLUDE_LABEL, EXCLUDE_TAINT, Exclusion
from eipctl.core.fields import Mutation
from eipctl.core.ipnode import ELIGIBLE, REASON_ELIGIBLE
from eipctl.core.placement import Decision, Reason
from eipctl.kube.client import ResourceRef
from eipctl.scheduler.node_eligibility import NodeEligibility, carried, wanted
from eipctl.scheduler.service_events import placement_event
from eipctl.scheduler.view import cluster_for, exclusions


def ipnode(name: str, labels: dict[str, str] | None = None, cond: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "labels": labels or {}}, "status": {}}
    if cond is not None:
        obj["status"]["conditions"] = [
            {
                "type": ELIGIBLE,
                "status": cond[0],
                "reason": cond[1],
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    return obj


def kube_node(name: str, **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def test_exclusions_read_the_node_else_the_ipnode_labels() -> None:
    ipnodes = [
        ipnode("a"),
        ipnode("b", {EXCLUDE_LABEL: ""}),  # its Node lags behind: the Node is what counts
        ipnode("c", {EXCLUDE_LABEL: ""}),  # no Node in the cache: its copied labels
        ipnode("d"),
        ipnode("e"),
    ]
    nodes = [
        kube_node("a", unschedulable=True),
        kube_node("b"),
        kube_node("d", taints=[{"key": EXCLUDE_TAINT, "effect": "NoSchedule"}]),
        kube_node("e", labels={EXCLUDE_LABEL: "true"}),
        kube_node("zz", labels={EXCLUDE_LABEL: "true"}),  # no IpNode: not a node of ours
    ]
    assert exclusions(ipnodes, nodes, cordoned_excludes=False) == {
        "c": Exclusion.EXCLUDED,
        "d": Exclusion.TAINTED,
        "e": Exclusion.EXCLUDED,
    }
    got = exclusions(ipnodes, nodes, cordoned_excludes=True)
    assert got["a"] is Exclusion.CORDONED
    cluster = cluster_for(ipnodes, {}, frozenset({"a", "b"}), got)
    assert cluster.excluded == {
        "a": Reason.NODE_CORDONED,
        "c": Reason.NODE_EXCLUDED,
        "d": Reason.NODE_TAINTED,
        "e": Reason.NODE_EXCLUDED,
    }


def test_wanted_writes_only_transitions() -> None:
    assert wanted(None, None) is None  # never excluded: no condition, no write
    assert wanted(None, (True, REASON_ELIGIBLE)) is None
    assert wanted(None, (False, "NodeExcluded")) == (True, REASON_ELIGIBLE)
    assert wanted(Exclusion.EXCLUDED, None) == (False, "NodeExcluded")
    assert wanted(Exclusion.EXCLUDED, (False, "NodeExcluded")) is None
    assert wanted(Exclusion.CORDONED, (False, "NodeExcluded")) == (False, "NodeCordoned")


class FakeWriter:
    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes = nodes
        self.writes: list[str] = []

    async def update(
        self, ref: ResourceRef, name: str, mutate: Mutation, **kw: Any
    ) -> dict[str, Any]:
        assert kw["status"]
        self.writes.append(name)
        mutate(self.nodes[name])
        return self.nodes[name]


class Cache:
    def __init__(self, nodes: dict[str, dict[str, Any]]) -> None:
        self.nodes = nodes

    def objects(self) -> list[dict[str, Any]]:
        return list(self.nodes.values())


async def test_the_condition_follows_exclusions_with_one_write_per_transition() -> None:
    nodes = {n: ipnode(n) for n in ("a", "b")}
    writer = FakeWriter(nodes)
    kicks: list[float] = []
    el = NodeEligibility(Cache(nodes), writer, kick=kicks.append)

    assert el.sync({}) == 0  # steady state of a cluster without maintenance: nothing
    assert el.sync({"a": Exclusion.EXCLUDED}) == 1
    assert el.sync({"a": Exclusion.EXCLUDED}) == 0  # in flight: not twice
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert carried(nodes["a"]) == (False, "NodeExcluded")
    assert el.sync({"a": Exclusion.EXCLUDED}) == 0
    assert el.sync({}) == 1
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert carried(nodes["a"]) == (True, REASON_ELIGIBLE)
    assert el.sync({}) == 0
    assert writer.writes == ["a", "a"]
    assert kicks == []
    await el.close()


def test_a_planned_move_event_names_both_nodes_and_why() -> None:
    d = Decision("203-0-113-4", "node-1", "node-2", Reason.NODE_EXCLUDED)
    event = placement_event("203.0.113.4", d)
    assert event.message == "203.0.113.4 moved from node-1 to node-2: node-1 excluded"
    assert event.reason == "IPMoved"
    d = Decision("203-0-113-4", "node-1", "node-2", Reason.NODE_CORDONED)
    assert placement_event("203.0.113.4", d).message.endswith(": node-1 cordoned")
