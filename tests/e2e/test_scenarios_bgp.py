"""Stories of IPs announced by BGP: a router (bird) peers with FRR in every node, which the
node's eipctl controller configures from a BGPPeer; the far client sits behind the router,
off the nodes' segment, so only a route can bring its traffic to a node (docs/bgp.md).

The bed of this module is its own (BedOptions(bgp=True)): three nodes, each running zebra,
bgpd and bfdd and the reloader (deploy/workloads/frr/reload.sh), and the controller with
--frr-config. Pools with `announce: bgp` live in 203.0.113.201-235, apart from the shared
pools of the other scenarios.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from eipctl.sandbox.namespaces import why_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, routing_unavailable, wait_for
from eipctl.sandbox.testbed.network import LINK, POOL4, POOL6
from eipctl.sandbox.testbed.pools import SELECTOR_LABEL, labelled_pool
from eipctl.sandbox.testbed.routing import (
    BFD_INTERVAL_MS,
    BFD_MULTIPLIER,
    BGP_LINK,
    ROUTER4,
    ROUTER6,
    router_peer,
)

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable() or routing_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

SPREAD = "e2e-bgp"
ALL = "e2e-bgp-all"
SWITCHED = "e2e-switch"
SPREAD_V6 = "e2e-bgp-v6"
POOL_LABEL = SELECTOR_LABEL
PEER = "router"
BFD_DETECT = BFD_MULTIPLIER * BFD_INTERVAL_MS / 1000
SLACK = 1.5  # a loaded 2-core machine: wake-ups, netlink, bgpd's update timers


POOLS = {
    SPREAD: labelled_pool("203.0.113.201", "203.0.113.215", "bgp", announce="bgp"),
    ALL: labelled_pool(
        "203.0.113.216", "203.0.113.225", "bgp-all", announce="bgp", placement="all"
    ),
    SWITCHED: labelled_pool("203.0.113.226", "203.0.113.235", "switch", announce="l2"),
    SPREAD_V6: {
        **labelled_pool("2001:db8:f::1:10", "2001:db8:f::1:1f", "bgp-v6", announce="bgp"),
        "cidr": str(POOL6),
    },
}


@pytest.fixture(scope="module")
def bgp_bed() -> Iterator[LocalBed]:
    with LocalBed(BedOptions(nodes=3, bgp=True)) as bed:
        assert bed.router is not None
        for peer in (router_peer(PEER, ROUTER4), router_peer(f"{PEER}-v6", ROUTER6)):
            bed.kube.kubectl("apply", "-f", "-", stdin=json.dumps(peer))
        for name, spec in POOLS.items():
            bed.kube.apply_pool(name, spec)
        bed.router.wait_established(timeout=30)
        yield bed


@pytest.fixture
def bed(bgp_bed: LocalBed) -> Iterator[LocalBed]:
    """The module's bed, healed, its Services gone, every session up again."""
    bgp_bed.reset()
    for name, spec in POOLS.items():
        bgp_bed.kube.apply_pool(name, spec)
    assert bgp_bed.router is not None
    bgp_bed.router.wait_established(timeout=30)
    yield bgp_bed
    bgp_bed.heal()


def service_ip(bed: LocalBed, name: str, label: str) -> str:
    bed.kube.create_service(name, labels={POOL_LABEL: label})
    return bed.wait_for_ip(name)


def holder(bed: LocalBed, ip: str, timeout: float = 15.0, not_on: str = "") -> str:
    """The node the claim of `ip` is Bound on (other than `not_on`)."""

    def bound() -> str | None:
        claim = bed.kube.claim_for(ip) or {}
        status = claim.get("status") or {}
        node = (claim.get("spec") or {}).get("nodeName")
        if node == not_on:
            return None
        return node if status.get("phase") == "Bound" and status.get("boundNode") == node else None

    return str(wait_for(bound, timeout, what=f"{ip} Bound"))


def on_bgp_link(bed: LocalBed, node: str) -> set[str]:
    out = bed.node(node).ns.ip(f"-j addr show dev {BGP_LINK}", check=False) or "[]"
    return {i["local"] for e in json.loads(out) for i in e.get("addr_info", [])}


def next_hops(bed: LocalBed, nodes: list[str]) -> list[str]:
    return sorted(bed.node(n).ip4 for n in nodes)


def test_a_service_ip_is_routed_to_the_node_holding_it(bed: LocalBed) -> None:
    assert bed.router is not None and bed.router.far_client is not None
    ip = service_ip(bed, "bgp-web", "bgp")
    node = holder(bed, ip)
    took = bed.router.wait_routes(ip, [bed.node(node).ip4], timeout=10)
    print(f"\nbound on {node}; the router has the route within {took:.2f}s of looking")
    assert bed.router.far_client.ask(ip) == node
    # a host route on the BGP link, nothing on the segment: no ARP answer from eth0's copy
    assert f"{ip}" in on_bgp_link(bed, node)
    assert ip not in bed.node(node).external_addresses()
    # the controller rendered the node's FRR configuration and FRR took it
    ipnode = bed.kube.kubectl_json("get", "ipnode", node)
    conditions = {c["type"]: c for c in ipnode["status"].get("conditions", [])}
    assert conditions["BGPConfigured"]["status"] == "True", conditions


def test_an_ipv6_service_ip_is_routed_over_the_ipv6_session(bed: LocalBed) -> None:
    """The IPv6 peer carries the pool's /128s (the IPv4 session carries none of them)."""
    assert bed.router is not None and bed.router.far_client is not None
    bed.kube.create_service("bgp-v6", labels={POOL_LABEL: "bgp-v6"}, ip_families=["IPv6"])
    ip = bed.wait_for_ip("bgp-v6")
    assert ":" in ip
    node = holder(bed, ip)
    bed.router.wait_routes(ip, [bed.node(node).ip6], timeout=10)
    assert bed.router.far_client.ask(ip) == node
    assert ip in on_bgp_link(bed, node)


def test_policy_all_spreads_connections_over_every_node_by_ecmp(bed: LocalBed) -> None:
    assert bed.router is not None and bed.router.far_client is not None
    ip = service_ip(bed, "bgp-all", "bgp-all")
    nodes = bed.node_names
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=15)
    answers = bed.router.far_client.spread(ip, count=60)
    print(f"\n60 connections from the far client: {dict(answers)}")
    assert None not in answers, answers
    assert set(answers) == set(nodes), answers


def test_policy_all_with_a_local_service_routes_only_via_nodes_with_its_pods(
    bed: LocalBed,
) -> None:
    """externalTrafficPolicy: Local drops traffic on nodes without a pod of the Service, so
    only those nodes may announce it: the router's ECMP group follows the pods ([local])."""
    assert bed.router is not None and bed.router.far_client is not None
    ip = service_ip(bed, "bgp-local", "bgp-all")
    nodes = bed.node_names
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=15)
    bed.kube.put_endpoints("bgp-local", nodes[1:])
    bed.kube.make_local("bgp-local")
    took = bed.router.wait_routes(ip, next_hops(bed, nodes[1:]), timeout=15)
    print(f"\nroutes only via {nodes[1:]} within {took:.2f}s")
    answers = bed.router.far_client.spread(ip, count=30)
    assert set(answers) == set(nodes[1:]), answers
    bed.kube.put_endpoints("bgp-local", nodes[:1])  # the pods moved to the first node
    bed.router.wait_routes(ip, next_hops(bed, nodes[:1]), timeout=15)
    assert bed.router.far_client.ask(ip) == nodes[0]


def test_a_killed_node_s_traffic_moves_to_another_node(bed: LocalBed) -> None:
    """Policy spread: the router drops the dead node's route when BFD gives up on its
    session; the scheduler moves the claim, the new holder's FRR announces it."""
    assert bed.router is not None and bed.router.far_client is not None
    ip = service_ip(bed, "bgp-failover", "bgp")
    victim = holder(bed, ip)
    bed.router.wait_routes(ip, [bed.node(victim).ip4])
    series = bed.router.far_client.start_probes([ip], interval=0.05, timeout=0.2)
    time.sleep(0.5)
    killed_at = time.monotonic()
    bed.kill_node(victim)
    wait_for(lambda: bed.router.routes(ip) != [bed.node(victim).ip4], 10, interval=0.02)
    withdrawn = time.monotonic() - killed_at
    new = holder(bed, ip, not_on=victim)
    bed.router.wait_routes(ip, [bed.node(new).ip4], timeout=10)
    wait_for(lambda: bed.router.far_client.ask(ip) == new, 10, what=f"{new} answering")
    time.sleep(0.5)
    bed.router.far_client.stop_probes(series)
    outage = series.longest_outage(ip)
    print(
        f"\nkilled {victim}: its route gone after {withdrawn:.2f}s "
        f"(BFD {BFD_MULTIPLIER} x {BFD_INTERVAL_MS} ms), {new} answering; far client's "
        f"longest outage {outage:.2f}s"
    )
    assert withdrawn < BFD_DETECT + SLACK
    assert outage < 0.4 + BFD_DETECT + 2 * SLACK  # liveness timeout, BFD, announcement


def test_with_policy_all_a_killed_node_only_leaves_the_ecmp_group(bed: LocalBed) -> None:
    assert bed.router is not None and bed.router.far_client is not None
    ip = service_ip(bed, "bgp-all-failover", "bgp-all")
    nodes = bed.node_names
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=15)
    victim = nodes[0]
    killed_at = time.monotonic()
    bed.kill_node(victim)
    rest = [n for n in nodes if n != victim]
    bed.router.wait_routes(ip, next_hops(bed, rest), timeout=10)
    left = time.monotonic() - killed_at
    answers = bed.router.far_client.spread(ip, count=30)
    print(f"\n{victim} left the ECMP group after {left:.2f}s; then {dict(answers)}")
    assert set(answers) <= set(rest) and None not in answers, answers
    assert left < BFD_DETECT + SLACK


def test_a_fenced_controller_withdraws_its_routes(bed: LocalBed) -> None:
    """Cut off from the API only, the controller keeps its route (the scheduler leader still
    hears it and vouches for what it holds: docs/liveness.md, "Outages"). Cut off from the
    liveness path too (only its link and FRR left), it fences: its addresses go, and with
    them the routes FRR announced, while FRR and its sessions keep running."""
    assert bed.router is not None
    ip = service_ip(bed, "bgp-fence", "bgp-all")
    nodes = bed.node_names
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=15)
    victim = nodes[-1]
    bed.cut_from_api(victim)
    time.sleep(2.5 + 2.0)  # past its --fence-timeout: it holds, vouched for
    assert ip in on_bgp_link(bed, victim)
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=1)
    cut_at = time.monotonic()
    bed.cut_liveness(victim)
    rest = [n for n in nodes if n != victim]
    bed.router.wait_routes(ip, next_hops(bed, rest), timeout=15)
    gone = time.monotonic() - cut_at
    sessions = bed.router.sessions()
    print(f"\n{victim} cut from the API, then the liveness path: route withdrawn {gone:.2f}s later")
    assert ip not in on_bgp_link(bed, victim)
    assert all(state == "Established" for state in sessions.values()), sessions
    assert gone < 2 * 0.4 + SLACK  # the writer's silence, then the API check and the peers
    bed.heal_liveness(victim)
    bed.reconnect_to_api(victim)
    bed.router.wait_routes(ip, next_hops(bed, nodes), timeout=15)


def test_a_pool_switched_from_l2_to_bgp_keeps_its_service(bed: LocalBed) -> None:
    """The same IP, first reached on the segment (the router resolves it by ARP), then by
    the BGP route, then by ARP again: the Service keeps its IP, no claim moves."""
    assert bed.router is not None and bed.router.far_client is not None
    router = bed.router.ns
    assert router is not None
    router.ip(f"route add {POOL4} dev {LINK}")  # l2 pools are on-link for the router
    try:
        ip = service_ip(bed, "bgp-switch", "switch")
        node = holder(bed, ip)
        wait_for(lambda: bed.router.far_client.ask(ip) == node, 15, what="answered over l2")
        assert bed.router.routes(ip) == []
        series = bed.router.far_client.start_probes([ip], interval=0.05, timeout=0.3)
        bed.kube.apply_pool(SWITCHED, {**POOLS[SWITCHED], "announce": "bgp"})
        took = bed.router.wait_routes(ip, [bed.node(node).ip4], timeout=15)
        wait_for(lambda: ip not in bed.node(node).external_addresses(), 10)
        bed.kube.apply_pool(SWITCHED, POOLS[SWITCHED])
        wait_for(lambda: bed.router.routes(ip) == [], 15, what="the route withdrawn")
        wait_for(lambda: ip in bed.node(node).external_addresses(), 10)
        time.sleep(0.5)
        bed.router.far_client.stop_probes(series)
        outage = series.longest_outage(ip)
        print(f"\nl2 -> bgp: routed after {took:.2f}s; bgp -> l2; longest outage {outage:.2f}s")
        assert holder(bed, ip) == node
        assert bed.kube.external_ips("bgp-switch") == [ip]
        assert bed.router.far_client.ask(ip) == node
        assert outage < 2 * SLACK
    finally:
        router.ip(f"route del {POOL4} dev {LINK}", check=False)
