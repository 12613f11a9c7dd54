"""The bed's routed half, without eipctl: FRR in the nodes announces what is on their
`eipctl-bgp` dummy link to the router (bird), which routes the far client to it, ECMP when
several nodes hold an IP; BFD takes a dead node's route away within a second; reload.sh
applies a changed config and reports a broken one. Nothing it made outlives it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eipctl.sandbox.namespaces import list_namespaces
from eipctl.sandbox.testbed import BedOptions, LocalBed, routing_unavailable
from eipctl.sandbox.testbed.frr import FrrNode, add_bgp_link
from eipctl.sandbox.testbed.network import NodeNet
from eipctl.sandbox.testbed.routing import (
    BFD_INTERVAL_MS,
    BFD_MULTIPLIER,
    BGP_LINK,
    NODE_ASN,
    ROUTER4,
    ROUTER6,
    ROUTER_ASN,
)

pytestmark = [pytest.mark.netns]
if (_reason := routing_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

IP4 = "203.0.113.77"
IP6 = "2001:db8:f::77"
COMMUNITY = "64512:77"


def node_config(node: NodeNet, *, community: str | None = None) -> str:
    """What eipctl's controller will render: the connected routes of `eipctl-bgp` (only
    those) to the router, over IPv4 and IPv6 sessions with BFD."""
    neighbors = "".join(
        f" neighbor {peer} remote-as {ROUTER_ASN}\n"
        f" neighbor {peer} bfd profile eipctl\n"
        f" neighbor {peer} timers connect 1\n"
        f" neighbor {peer} update-source {source}\n"
        for peer, source in ((ROUTER4, node.ip4), (ROUTER6, node.ip6))
    )
    families = "".join(
        f" address-family {family} unicast\n"
        "  redistribute connected route-map EIPCTL-BGP\n"
        f"  neighbor {peer} activate\n"
        f"  neighbor {peer} route-map EIPCTL-BGP out\n"
        " exit-address-family\n"
        for family, peer in (("ipv4", ROUTER4), ("ipv6", ROUTER6))
    )
    return (
        "frr defaults datacenter\n"
        "!\n"
        "bfd\n"
        " profile eipctl\n"
        f"  transmit-interval {BFD_INTERVAL_MS}\n"
        f"  receive-interval {BFD_INTERVAL_MS}\n"
        f"  detect-multiplier {BFD_MULTIPLIER}\n"
        " exit\n"
        "exit\n"
        "!\n"
        "bgp route-map delay-timer 0\n"
        "!\n"
        "route-map EIPCTL-BGP permit 10\n"
        f" match interface {BGP_LINK}\n"
        + (f" set community {community}\n" if community else "")
        + "exit\n"
        "!\n"
        f"router bgp {NODE_ASN}\n"
        f" bgp router-id {node.ip4}\n"
        " no bgp default ipv4-unicast\n" + neighbors + families + "exit\n"
    )


def announce(node: NodeNet, ip: str) -> None:
    plen = 128 if ":" in ip else 32
    node.ns.ip(f"addr add {ip}/{plen} dev {BGP_LINK}" + (" nodad" if plen == 128 else ""))


def withdraw(node: NodeNet, ip: str) -> None:
    plen = 128 if ":" in ip else 32
    node.ns.ip(f"addr del {ip}/{plen} dev {BGP_LINK}")


def _ours(needles: list[str]) -> list[str]:
    """Processes whose command line mentions one of `needles`."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(n in cmdline for n in needles):
                found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.fixture(scope="module")
def bed(request: pytest.FixtureRequest) -> Iterator[LocalBed]:
    """Two nodes with FRR and the hand-written config, the router, the far client; no eipctl.
    After it: no namespace, process or FRR directory of it is left."""
    bed = LocalBed(BedOptions(nodes=2, eipctl=False, bgp=True, keep_logs=False))
    with bed:
        for node in bed.network.nodes:
            if add_bgp_link(node) != "dummy":
                print(f"no dummy driver in this kernel: {BGP_LINK} is an ifb link")
            frr = bed.frr[node.name]
            assert frr.wait_config(frr.write_config(node_config(node))) == "applied"
        assert bed.router is not None
        bed.router.wait_established()
        yield bed
        bed.options.keep_logs = bool(request.session.testsfailed)
    frr_dirs = [p for f in bed.frr.values() for p in (f.conf_dir, f.sock_dir) if p.exists()]
    assert not frr_dirs, f"FRR pathspace directories left: {frr_dirs}"
    assert not [n for n in list_namespaces() if n.startswith(bed.network.run_id + "-")]
    pathspaces = [f.pathspace + " " for f in bed.frr.values()]  # `-N <pathspace> -f ...`
    assert not _ours([*pathspaces, str(bed.run_dir) + "/"]), "processes left"


def test_an_ip_on_a_nodes_bgp_link_is_routed_to_it_and_answers_the_far_client(
    bed: LocalBed,
) -> None:
    router, node = bed.router, bed.node("node-0")
    assert router is not None and router.far_client is not None
    announce(node, IP4)
    announce(node, IP6)
    try:
        took4 = router.wait_routes(IP4, [node.ip4], timeout=10)
        took6 = router.wait_routes(IP6, [node.ip6], timeout=10)
        print(f"route at the router after {took4:.2f}s (IPv4), {took6:.2f}s (IPv6)")
        assert router.far_client.ask(IP4) == "node-0"
        assert router.far_client.ask(IP6) == "node-0"
        assert bed.frr["node-0"].bgp_neighbors()[ROUTER4]["state"] == "Established"
    finally:
        withdraw(node, IP4)
        withdraw(node, IP6)
    router.wait_routes(IP4, [], timeout=10)
    assert router.far_client.ask(IP4, timeout=0.3) is None


def test_an_ip_on_two_nodes_is_ecmp_and_connections_spread_over_both(bed: LocalBed) -> None:
    router, n0, n1 = bed.router, bed.node("node-0"), bed.node("node-1")
    assert router is not None and router.far_client is not None
    announce(n0, IP4)
    try:
        router.wait_routes(IP4, [n0.ip4])
        announce(n1, IP4)
        router.wait_routes(IP4, [n0.ip4, n1.ip4])
        answers = router.far_client.spread(IP4, count=50)
        print(f"50 connections: {dict(answers)}")
        assert set(answers) == {"node-0", "node-1"}, answers
        withdraw(n1, IP4)
        router.wait_routes(IP4, [n0.ip4])
        assert router.far_client.spread(IP4, count=10) == {"node-0": 10}
    finally:
        for node in (n0, n1):
            node.ns.ip(f"addr flush dev {BGP_LINK}")
    router.wait_routes(IP4, [])


def test_bfd_takes_the_route_of_a_node_whose_link_went_down_within_a_second(
    bed: LocalBed,
) -> None:
    router, n0, n1 = bed.router, bed.node("node-0"), bed.node("node-1")
    assert router is not None and router.far_client is not None
    for node in (n0, n1):
        announce(node, IP4)
    try:
        router.wait_routes(IP4, [n0.ip4, n1.ip4])
        assert router.bfd_sessions() == dict.fromkeys([n0.ip4, n0.ip6, n1.ip4, n1.ip6], "Up")
        assert set(bed.frr["node-1"].bfd_peers().values()) == {"up"}
        n1.link_down()  # no TCP reset, no NOTIFICATION: only BFD's silence tells the router
        took = router.wait_routes(IP4, [n0.ip4], timeout=5)
        print(
            f"link down: next hop gone after {took:.3f}s (BFD {BFD_MULTIPLIER} x {BFD_INTERVAL_MS} ms)"
        )
        assert took < 1.0
        assert router.far_client.spread(IP4, count=10) == {"node-0": 10}
        bed.kill_node("node-1")  # FRR killed too; revived: started again, config re-applied
        bed.revive_node("node-1")
        router.wait_established(timeout=20)
        took = router.wait_routes(IP4, [n0.ip4, n1.ip4], timeout=10)
        print(f"revived node-1 routed again {took:.2f}s after its sessions came up")
        bed.kill_node("node-0")
        took = router.wait_routes(IP4, [n1.ip4], timeout=5)
        print(f"node-0 killed: next hop gone after {took:.3f}s")
        assert router.far_client.ask(IP4) == "node-1"
    finally:
        bed.heal()
        for node in (n0, n1):
            node.ns.ip(f"addr flush dev {BGP_LINK}")
    router.wait_established(timeout=20)
    router.wait_routes(IP4, [])


def test_reload_sh_applies_a_changed_config_and_reports_a_broken_one(bed: LocalBed) -> None:
    router, node = bed.router, bed.node("node-0")
    assert router is not None
    frr: FrrNode = bed.frr["node-0"]
    announce(node, IP4)
    try:
        router.wait_routes(IP4, [node.ip4])
        started = time.monotonic()
        sha = frr.write_config(node_config(node, community=COMMUNITY))
        assert frr.wait_config(sha) == "applied", frr.status()
        print(f"changed config applied after {time.monotonic() - started:.2f}s")
        assert f"set community {COMMUNITY}" in frr.show("show running-config")

        def community_at_router() -> bool:
            return "(64512,77)" in router.birdc(f"show route {IP4}/32 all", check=False)

        deadline = time.monotonic() + 10
        while not community_at_router():
            assert time.monotonic() < deadline, router.birdc(f"show route {IP4}/32 all")
            time.sleep(0.1)

        broken = node_config(node, community=COMMUNITY) + "router bgp 64512\n no such command\n"
        sha = frr.write_config(broken)
        assert frr.wait_config(sha) == "failed"
        status = frr.status()
        assert status is not None and status[2].strip(), "failed without frr-reload's output"
        assert len(status[2].splitlines()) <= 20
        assert frr.alive, "FRR stopped after a broken config"
        assert f"set community {COMMUNITY}" in frr.show("show running-config")
        assert router.routes(IP4) == [node.ip4]

        started = time.monotonic()
        assert frr.reloader.terminate(grace=3) == 0  # SIGTERM: a clean exit, at once
        print(f"reload.sh exited on SIGTERM after {time.monotonic() - started:.2f}s")
        frr.reloader.start()
    finally:
        assert frr.wait_config(frr.write_config(node_config(node))) == "applied"
        withdraw(node, IP4)
    router.wait_routes(IP4, [])
