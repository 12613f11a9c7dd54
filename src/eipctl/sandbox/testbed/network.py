"""The bed's L2 network: a switch namespace with a bridge, node namespaces, a control
namespace for the schedulers, a client namespace.

    switch ns  [ br0 ]--- n0 ~~ eth0 [node-0 ns]  198.51.100.10/24  2001:db8:1::10/64
                  |                               198.51.100.250/32 2001:db8:ffff::250/128
                  |------ n1 ~~ eth0 [node-1 ns]  198.51.100.11/24  2001:db8:1::11/64
                  |                               198.51.100.249/32 2001:db8:ffff::251/128
                  |------ ct ~~ eth0 [control ns] 198.51.100.3/24   2001:db8:1::3/64
                  |------ cl ~~ eth0 [client ns]  198.51.100.2/24   2001:db8:1::2/64
                                                  203.0.113.0/24 and 2001:db8:f::/64 on-link

Each node link also carries two administrator's host addresses (a /32 and a /128, added
with `ip`, so without eipctl's marker): eipctl must never remove them, and `LocalBed` checks
after every scenario that they are still there (`NodeNet.missing_admin_addresses`).

The control namespace is where the scheduler replicas run: they probe every node's
controller over UDP on the node network (docs/liveness.md), as on a cluster where the
scheduler pods reach the nodes. `NodeNet.cut_liveness` drops that UDP inside one node's
namespace (nftables), so the node keeps its API and its L2 for the client.

Nothing is created in the host namespace. The client plays the upstream router: the external
pools are on-link for it, so it resolves each external IP with ARP / ND itself, and its
neighbour table is what gratuitous ARP and unsolicited NA must move. Its neighbour timers are
stretched (`STALE_FOR`) so that only an announcement, never ordinary re-resolution, can
move an entry within a test's time.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from dataclasses import dataclass

from eipctl.net.link import ManagedAddress
from eipctl.net.netlink import NetlinkLinkBackend
from eipctl.sandbox.namespaces import (
    PREFIX,
    Namespace,
    NamespaceSet,
    call_in_netns,
    kill_pids_in,
    new_run_id,
    reap_leftovers,
)

NODE_NET4 = ipaddress.ip_network("198.51.100.0/24")
NODE_NET6 = ipaddress.ip_network("2001:db8:1::/64")
POOL4 = ipaddress.ip_network("203.0.113.0/24")
POOL6 = ipaddress.ip_network("2001:db8:f::/64")
ADMIN_NET6 = ipaddress.ip_network("2001:db8:ffff::/64")
CLIENT4 = "198.51.100.2"
CLIENT6 = "2001:db8:1::2"
CONTROL4 = "198.51.100.3"  # the schedulers' namespace
CONTROL6 = "2001:db8:1::3"
LIVENESS_CUT_TABLE = "eipctl_bed_liveness_cut"  # nftables table of `NodeNet.cut_liveness`
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
    admin: bool = True  # with the administrator's host addresses (`admin_addresses`)

    @property
    def ip4(self) -> str:
        return str(NODE_NET4[10 + self.index])

    @property
    def ip6(self) -> str:
        return str(NODE_NET6[0x10 + self.index])

    @property
    def admin_addresses(self) -> set[str]:
        """The administrator's host addresses on the link: a /32 (counting down from .250,
        away from the node addresses) and a /128. Not eipctl's: it must never remove them.
        None on a network made without them (`Network(admin_addresses=False)`)."""
        if not self.admin:
            return set()
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

    def cut_liveness(self, port: int, hosts: list[str] | None = None) -> None:
        """Drop UDP to and from `port` in this namespace, both ways (nftables input and
        output): no liveness probe reaches the controller, no reply leaves. With `hosts`
        (IP literals), only the datagrams exchanged with those hosts (e.g. the schedulers'
        namespace only, or the other nodes only). Idempotent."""
        rules = [f"add table inet {LIVENESS_CUT_TABLE}", f"flush table inet {LIVENESS_CUT_TABLE}"]
        peers: list[str] = [""]
        if hosts is not None:
            peers = []
            for host in hosts:
                family = "ip6" if ":" in host else "ip"
                peers += [f"{family} saddr {host} ", f"{family} daddr {host} "]
        for chain in ("input", "output"):
            rules.append(
                f"add chain inet {LIVENESS_CUT_TABLE} {chain} "
                f"{{ type filter hook {chain} priority -10; policy accept; }}"
            )
            for field in ("dport", "sport"):
                for peer in peers:
                    rules.append(
                        f"add rule inet {LIVENESS_CUT_TABLE} {chain} {peer}udp {field} {port} drop"
                    )
        self.ns.exec("nft", "-f", "-", stdin="\n".join(rules) + "\n")

    def heal_liveness(self) -> None:
        """Remove `cut_liveness`'s rules (idempotent: adding the table first makes the delete
        succeed when there was none)."""
        table = f"inet {LIVENESS_CUT_TABLE}"
        self.ns.exec("nft", "-f", "-", stdin=f"add table {table}\ndelete table {table}\n")

    def liveness_cut(self) -> bool:
        """Whether `cut_liveness`'s table is in place."""
        out = self.ns.exec("nft", "list", "tables", check=False)
        return LIVENESS_CUT_TABLE in out

    def held_addresses(self) -> list[str]:
        """Every global address on the link that the network did not put there (the node's
        own and the admin's are left out): what the controller holds, whatever the pool."""
        ours = {self.ip4, self.ip6} | {a.split("/")[0] for a in self.admin_addresses}
        found = []
        for entry in json.loads(self.ns.ip(f"-j addr show dev {LINK}", check=False) or "[]"):
            for info in entry.get("addr_info", []):
                if info.get("scope") == "global" and info.get("local") not in ours:
                    found.append(str(info["local"]))
        return found

    def external_addresses(self) -> set[str]:
        """Addresses on the link from the external pools (what the controller put there)."""
        found = set()
        for entry in json.loads(self.ns.ip(f"-j addr show dev {LINK}") or "[]"):
            for info in entry.get("addr_info", []):
                ip = ipaddress.ip_address(info["local"])
                if ip in POOL4 or ip in POOL6:
                    found.add(str(ip))
        return found

    def managed_addresses(self) -> set[str]:
        """Addresses on the link that carry eipctl's marker (IFA_PROTO, `EIPCTL_ADDR_PROTO`),
        read over netlink inside the namespace as the controller reads them (`list_managed`):
        whatever their pool, every address an eipctl controller put there and left."""
        return {str(a.ip) for a in call_in_netns(self.ns.name, _list_managed, LINK)}

    def add_address(self, ip: str) -> None:
        plen = 32 if ipaddress.ip_address(ip).version == 4 else 128
        self.ns.ip(f"addr add {ip}/{plen} dev {LINK}" + (" nodad" if plen == 128 else ""))

    def del_address(self, ip: str) -> None:
        plen = 32 if ipaddress.ip_address(ip).version == 4 else 128
        self.ns.ip(f"addr del {ip}/{plen} dev {LINK}")


async def _list_managed(link: str) -> set[ManagedAddress]:
    """`list_managed` of the calling thread's namespace (run it with `call_in_netns`)."""
    backend = NetlinkLinkBackend()
    try:
        return await backend.list_managed(link)
    finally:
        await backend.close()


class Network:
    """Builds the topology in `NamespaceSet`-owned namespaces; `close()` removes all of it.

    The test bed builds it whole (`Network(3)`); `eipctl sandbox --netns` builds it without
    client and admin addresses and adds and removes its nodes one by one as they are revived
    and killed (`add_node`, `remove_node`: a killed node's namespace is deleted). Namespaces
    are named ``<prefix><pid>-<n>-<tag>``; `build()` first removes those of dead runs with
    the same prefix. `add_node` and `remove_node` may run in several threads at once.
    """

    def __init__(
        self,
        node_count: int,
        *,
        prefix: str = PREFIX,
        client: bool = True,
        admin_addresses: bool = True,
    ) -> None:
        self.prefix = prefix
        self.tb = NamespaceSet(run_id=new_run_id(prefix))
        self.run_id = self.tb.run_id
        self.nodes: list[NodeNet] = []
        self.switch: Namespace | None = None
        self.client: Namespace | None = None
        self.control: Namespace | None = None
        self.node_count = node_count
        self.with_client = client
        self.with_admin = admin_addresses
        self._lock = threading.Lock()

    @property
    def control_name(self) -> str:
        """The control namespace's name (known before `build()` makes it)."""
        return f"{self.run_id}-control"

    def build(self) -> None:
        """Switch, control namespace, client (unless left out) and `node_count` nodes
        (node-0, node-1, ...)."""
        reap_leftovers(self.prefix)
        self.switch = self.tb.namespace("sw")
        self.switch.ip("link add br0 type bridge")
        # no STP, no forwarding delay: a port forwards the moment it is up
        self.switch.ip("link set br0 type bridge stp_state 0 forward_delay 0")
        self.switch.ip("link set br0 up")
        self.control = self.tb.namespace("control")
        self._attach(self.control, "ct")
        self.control.ip(f"link set {LINK} up")
        self.control.ip(f"addr add {CONTROL4}/24 dev {LINK}")
        self.control.ip(f"-6 addr add {CONTROL6}/64 dev {LINK} nodad")
        if self.with_client:
            self._build_client()
        for i in range(self.node_count):
            self.add_node(i)

    def _build_client(self) -> None:
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

    def add_node(self, index: int, name: str | None = None, mac: str | None = None) -> NodeNet:
        """A node namespace on the switch: 198.51.100.(10+index), 2001:db8:1::(10+index)
        in hex; named ``node-<index>`` unless `name` is given; a random MAC unless `mac`."""
        ns = self.tb.namespace(f"node-{index}")
        port = f"n{index}"
        self._attach(ns, port)
        if mac is not None:
            ns.ip(f"link set {LINK} address {mac}")
        node = NodeNet(name or f"node-{index}", index, ns, port, admin=self.with_admin)
        node.configure()
        node.mac = ns.mac(LINK).hex(":")
        with self._lock:
            self.nodes.append(node)
        return node

    def add_host(self, tag: str, address: str) -> Namespace:
        """Another host on the switch with ``address``/24 (IPv4), not a node: an attacker in
        the hostile stories and bench_hostile.py. Removed with the rest at `close()`."""
        ns = self.tb.namespace(tag)
        self._attach(ns, tag[:6])
        ns.ip(f"link set {LINK} up")
        ns.ip(f"addr add {address}/24 dev {LINK}")
        return ns

    def remove_node(self, name: str) -> None:
        """Pull the plug: what runs in the node's namespace is killed, the namespace deleted
        with its link and every address on it."""
        with self._lock:
            node = self.node(name)
            self.nodes.remove(node)
        self.tb.remove(node.ns)

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
