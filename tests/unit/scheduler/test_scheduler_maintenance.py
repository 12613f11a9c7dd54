"""Planned maintenance against the API emulator: a Node excluded (label, eipctl's taint,
cordon with the flag) loses its claims, paced, with its reason; nothing moves back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from scheduler_harness import GROUP, SimNodes, add_claims, load, placements, scheduler

from eipctl.core.eligibility import EXCLUDE_LABEL, EXCLUDE_TAINT
from eipctl.core.ipnode import ELIGIBLE
from eipctl.metrics import REGISTRY
from eipctl.scheduler.planned_moves import PLANNED_IN_FLIGHT
from kubemu import ApiServer
from polling import eventually

NODES = ("node-0", "node-1", "node-2")


def add_node(srv: ApiServer, name: str) -> None:
    srv.store.create("", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def edit_node(srv: ApiServer, name: str, edit: Any) -> None:
    obj = srv.store.get("", "nodes", name)
    edit(obj)
    srv.store.update("", "nodes", obj)


def eligible(srv: ApiServer, node: str) -> tuple[str, str] | None:
    obj = srv.store.get(GROUP, "ipnodes", node)
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == ELIGIBLE:
            return c["status"], c["reason"]
    return None


def bind_all(srv: ApiServer) -> None:
    """What the controllers do: report each placed claim Bound on its node."""
    for c in srv.store.list(GROUP, "ipclaims"):
        node = (c.get("spec") or {}).get("nodeName")
        status = c.get("status") or {}
        if node and (status.get("phase"), status.get("boundNode")) != ("Bound", node):
            c["status"] = {**status, "phase": "Bound", "boundNode": node}
            srv.store.update(GROUP, "ipclaims", c, status=True)


def label(obj: Any) -> None:
    obj["metadata"].setdefault("labels", {})[EXCLUDE_LABEL] = ""


@contextlib.asynccontextmanager
async def placed(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes, claims: int
) -> AsyncIterator[dict[str, str]]:
    """A scheduler leading, every claim placed and Bound; yields the placements."""
    for name in NODES:
        add_node(srv, name)
        nodes.add(name)
    add_claims(srv, claims)
    async with scheduler(kubeconfig):
        await eventually(lambda: all(placements(srv).values()), what="every claim placed")
        bind_all(srv)
        yield placements(srv)


async def test_a_labelled_node_loses_its_claims_paced_and_gets_none_back(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    async with placed(srv, kubeconfig, nodes, 30) as before:
        mine = {n for n, node in before.items() if node == "node-0"}
        assert len(mine) == 10
        assert eligible(srv, "node-0") is None  # never excluded: no condition, no write

        edit_node(srv, "node-0", label)
        moved = lambda: {n for n in mine if placements(srv)[n] != "node-0"}  # noqa: E731
        await eventually(lambda: len(moved()) == PLANNED_IN_FLIGHT, what="the first moves")
        await asyncio.sleep(0.3)
        assert len(moved()) == PLANNED_IN_FLIGHT, "no more until those are Bound"

        def bound_and_moved() -> bool:  # the new nodes bind: room for the next ones
            bind_all(srv)
            return len(moved()) == len(mine)

        await eventually(bound_and_moved, step=0.05, what="every claim of node-0 moved")
        assert load(srv)["node-0"] == 0
        others = {n: node for n, node in before.items() if n not in mine}
        assert {n: placements(srv)[n] for n in others} == others, "only its claims moved"
        await eventually(
            lambda: eligible(srv, "node-0") == ("False", "NodeExcluded"), what="Eligible=False"
        )
        claim = srv.store.get(GROUP, "ipclaims", sorted(mine)[0])
        cond = claim["status"]["conditions"][0]
        assert cond["reason"] == "Placed"
        assert cond["message"].endswith(": node-0 excluded")

        add_claims(srv, 6, base=100)  # nothing new lands there
        await eventually(lambda: all(placements(srv).values()), what="new claims placed")
        assert load(srv)["node-0"] == 0

        bind_all(srv)
        after = placements(srv)
        edit_node(srv, "node-0", lambda o: o["metadata"]["labels"].pop(EXCLUDE_LABEL))
        await eventually(
            lambda: eligible(srv, "node-0") == ("True", "Eligible"), what="Eligible=True"
        )
        await asyncio.sleep(0.3)
        assert placements(srv) == after, "nothing moves back"


async def test_cordon_moves_only_with_the_flag_and_the_taint_always(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    async with placed(srv, kubeconfig, nodes, 6) as before:
        edit_node(srv, "node-1", lambda o: o.setdefault("spec", {}).update(unschedulable=True))
        await asyncio.sleep(0.5)
        assert placements(srv) == before, "cordon alone moves nothing without the flag"
        taint = {"key": EXCLUDE_TAINT, "effect": "NoSchedule"}
        edit_node(srv, "node-2", lambda o: o.setdefault("spec", {}).update(taints=[taint]))
        await eventually(lambda: load(srv)["node-2"] == 0, what="the tainted node emptied")
        await eventually(
            lambda: eligible(srv, "node-2") == ("False", "NodeTainted"), what="NodeTainted"
        )

    bind_all(srv)
    async with scheduler(kubeconfig, exclude_cordoned_nodes=True):
        await eventually(lambda: load(srv)["node-1"] == 0, what="the cordoned node emptied")
        await eventually(
            lambda: eligible(srv, "node-1") == ("False", "NodeCordoned"), what="NodeCordoned"
        )
        assert set(load(srv)) == {"node-0"}  # the only node neither tainted nor cordoned


async def test_the_excluded_nodes_gauge_counts_each_reason(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    """eipctl_scheduler_excluded_nodes: one series per reason, each counting only its own
    nodes (a cordon without the flag excludes nothing)."""

    def gauge() -> tuple[float | None, ...]:
        return tuple(
            REGISTRY.get_sample_value("eipctl_scheduler_excluded_nodes", {"reason": reason})
            for reason in ("NodeExcluded", "NodeTainted", "NodeCordoned")
        )

    async with placed(srv, kubeconfig, nodes, 3):
        await eventually(lambda: gauge() == (0, 0, 0), what="no node excluded")
        edit_node(srv, "node-0", label)
        taint = {"key": EXCLUDE_TAINT, "effect": "NoSchedule"}
        edit_node(srv, "node-1", lambda o: o.setdefault("spec", {}).update(taints=[taint]))
        edit_node(srv, "node-2", lambda o: o.setdefault("spec", {}).update(unschedulable=True))
        await eventually(lambda: gauge() == (1, 1, 0), what="one labelled, one tainted")
