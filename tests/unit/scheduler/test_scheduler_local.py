"""externalTrafficPolicy: Local against the API emulator: the claim goes where the Service's
ready endpoints are, follows them make-before-break, and waits unplaced (keeping its IP)
while there is none; Cluster Services and other Services' endpoints change nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from scheduler_harness import GROUP, SimNodes, make_claim, placements, scheduler

from kubemu import ApiServer
from polling import eventually

IP = "198.51.100.1"
NAME = "198-51-100-1"
NODES = ("node-0", "node-1", "node-2")


def add_service(srv: ApiServer, name: str, policy: str = "Local") -> None:
    srv.store.create(
        "",
        "services",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {"eipctl.io/allocated-ips": IP},
            },
            "spec": {
                "ports": [{"port": 80}],
                "externalIPs": [IP],
                "externalTrafficPolicy": policy,
            },
        },
        "default",
    )


def add_claim(srv: ApiServer, services: list[str]) -> None:
    claim = make_claim(IP)
    claim["spec"]["services"] = services
    srv.store.create(GROUP, "ipclaims", claim)


def endpoints(srv: ApiServer, service: str, *on: str, terminating: tuple[str, ...] = ()) -> None:
    """The Service's one EndpointSlice, as the EndpointSlice controller writes it: a pod on
    each node of ``on`` (ready), and on each of ``terminating`` (serving, terminating)."""
    eps: list[dict[str, Any]] = [
        {"addresses": [f"10.0.{i}.1"], "nodeName": n, "conditions": {"ready": True}}
        for i, n in enumerate(on)
    ]
    eps += [
        {
            "addresses": [f"10.1.{i}.1"],
            "nodeName": n,
            "conditions": {"ready": False, "serving": True, "terminating": True},
        }
        for i, n in enumerate(terminating)
    ]
    body = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-abcde",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": eps,
        "ports": [{"port": 80, "protocol": "TCP"}],
    }
    existing = srv.store.find("discovery.k8s.io", "endpointslices", f"{service}-abcde", "default")
    if existing is None:
        srv.store.create("discovery.k8s.io", "endpointslices", body, "default")
    else:
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        srv.store.update("discovery.k8s.io", "endpointslices", body)


def condition(srv: ApiServer) -> tuple[str, str] | None:
    claim = srv.store.get(GROUP, "ipclaims", NAME)
    for c in (claim.get("status") or {}).get("conditions") or []:
        if c["type"] == "Scheduled":
            return c["status"], c["reason"]
    return None


def service_events(srv: ApiServer, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in srv.store.list("", "events", "default")
        if e["involvedObject"]["kind"] == "Service" and e["involvedObject"]["name"] == name
    ]


def local_service_on(srv: ApiServer, nodes: SimNodes, pod: str, policy: str = "Local") -> None:
    """Three live nodes; Service "web" (``policy``) with its pod on ``pod``; its IP's claim."""
    for n in NODES:
        nodes.add(n)
    add_service(srv, "web", policy=policy)
    endpoints(srv, "web", pod)
    add_claim(srv, ["default/web"])


def node_of_ip(srv: ApiServer) -> str:
    return placements(srv).get(NAME, "")


async def test_a_local_service_ip_follows_its_endpoints_and_waits_when_there_is_none(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    local_service_on(srv, nodes, "node-2")
    async with scheduler(kubeconfig, liveness_timeout=5.0) as running:
        await eventually(lambda: node_of_ip(srv) == "node-2", what="placed where the pod is")

        endpoints(srv, "web", "node-0")  # the pod rescheduled
        await eventually(lambda: node_of_ip(srv) == "node-0", what="the claim followed")
        await running.scheduler.recorder.flush()
        moved = (
            "IPMoved",
            f"{IP} moved from node-2 to node-0: no ready endpoint on node-2 any more",
        )
        await eventually(lambda: moved in service_events(srv, "web"), what="the move told")

        endpoints(srv, "web", terminating=("node-0",))  # a rolling update's old pod
        await asyncio.sleep(0.5)
        assert node_of_ip(srv) == "node-0"  # kube-proxy still delivers there: it stays
        assert condition(srv) == ("False", "NoLocalEndpoint")

        endpoints(srv, "web")  # scaled to zero
        await eventually(lambda: node_of_ip(srv) == "", what="taken off")
        claim = srv.store.get(GROUP, "ipclaims", NAME)
        assert claim["spec"]["ip"] == IP  # it keeps its IP
        await eventually(lambda: condition(srv) == ("False", "NoLocalEndpoint"))
        await running.scheduler.recorder.flush()
        assert any(r == "NoLocalEndpoint" for r, _ in service_events(srv, "web"))

        endpoints(srv, "web", "node-1", "node-2")  # back
        await eventually(lambda: node_of_ip(srv) in ("node-1", "node-2"), what="placed again")
        await eventually(lambda: condition(srv) == ("True", "Placed"))


async def test_a_cluster_service_ignores_endpoints_and_other_slices_start_no_pass(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    local_service_on(srv, nodes, "node-2", policy="Cluster")
    async with scheduler(kubeconfig, liveness_timeout=5.0) as running:
        await eventually(lambda: node_of_ip(srv) != "", what="placed")
        first = node_of_ip(srv)
        sched = running.scheduler
        await asyncio.sleep(0.3)
        passes = sched.placement_passes
        for n in NODES:  # the endpoints wander: a Cluster Service does not care
            endpoints(srv, "web", n)
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        assert node_of_ip(srv) == first
        assert sched.placement_passes == passes  # Cluster Services' slices start no pass


async def test_an_ip_shared_by_two_local_services_goes_where_both_have_endpoints(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    for n in NODES:
        nodes.add(n)
    add_service(srv, "web")
    add_service(srv, "api")
    endpoints(srv, "web", "node-0", "node-1")
    endpoints(srv, "api", "node-1", "node-2")
    add_claim(srv, ["default/api", "default/web"])
    async with scheduler(kubeconfig, liveness_timeout=5.0):
        await eventually(lambda: node_of_ip(srv) == "node-1", what="where both have one")


async def test_policy_all_keeps_copies_only_on_nodes_with_endpoints(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    """Policy all (BGP, every node announcing) with a Local Service: per-node claims (and so
    addresses and routes) only where kube-proxy delivers, following the endpoints."""
    local_service_on(srv, nodes, "node-0")

    def copies() -> set[str]:
        return {
            (c["spec"] or {}).get("nodeName", "")
            for c in srv.store.list(GROUP, "ipclaims")
            if c["metadata"]["name"].startswith(f"{NAME}.")
        }

    async with scheduler(kubeconfig, liveness_timeout=5.0, policy="all"):
        await eventually(lambda: copies() == {"node-0"}, what="a copy where the pod is")
        endpoints(srv, "web", "node-1", "node-2")  # scaled out, off node-0
        await eventually(lambda: copies() == {"node-1", "node-2"}, what="copies followed")
        endpoints(srv, "web")
        await eventually(lambda: copies() == set(), what="none left without endpoints")
