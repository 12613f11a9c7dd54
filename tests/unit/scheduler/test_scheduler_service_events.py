"""Events on Services: `kubectl describe svc` says where the Service's IP is, and why it moved."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import structlog
from scheduler_harness import GROUP, SimNodes, make_claim, placements, scheduler

from eipctl.core.placement import Decision, Reason
from eipctl.kube.events import EventType
from eipctl.scheduler.service_events import (
    ServiceEvents,
    no_live_node_event,
    placement_event,
    service_ref,
    services_of,
)
from kubemu import ApiServer
from polling import eventually

IP = "198.51.100.1"
NAME = "198-51-100-1"


# --- wording (pure) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "pool", "reason", "message"),
    [
        (Decision(NAME, "", "node-2", Reason.UNPLACED), None, "IPPlaced", f"{IP} placed on node-2"),
        (
            Decision(NAME, "node-1", "node-2", Reason.NODE_DEAD),
            None,
            "IPMoved",
            f"{IP} now on node-2: node-1 lost (no liveness reply)",
        ),
        (
            Decision(NAME, "node-1", "node-2", Reason.NODE_GONE),
            None,
            "IPMoved",
            f"{IP} now on node-2: node-1 left the cluster (IpNode deleted)",
        ),
        (
            Decision(NAME, "node-1", "node-2", Reason.NODE_INELIGIBLE),
            "rack-a",
            "IPMoved",
            f"{IP} now on node-2: pool rack-a no longer admits node-1",
        ),
        (
            Decision(NAME, "node-1", "node-2", Reason.NODE_INELIGIBLE),
            None,
            "IPMoved",
            f"{IP} now on node-2: node-1 no longer eligible",
        ),
        (
            Decision(NAME, "node-1", "node-2", Reason.REBALANCE),
            None,
            "IPMoved",
            f"{IP} now on node-2: moved off node-1 to even out the load",
        ),
        (
            Decision(NAME, "", "", Reason.ALL_NODES, all_nodes=True),
            None,
            "IPPlaced",
            f"{IP} placed on every node its pool admits (policy all)",
        ),
        (
            Decision(NAME, "node-1", "", Reason.ALL_NODES, all_nodes=True),
            None,
            "IPMoved",
            f"{IP} now on every node its pool admits: policy all (was on node-1)",
        ),
    ],
)
def test_placement_wording(decision: Decision, pool: str | None, reason: str, message: str) -> None:
    event = placement_event(IP, decision, pool)
    assert (event.type, event.reason, event.message) == ("Normal", reason, message)


def test_no_live_node_wording() -> None:
    stuck = no_live_node_event(IP, Decision(NAME, "node-1", "", Reason.NODE_DEAD))
    assert (stuck.type, stuck.reason) == ("Warning", "NoLiveNode")
    assert stuck.message == (
        f"{IP} cannot move: node-1 lost (no liveness reply), and no other live node may hold it"
    )
    waiting = no_live_node_event(IP, Decision(NAME, "", "", Reason.UNPLACED))
    assert waiting.message == f"{IP} waits for a node: no live node may hold it"


def test_services_of_keeps_well_formed_keys_once() -> None:
    claim = {"spec": {"services": ["b/web", "a/api", "b/web", "no-namespace", "/x", 7]}}
    assert services_of(claim) == ("a/api", "b/web")
    assert services_of({"spec": {}}) == ()


def test_service_ref_carries_the_cached_uid() -> None:
    cached = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "9"}
    }
    ref = service_ref("shop/web", cached)
    assert ref == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": "shop", "name": "web", "uid": "u-1", "resourceVersion": "9"},
    }
    assert service_ref("shop/web", None)["metadata"] == {"namespace": "shop", "name": "web"}


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, EventType, str, str]] = []

    def emit(self, involved: Any, type_: EventType, reason: str, message: str) -> None:
        self.events.append((involved["metadata"], type_, reason, message))


def test_every_listed_service_is_told_once() -> None:
    recorder = FakeRecorder()
    cache = {"shop/web": {"metadata": {"name": "web", "namespace": "shop", "uid": "u-web"}}}
    notifier = ServiceEvents(cache, recorder)
    claim = make_claim(IP, node="node-2")
    claim["spec"]["services"] = ["shop/web", "shop/gone"]
    told = notifier.placed(claim, Decision(NAME, "", "node-2", Reason.UNPLACED))
    assert told == ("shop/gone", "shop/web")
    assert recorder.events == [
        ({"namespace": "shop", "name": "gone"}, "Normal", "IPPlaced", f"{IP} placed on node-2"),
        (
            {"namespace": "shop", "name": "web", "uid": "u-web"},
            "Normal",
            "IPPlaced",
            f"{IP} placed on node-2",
        ),
    ]


def test_a_claim_without_services_tells_no_one() -> None:
    recorder = FakeRecorder()
    notifier = ServiceEvents({}, recorder)
    claim = make_claim(IP, node="node-2")
    assert notifier.placed(claim, Decision(NAME, "", "node-2", Reason.UNPLACED)) == ()
    assert notifier.unplaceable(claim, Decision(NAME, "node-2", "", Reason.NODE_DEAD)) == ()
    assert recorder.events == []


# --- the scheduler on the emulator -------------------------------------------------------


def service(name: str, ips: list[str], *, allocated: bool = True) -> dict[str, Any]:
    annotations = {"eipctl.io/allocated-ips": ",".join(ips)} if allocated else {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"ports": [{"port": 80}], "externalIPs": ips},
    }


def add_service(srv: ApiServer, name: str, ips: list[str], *, allocated: bool = True) -> str:
    """Create the Service; returns its uid."""
    stored = srv.store.create("", "services", service(name, ips, allocated=allocated), "default")
    return str(stored["metadata"]["uid"])


def add_claim(srv: ApiServer, services: list[str], pool: str | None = None) -> None:
    """An IpClaim as the allocator makes it: it lists the Services using its IP."""
    claim = make_claim(IP, pool)
    claim["spec"]["services"] = services
    srv.store.create(GROUP, "ipclaims", claim)


def told(srv: ApiServer, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the scheduler's placement Events on Service ``name``."""
    events = [
        e
        for e in srv.store.list("", "events", "default")
        if e["involvedObject"]["kind"] == "Service"
        and e["involvedObject"]["name"] == name
        and e["reason"] in ("IPPlaced", "IPMoved", "NoLiveNode")
    ]
    events.sort(key=lambda e: (e["firstTimestamp"], int(e["metadata"]["resourceVersion"])))
    return [(e["type"], e["reason"], e["message"]) for e in events for _ in range(e["count"])]


def uids(srv: ApiServer, name: str) -> set[str]:
    return {
        e["involvedObject"]["uid"]
        for e in srv.store.list("", "events", "default")
        if e["involvedObject"]["kind"] == "Service" and e["involvedObject"]["name"] == name
    }


def rack_pool(name: str) -> dict[str, Any]:
    """A pool that admits the nodes labelled ``rack: a``."""
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaimPool",
        "metadata": {"name": name},
        "spec": {"cidr": "198.51.100.0/24", "nodeSelector": {"matchLabels": {"rack": "a"}}},
    }


def node_of_ip(srv: ApiServer) -> str:
    return placements(srv).get(NAME, "")


async def test_services_hear_where_the_ip_is_placed_and_why_it_moved(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    nodes.add("node-1")
    web = add_service(srv, "web", [IP])
    api = add_service(srv, "api", [IP])  # a shared IP: both Services are told
    add_claim(srv, ["default/api", "default/web"])
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        await eventually(lambda: node_of_ip(srv) != "", what="placed")
        first = node_of_ip(srv)
        placed = ("Normal", "IPPlaced", f"{IP} placed on {first}")
        await eventually(lambda: told(srv, "web") == [placed] == told(srv, "api"))
        assert uids(srv, "web") == {web} and uids(srv, "api") == {api}  # describe matches on uid

        nodes.kill(first)
        other = "node-1" if first == "node-0" else "node-0"
        moved = ("Normal", "IPMoved", f"{IP} now on {other}: {first} lost (no liveness reply)")
        await eventually(lambda: told(srv, "web") == [placed, moved], what="the move told")
        await eventually(lambda: told(srv, "api") == [placed, moved])

        # steady state: the node returns, passes run, nothing moves and nothing is said
        sched = running.scheduler
        passes = sched.placement_passes
        nodes.revive(first)
        await eventually(lambda: sched.placement_passes > passes, what="a pass after the return")
        await asyncio.sleep(0.5)
        await sched.recorder.flush()
        assert node_of_ip(srv) == other
        assert told(srv, "web") == [placed, moved] == told(srv, "api")


async def test_a_placement_is_logged_as_the_event_on_the_claim_with_the_services_told(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    add_service(srv, "web", [IP])
    add_claim(srv, ["default/web"])
    with structlog.testing.capture_logs() as logs:
        async with scheduler(kubeconfig, liveness_timeout=5.0):
            await eventually(lambda: told(srv, "web") != [], what="placed told")
    assert [e for e in logs if e["event"] == "object.event"] == [
        {
            "event": "object.event",
            "log_level": "info",
            "kind": "IpClaim",
            "name": NAME,
            "namespace": None,
            "reason": "Placed",
            "detail": "placed on node-0",
            "ip": IP,
            "from_node": None,
            "to_node": "node-0",
            "all_nodes": None,
            "services": ["default/web"],
        }
    ]


async def test_moves_for_other_reasons_say_why(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    srv.store.create(GROUP, "ipclaimpools", rack_pool("rack-a"))
    for name in ("a-1", "a-2", "a-3"):
        nodes.add(name, {"rack": "a"})
    add_service(srv, "web", [IP])
    add_claim(srv, ["default/web"], pool="rack-a")
    async with scheduler(kubeconfig, liveness_timeout=5.0):
        await eventually(lambda: node_of_ip(srv) != "", what="placed")
        first = node_of_ip(srv)
        expected = [("Normal", "IPPlaced", f"{IP} placed on {first}")]

        # the holder stops matching the pool's nodeSelector
        obj = srv.store.get(GROUP, "ipnodes", first)
        obj["metadata"]["labels"] = {"rack": "b"}
        srv.store.update(GROUP, "ipnodes", obj)
        await eventually(lambda: node_of_ip(srv) not in ("", first), what="moved off")
        second = node_of_ip(srv)
        expected.append(
            ("Normal", "IPMoved", f"{IP} now on {second}: pool rack-a no longer admits {first}")
        )
        await eventually(lambda: told(srv, "web") == expected, what="ineligible told")

        # the new holder's IpNode is deleted
        nodes.kill(second)
        srv.store.delete(GROUP, "ipnodes", second)
        await eventually(lambda: node_of_ip(srv) not in ("", second), what="moved off again")
        third = node_of_ip(srv)
        expected.append(
            (
                "Normal",
                "IPMoved",
                f"{IP} now on {third}: {second} left the cluster (IpNode deleted)",
            )
        )
        await eventually(lambda: told(srv, "web") == expected, what="gone told")


async def test_no_live_node_warns_the_service_once(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    srv.store.create(GROUP, "ipclaimpools", rack_pool("rack-a"))
    nodes.add("a-1", {"rack": "a"})
    nodes.add("b-1", {"rack": "b"})  # live, but the pool does not admit it
    add_service(srv, "web", [IP])
    add_claim(srv, ["default/web"], pool="rack-a")
    async with scheduler(kubeconfig, liveness_timeout=0.3) as running:
        placed = ("Normal", "IPPlaced", f"{IP} placed on a-1")
        await eventually(lambda: told(srv, "web") == [placed], what="placed told")
        nodes.kill("a-1")
        stuck = (
            "Warning",
            "NoLiveNode",
            f"{IP} cannot move: a-1 lost (no liveness reply), and no other live node may hold it",
        )
        await eventually(lambda: told(srv, "web") == [placed, stuck], what="warned")
        # more passes while nothing can be done: the warning is not repeated
        sched = running.scheduler
        passes = sched.placement_passes
        nodes.add("b-2", {"rack": "b"})
        await eventually(lambda: sched.placement_passes > passes, what="a pass after the join")
        await asyncio.sleep(0.3)
        await sched.recorder.flush()
        assert told(srv, "web") == [placed, stuck]
        nodes.add("a-2", {"rack": "a"})
        moved = ("Normal", "IPMoved", f"{IP} now on a-2: a-1 lost (no liveness reply)")
        await eventually(lambda: told(srv, "web") == [placed, stuck, moved], what="moved told")


async def test_policy_all_tells_once_not_per_node(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    nodes.add("node-1")
    add_service(srv, "web", [IP])
    add_claim(srv, ["default/web"])
    async with scheduler(kubeconfig, policy="all", liveness_timeout=0.3) as running:
        everywhere = (
            "Normal",
            "IPPlaced",
            f"{IP} placed on every node its pool admits (policy all)",
        )
        await eventually(lambda: told(srv, "web") == [everywhere], what="marked for all told")
        copies = {f"{NAME}.node-0", f"{NAME}.node-1"}
        await eventually(lambda: copies <= set(placements(srv)), what="per-node claims")

        # a node joins (one more per-node claim) and one dies: the Service hears nothing
        nodes.add("node-2")
        nodes.kill("node-0")
        await eventually(lambda: f"{NAME}.node-2" in placements(srv), what="copy for node-2")
        await asyncio.sleep(0.5)
        await running.scheduler.recorder.flush()
        assert told(srv, "web") == [everywhere]


async def test_a_hand_set_ip_claim_tells_its_service(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    srv.store.create(
        GROUP,
        "ipclaimpools",
        {
            "apiVersion": "eipctl.io/v1alpha1",
            "kind": "IpClaimPool",
            "metadata": {"name": "manual"},
            "spec": {"cidr": "198.51.100.0/24", "allowManual": True},
        },
    )
    uid = add_service(srv, "web", [IP], allocated=False)
    async with scheduler(kubeconfig):
        placed = ("Normal", "IPPlaced", f"{IP} placed on node-0")
        await eventually(lambda: told(srv, "web") == [placed], what="the hand-set IP's placement")
        assert uids(srv, "web") == {uid}
