"""The upstream router (bird 2) and the far client behind it (the bed's plan: `routing.py`).

bird runs in its own namespace on the switch, passive (the nodes connect), with one eBGP
session per node and family, each with BFD. It imports every route its nodes send and exports
none to them. Its kernel protocol merges equal routes from several nodes (`merge paths on`)
into one multipath route: an IP held by several nodes is ECMP, spread per connection
(`fib_multipath_hash_policy=1`, L4). bird 2.0.12 merges BGP routes from different eBGP
neighbours (its mergeability test compares local preference, AS path length, origin, MED,
eBGP/iBGP and IGP metric, never the neighbour or the AS path itself), so no multipath-relax
is needed. The far client reaches an external IP only through those routes; the nodes have a
route back to the far networks via the router (`Router.route_back`).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import math
import re
import time
from collections import Counter
from pathlib import Path

from eipctl.sandbox.namespaces import Namespace, sh
from eipctl.sandbox.testbed.client import Client
from eipctl.sandbox.testbed.frr import reap_leftover_pathspaces
from eipctl.sandbox.testbed.network import LINK, Network, NodeNet
from eipctl.sandbox.testbed.processes import Process, wait_for
from eipctl.sandbox.testbed.responder import SERVICE_PORT
from eipctl.sandbox.testbed.routing import (
    BFD_INTERVAL_MS,
    BFD_MULTIPLIER,
    BIRD,
    BIRDC,
    FAR_CLIENT4,
    FAR_CLIENT6,
    FAR_LINK,
    FAR_NET4,
    FAR_NET6,
    FAR_ROUTER4,
    FAR_ROUTER6,
    NODE_ASN,
    ROUTER4,
    ROUTER6,
    ROUTER_ASN,
)


def _age(since: str) -> float:
    """Seconds since bird's "since" (``HH:MM:SS.mmm`` today, local time; an older one is
    printed as a date: infinitely old)."""
    try:
        then = datetime.datetime.strptime(since, "%H:%M:%S.%f").time()
    except ValueError:
        return math.inf
    now = datetime.datetime.now()
    at = datetime.datetime.combine(now.date(), then)
    if at > now + datetime.timedelta(seconds=1):  # before midnight
        at -= datetime.timedelta(days=1)
    return (now - at).total_seconds()


def _protocol(node: str) -> str:
    """The stem of bird's protocol names for a node's sessions (``node_0`` + ``_v4``)."""
    return re.sub(r"\W", "_", node)


class FarClient(Client):
    """The far client's point of view: TCP through the router (its BGP routes, ECMP)."""

    def ask(self, ip: str, timeout: float = 1.0, port: int = SERVICE_PORT) -> str | None:
        """Dial ip:port from the far client; the name of the node that answered, or None."""
        return self.loop.run(_ask(ip, port, timeout))

    def spread(
        self, ip: str, count: int = 50, port: int = SERVICE_PORT, timeout: float = 1.0
    ) -> Counter[str | None]:
        """`count` connections one after the other (each from a new source port): how many
        each node answered (None: no answer)."""

        async def all_of() -> Counter[str | None]:
            return Counter([await _ask(ip, port, timeout) for _ in range(count)])

        return self.loop.run(all_of())


async def _ask(ip: str, port: int, seconds: float) -> str | None:
    return await Client._ask(ip, seconds, port)


class Router:
    """The upstream router (bird 2) and the far client; `build()` makes them, `close()`
    stops them (the namespaces go with the network)."""

    def __init__(self, network: Network, run_dir: Path) -> None:
        self.network = network
        self.run_dir = run_dir
        self.asn = ROUTER_ASN
        self.node_asn = NODE_ASN
        self.ip4, self.ip6 = ROUTER4, ROUTER6
        self.ns: Namespace | None = None
        self.far: Namespace | None = None
        self.far_client: FarClient | None = None
        self.config = run_dir / "bird.conf"
        self.socket = run_dir / "bird.ctl"
        argv = [BIRD, "-f", "-c", str(self.config), "-s", str(self.socket)]
        self.bird = Process("router-bird", [*argv, "-P", str(run_dir / "bird.pid")], run_dir)
        self.peers: list[NodeNet] = []

    def build(self) -> None:
        """The router and far namespaces, the nodes' routes back, bird with a session to
        every node of the network."""
        reap_leftover_pathspaces(self.network.prefix)
        tb, switch = self.network.tb, self.network.switch
        assert switch is not None, "build the network first"
        self.ns = ns = tb.namespace("router")
        tb.veth(switch, "rt", ns, LINK, up=False)
        switch.ip("link set rt master br0")
        switch.ip("link set rt up")
        self.far = far = tb.namespace("far")
        tb.veth(ns, FAR_LINK, far, LINK)
        ns.ip(f"link set {LINK} up")
        ns.ip(f"addr add {ROUTER4}/24 dev {LINK}")
        ns.ip(f"-6 addr add {ROUTER6}/64 dev {LINK} nodad")
        ns.ip(f"addr add {FAR_ROUTER4}/{FAR_NET4.prefixlen} dev {FAR_LINK}")
        ns.ip(f"-6 addr add {FAR_ROUTER6}/{FAR_NET6.prefixlen} dev {FAR_LINK} nodad")
        far.ip(f"addr add {FAR_CLIENT4}/{FAR_NET4.prefixlen} dev {LINK}")
        far.ip(f"-6 addr add {FAR_CLIENT6}/{FAR_NET6.prefixlen} dev {LINK} nodad")
        far.ip(f"route add default via {FAR_ROUTER4}")
        far.ip(f"-6 route add default via {FAR_ROUTER6}")
        ns.sysctl("net.ipv4.ip_forward", 1)
        ns.sysctl("net.ipv6.conf.all.forwarding", 1)
        # L4 hash: connections from one client spread over the next hops of an ECMP route
        ns.sysctl("net.ipv4.fib_multipath_hash_policy", 1)
        ns.sysctl("net.ipv6.fib_multipath_hash_policy", 1)
        self.far_client = FarClient(far.name)
        self.peers = list(self.network.nodes)
        for node in self.peers:
            self.route_back(node)
        self.config.write_text(self.bird_config())
        self.bird.netns = ns.name
        self.bird.start()
        wait_for(self._bird_up, 10, interval=0.1, what="bird answering birdc")

    def _bird_up(self) -> bool:
        if self.bird.popen is not None and not self.bird.alive:
            raise RuntimeError(f"bird exited:\n{self.bird.log_tail(15)}")
        return "Daemon is up" in self.birdc("show status", check=False)

    def route_back(self, node: NodeNet) -> None:
        """The node's route to the far networks via the router (idempotent; again after the
        node's link was down, which took it away)."""
        node.ns.ip(f"route replace {FAR_NET4} via {ROUTER4} dev {LINK}")
        node.ns.ip(f"-6 route replace {FAR_NET6} via {ROUTER6} dev {LINK}")

    def add_node(self, node: NodeNet) -> None:
        """A node added after `build()`: its route back and bird sessions (reconfigured)."""
        self.route_back(node)
        if node not in self.peers:
            self.peers.append(node)
            self.config.write_text(self.bird_config())
            self.birdc("configure")

    def bird_config(self) -> str:
        bfd = f"interval {BFD_INTERVAL_MS} ms; multiplier {BFD_MULTIPLIER};"
        parts = [
            "log stderr all;",
            f"router id {ROUTER4};",
            "protocol device { scan time 10; }",
            # merge paths: equal routes from several nodes make one multipath kernel route
            "protocol kernel kernel4 { ipv4 { import none; export all; }; merge paths on; }",
            "protocol kernel kernel6 { ipv6 { import none; export all; }; merge paths on; }",
            f'protocol bfd {{ interface "{LINK}" {{ {bfd} }}; }}',
            "template bgp node {",
            f"  local as {self.asn};",
            "  hold time 9; keepalive time 3;",
            # passive: the nodes connect (no collisions, no failed attempts at a node not
            # configured yet); after an error (BFD down) it listens again within a second
            "  passive on; error wait time 1, 2;",
            "  bfd on;",
            "  debug { states, events };",
            "}",
        ]
        for node in self.peers:
            name = _protocol(node.name)
            parts += [
                f"protocol bgp {name}_v4 from node {{",
                f"  neighbor {node.ip4} as {self.node_asn};",
                "  ipv4 { import all; export none; };",
                "}",
                f"protocol bgp {name}_v6 from node {{",
                f"  neighbor {node.ip6} as {self.node_asn};",
                "  ipv6 { import all; export none; next hop prefer global; };",
                "}",
            ]
        return "\n".join(parts) + "\n"

    def birdc(self, command: str, check: bool = True) -> str:
        return sh(BIRDC, "-s", str(self.socket), *command.split(), check=check)

    def sessions(self) -> dict[str, str]:
        """{bird protocol (``node_0_v4``, ``node_0_v6``, ...): its BGP state}."""
        return {name: state for name, (state, _) in self._bgp_protocols().items()}

    def _bgp_protocols(self) -> dict[str, tuple[str, str]]:
        """{bird protocol: (BGP state, since when)}."""
        found = {}
        for line in self.birdc("show protocols").splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "BGP":
                found[fields[0]] = (fields[5], fields[4])
        return found

    def bfd_sessions(self) -> dict[str, str]:
        """{node address: bird's BFD state ("Up", "Down", "Init", ...)}."""
        states = {}
        for line in self.birdc("show bfd sessions").splitlines():
            fields = line.split()
            with contextlib.suppress(ValueError, IndexError):
                states[str(ipaddress.ip_address(fields[0]))] = fields[2]
        return states

    def wait_established(
        self, nodes: list[str] | None = None, timeout: float = 20.0, stable_for: float = 1.0
    ) -> None:
        """Until bird's sessions with these nodes (all: None) are Established with their BFD
        session Up, and have stayed so for `stable_for` seconds. (FRR 8.4 re-registers its
        BFD session with the interface once a session is up: the new BFD session starts
        Down, which drops that first session once, ~0.1 s after it came up.)"""
        peers = [p for p in self.peers if nodes is None or p.name in nodes]
        wanted = {
            f"{_protocol(p.name)}_{family}": address
            for p in peers
            for family, address in (("v4", p.ip4), ("v6", p.ip6))
        }

        def stable() -> bool:
            protocols, bfd = self._bgp_protocols(), self.bfd_sessions()
            for name, address in wanted.items():
                state, since = protocols.get(name, ("", ""))
                if state != "Established" or bfd.get(address) != "Up":
                    return False
                if _age(since) < stable_for:
                    return False
            return True

        wait_for(stable, timeout, interval=0.1, what=f"stable BGP+BFD sessions: {sorted(wanted)}")

    def routes(self, ip: str) -> list[str]:
        """The next hops of the router's kernel route to `ip` (/32 or /128), sorted: several
        for an ECMP route, none when there is no route."""
        assert self.ns is not None
        v6 = ipaddress.ip_address(ip).version == 6
        family, plen = ("-6", 128) if v6 else ("-4", 32)
        out = self.ns.ip(f"{family} -j route show exact {ip}/{plen}")
        hops = []
        for route in json.loads(out or "[]"):
            for hop in route.get("nexthops", [route]):
                if "gateway" in hop:
                    hops.append(str(hop["gateway"]))
        return sorted(hops)

    def wait_routes(self, ip: str, next_hops: list[str], timeout: float = 10.0) -> float:
        """Until the route to `ip` has exactly these next hops; the seconds it took."""
        started = time.monotonic()
        want = sorted(next_hops)
        while (now := self.routes(ip)) != want:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"route to {ip}: via {now} after {timeout}s, not via {want}")
            time.sleep(0.01)
        return time.monotonic() - started

    def close(self) -> None:
        """Stop the far client's loop and bird (bird removes its kernel routes)."""
        if self.far_client is not None:
            self.far_client.close()
        self.bird.terminate(grace=5)
