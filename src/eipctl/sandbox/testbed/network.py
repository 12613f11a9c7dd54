"""The bed's L2 network: a switch namespace with a bridge, node namespaces, a client namespace.

    switch ns  [ br0 ]--- n0 ~~ eth0 [node-0 ns]  198.51.100.10/24  2001:db8:1::10/64
                  |                               198.51.100.250/32 2001:db8:ffff::250/128
                  |------ n1 ~~ eth0 [node-1 ns]  198.51.100.11/24  2001:db8:1::11/64
                  |                               198.51.100.249/32 2001:db8:ffff::251/128
                  |------ cl ~~ eth0 [client ns]  198.51.100.2/24   2001:db8:1::2/64
                                                  203.0.113.0/24 and 2001:db8:f::/64 on-link

Each node link also carries two administrator's host addresses (a /32 and a /128, added
with `ip`, so without eipctl's marker): eipctl must never remove them, and `LocalBed` checks
after every scenario that they are still there (`NodeNet.missing_admin_addresses`).

Nothing is created in the host namespace. The client plays the upstream router: the external
pools are on-link for it, so it resolves each external IP with ARP / ND itself, and its
neighbour table is what gratuitous ARP and unsolicited NA must move. Its neighbour timers are
stretched (`STALE_FOR`) so that only an announcement, never ordinary re-resolution, can
move an entry within a test's time.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

from eipctl.sandbox.namespaces import Namespace, NamespaceSet, kill_pids_in, reap_leftovers

NODE_NET4 = ipaddress.ip_network("198.51.100.0/24")
NODE_NET6 = ipaddress.ip_network("2001:db8:1::/64")
POOL4 = ipaddress.ip_network("203.0.113.0/24")
POOL6 = ipaddress.ip_network("2001:db8:f::/64")
ADMIN_NET6 = ipaddress.ip_network("2001:db8:ffff::/64")
CLIENT4 = "198.51.100.2"
CLIENT6 = "2001:db8:1::2"
LINK = "eth0"
STALE_FOR = 120  # seconds: client neighbour entries neither expire nor re-probe meanwhile
FOREVER = 0xFFFFFFFF  # valid_life_time of an address without a lifetime (an admin's)


@dataclass
class NodeNet:
    """One node's namespace and link."""

    name: str  # the Kubernetes Node / IpNode name
    index: int
    ns: Namespace
    switch_port: str
    mac: str = ""

    @property
    def ip4(self) -> str:
        return str(NODE_NET4[10 + self.index])

    @property
    def ip6(self) -> str:
        return str(NODE_NET6[0x10 + self.index])

    @property
    def admin_addresses(self) -> set[str]:
        """The administrator's host addresses on the link: a /32 (counting down from .250,
        away from the node addresses) and a /128. Not eipctl's: it must never remove them."""
        return {f"{NODE_NET4[250 - self.index]}/32", f"{ADMIN_NET6[0x250 + self.index]}/128"}

    def configure(self) -> None:
        """Link up with the node's own and admin addresses (idempotent; also after a revive,
        as a link that went down lost its IPv6 addresses)."""
        self.ns.ip(f"link set {LINK} up")
        self.ns.ip(f"addr replace {self.ip4}/24 dev {LINK}")
        self.ns.ip(f"-6 addr replace {self.ip6}/64 dev {LINK} nodad")
        for address in sorted(self.admin_addresses):
            self.ns.ip(f"addr replace {address} dev {LINK}" + (" nodad" if ":" in address else ""))

    def missing_admin_addresses(self) -> set[str]:
        """Admin addresses no longer on the link, or no longer permanent (`valid_lft forever`)."""
        permanent = set()
        for entry in json.loads(self.ns.ip(f"-j addr show dev {LINK}") or "[]"):
            for info in entry.get("addr_info", []):
                if info.get("valid_life_time") == FOREVER:
                    permanent.add(f"{info['local']}/{info['prefixlen']}")
        return self.admin_addresses - permanent

    def link_down(self) -> None:
        self.ns.ip(f"link set {LINK} down")

    def link_up(self) -> None:
        self.configure()

    def external_addresses(self) -> set[str]:
        """Addresses on the link from the external pools (what the controller put there)."""
        found = set()
        for entry in json.loads(self.ns.ip(f"-j addr show dev {LINK}") or "[]"):
            for info in entry.get("addr_info", []):
                ip = ipaddress.ip_address(info["local"])
                if ip in POOL4 or ip in POOL6:
                    found.add(str(ip))
        return found

    def add_address(self, ip: str) -> None:
        plen = 32 if ipaddress.ip_address(ip).version == 4 else 128
        self.ns.ip(f"addr add {ip}/{plen} dev {LINK}" + (" nodad" if plen == 128 else ""))

    def del_address(self, ip: str) -> None:
        plen = 32 if ipaddress.ip_address(ip).version == 4 else 128
        self.ns.ip(f"addr del {ip}/{plen} dev {LINK}")


class Network:
    """Builds the topology in `NamespaceSet`-owned namespaces; `close()` removes all of it."""

    def __init__(self, node_count: int) -> None:
        self.tb = NamespaceSet()
        self.run_id = self.tb.run_id
        self.nodes: list[NodeNet] = []
        self.switch: Namespace | None = None
        self.client: Namespace | None = None
        self.node_count = node_count

    def build(self) -> None:
        reap_leftovers()
        self.switch = self.tb.namespace("sw")
        self.switch.ip("link add br0 type bridge")
        # no STP, no forwarding delay: a port forwards the moment it is up
        self.switch.ip("link set br0 type bridge stp_state 0 forward_delay 0")
        self.switch.ip("link set br0 up")
        self.client = self.tb.namespace("client")
        self._attach(self.client, "cl")
        self.client.ip(f"link set {LINK} up")
        self.client.ip(f"addr add {CLIENT4}/24 dev {LINK}")
        self.client.ip(f"-6 addr add {CLIENT6}/64 dev {LINK} nodad")
        self.client.ip(f"route add {POOL4} dev {LINK}")
        self.client.ip(f"-6 route add {POOL6} dev {LINK}")
        for family in ("ipv4", "ipv6"):
            self.client.sysctl(f"net.{family}.neigh.{LINK}.delay_first_probe_time", STALE_FOR)
            self.client.sysctl(
                f"net.{family}.neigh.{LINK}.base_reachable_time_ms", STALE_FOR * 1000
            )
        for i in range(self.node_count):
            self.add_node(i)

    def add_node(self, index: int) -> NodeNet:
        ns = self.tb.namespace(f"node-{index}")
        port = f"n{index}"
        self._attach(ns, port)
        node = NodeNet(f"node-{index}", index, ns, port)
        node.configure()
        node.mac = ns.mac(LINK).hex(":")
        self.nodes.append(node)
        return node

    def _attach(self, ns: Namespace, port: str) -> None:
        assert self.switch is not None
        self.tb.veth(self.switch, port, ns, LINK, up=False)
        self.switch.ip(f"link set {port} master br0")
        self.switch.ip(f"link set {port} up")

    def node(self, name: str) -> NodeNet:
        return next(n for n in self.nodes if n.name == name)

    def node_by_mac(self, mac: str) -> NodeNet | None:
        return next((n for n in self.nodes if n.mac == mac.lower()), None)

    def client_neighbour(self, ip: str) -> tuple[str, str] | None:
        """The client's neighbour entry for `ip`: (MAC, state), or None."""
        assert self.client is not None
        out = self.client.ip(f"-j neigh show {ip} dev {LINK}")
        for entry in json.loads(out or "[]"):
            mac = entry.get("lladdr")
            if mac:
                return mac.lower(), ",".join(entry.get("state", []))
        return None

    def close(self) -> None:
        for ns in self.tb.namespaces:  # processes first: a namespace outlives `ip netns del`
            kill_pids_in(ns.name)
        self.tb.close()
