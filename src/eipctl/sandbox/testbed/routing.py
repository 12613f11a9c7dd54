"""The bed's routed half, for pools announced by BGP: an upstream router, a far client behind
it, and FRR in every node namespace.

    far ns [eth0]~~far0 [router ns] eth0 ~~ rt --[ br0 ]-- n0 ~~ eth0 [node-0 ns]  FRR (zebra,
    192.0.2.2         192.0.2.1      198.51.100.1         ...             bfdd, bgpd) + reload.sh
    2001:db8:2::2     2001:db8:2::1  2001:db8:1::1                        eipctl-bgp (dummy)

- **Router** (`Router`): bird 2 in its own namespace on the switch, AS 64500, one eBGP session
  per node and family (every node AS 64512), each with BFD (100 ms x 3). Its kernel protocol
  merges equal routes from several nodes (`merge paths on`) into one multipath route: an IP
  held by several nodes is ECMP, spread per connection (`fib_multipath_hash_policy=1`, L4).
  It imports every route its nodes send and exports none to them; it is passive (the nodes
  connect). bird 2.0.12 merges BGP routes from different eBGP neighbours (its mergeability
  test compares local preference, AS path length, origin, MED, eBGP/iBGP and IGP metric,
  never the neighbour or the AS path itself), so no multipath-relax is needed.
- **Far client** (`FarClient`): 192.0.2.2 and 2001:db8:2::2 behind the router; it reaches an
  external IP only through the router's BGP routes (`ask`, `spread`). The nodes have a route
  back to the far networks via the router (`Router.route_back`).
- **FRR per node** (`FrrNode`): zebra, bfdd and bgpd in the node's namespace with a pathspace
  of their own (``-N <node namespace>``: /etc/frr/<ns>, /var/run/frr/<ns>), started with a
  minimal config; `deploy/workloads/frr/reload.sh` applies ``<run dir>/frr-<node>.conf``
  (what eipctl's controller renders) whenever it changes and reports in ``.status``.

Every namespace is the network's (`Network.tb`), so `Network.close()` removes it; `stop()`
and `close()` end the daemons first and remove the pathspace directories.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import json
import math
import os
import re
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from eipctl.sandbox.namespaces import Namespace, pid_alive, sh, why_unavailable
from eipctl.sandbox.testbed.client import Client
from eipctl.sandbox.testbed.network import LINK, Network, NodeNet
from eipctl.sandbox.testbed.processes import Process, wait_for
from eipctl.sandbox.testbed.responder import SERVICE_PORT

FRR_BIN = Path("/usr/lib/frr")
FRR_DAEMONS = ("zebra", "bfdd", "bgpd")
FRR_CONF_DIR = Path("/etc/frr")
FRR_RUN_DIR = Path("/var/run/frr")
FRR_CRASH_DIR = Path("/var/tmp/frr")  # <daemon>.<pid>/logbuf.<pid> of each running daemon
FRR_USER = "frr"  # the daemons drop to it (Debian's build); their vty group is frrvty
BIRD = "bird"
BIRDC = "birdc"
RELOAD_SH = Path("deploy/workloads/frr/reload.sh")  # in the source tree
RELOAD_SH_ENV = "EIPCTL_FRR_RELOAD_SH"  # overrides where reload.sh is

BGP_LINK = "eipctl-bgp"  # the dummy link whose addresses the nodes announce
ROUTER_ASN = 64500
NODE_ASN = 64512
ROUTER4 = "198.51.100.1"  # the router on the node network
ROUTER6 = "2001:db8:1::1"
FAR_NET4 = ipaddress.ip_network("192.0.2.0/24")
FAR_NET6 = ipaddress.ip_network("2001:db8:2::/64")
FAR_ROUTER4 = "192.0.2.1"
FAR_ROUTER6 = "2001:db8:2::1"
FAR_CLIENT4 = "192.0.2.2"
FAR_CLIENT6 = "2001:db8:2::2"
FAR_LINK = "far0"  # the router's link to the far client
BFD_INTERVAL_MS = 100
BFD_MULTIPLIER = 3

MINIMAL_FRR_CONF = "frr defaults datacenter\n!\n"
VTYSH_CONF = "service integrated-vtysh-config\n"


def routing_unavailable() -> str | None:
    """Why the routed bed cannot be built here (namespaces, FRR, bird), or None."""
    if (reason := why_unavailable()) is not None:
        return reason
    missing = [str(FRR_BIN / d) for d in FRR_DAEMONS if not (FRR_BIN / d).exists()]
    missing += [p for p in ("vtysh", BIRD, BIRDC, "sha256sum") if shutil.which(p) is None]
    if not (FRR_BIN / "frr-reload.py").exists():
        missing.append(str(FRR_BIN / "frr-reload.py"))
    if missing:
        return f"needs FRR and bird2 (apt-get install frr bird2): missing {', '.join(missing)}"
    try:
        sh("id", FRR_USER)
    except RuntimeError:
        return f"needs FRR's `{FRR_USER}` user (Debian's frr package creates it)"
    return None


def reload_script() -> Path:
    """deploy/workloads/frr/reload.sh: `$EIPCTL_FRR_RELOAD_SH`, else the source tree this
    module is in, else the current directory (tox runs from the checkout)."""
    if env := os.environ.get(RELOAD_SH_ENV):
        return Path(env)
    for base in (Path(__file__).resolve().parents[4], Path.cwd()):
        if (base / RELOAD_SH).is_file():
            return base / RELOAD_SH
    raise FileNotFoundError(f"{RELOAD_SH} not found (set {RELOAD_SH_ENV})")


def reap_leftover_pathspaces(prefix: str) -> list[Path]:
    """Remove the FRR pathspace directories (``<prefix><pid>-...``) of dead runs."""
    owner = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    removed = []
    for parent in (FRR_CONF_DIR, FRR_RUN_DIR):
        for path in parent.glob(f"{prefix}*"):
            m = owner.match(path.name)
            if m and not pid_alive(int(m.group(1))):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def add_bgp_link(node: NodeNet, name: str = BGP_LINK) -> str:
    """A dummy link `name` in the node's namespace, up (what eipctl's controller makes and
    puts the addresses it announces on); its kind. A kernel without the dummy driver (some
    VM kernels) gets an ifb link instead, which behaves the same here: up, always carrier,
    its addresses local and connected routes for zebra."""
    for kind in ("dummy", "ifb"):
        try:
            node.ns.ip(f"link add {name} type {kind}")
        except RuntimeError as err:
            if "Unknown device type" in str(err) and kind == "dummy":
                continue
            raise
        node.ns.ip(f"link set {name} up")
        return kind
    raise AssertionError("unreachable")


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


def _kill_group(proc: Process) -> None:
    """SIGKILL a process and what it started (its own session: `Process` starts one)."""
    if proc.alive and proc.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()


class FrrNode:
    """FRR (zebra, bfdd, bgpd) and the reloader in one node's namespace.

    `config_file` is what the reloader applies (eipctl's controller writes it, or a test);
    `status()` reads what the reloader said about it.
    """

    def __init__(
        self,
        node: NodeNet,
        run_dir: Path,
        *,
        pathspace: str | None = None,
        reload_interval: float = 0.5,
    ) -> None:
        self.node = node
        self.name = node.name
        self.pathspace = pathspace or node.ns.name  # unique per node and run
        self.conf_dir = FRR_CONF_DIR / self.pathspace
        self.sock_dir = FRR_RUN_DIR / self.pathspace
        self.config_file = run_dir / f"frr-{node.name}.conf"
        self.status_file = Path(f"{self.config_file}.status")
        self.daemons = [
            Process(f"frr-{node.name}-{daemon}", self._argv(daemon), run_dir, netns=node.ns.name)
            for daemon in FRR_DAEMONS
        ]
        env = {"FRR_PATHSPACE": self.pathspace, "RELOAD_INTERVAL": str(reload_interval)}
        argv = ["sh", str(reload_script()), str(self.config_file)]
        self.reloader = Process(
            f"frr-{node.name}-reload", argv, run_dir, netns=node.ns.name, env=env
        )

    def _argv(self, daemon: str) -> list[str]:
        # -N puts the config (/etc/frr/<ps>), the vty and zserv sockets and the pid files
        # (/var/run/frr/<ps>) in a space of this node's; -P 0: no TCP vty
        argv = [str(FRR_BIN / daemon), "-N", self.pathspace, "-f", str(self.conf_dir / "frr.conf")]
        return [*argv, "-P", "0", "--log", "stdout", "--log-level", "info"]

    @property
    def processes(self) -> list[Process]:
        return [*self.daemons, self.reloader]

    @property
    def alive(self) -> bool:
        return all(p.alive for p in self.processes)

    def start(self, timeout: float = 15.0) -> None:
        """Fresh pathspace directories, the daemons, then (once vtysh reaches all three) the
        reloader. Also after `kill()`: what the dead daemons left is wiped first."""
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """`start` without the wait (`wait_ready`), to start several nodes at once."""
        self.status_file.unlink(missing_ok=True)  # the new reloader applies the config again
        for path in (self.conf_dir, self.sock_dir):
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            shutil.chown(path, FRR_USER, FRR_USER)
        (self.conf_dir / "frr.conf").write_text(MINIMAL_FRR_CONF)
        (self.conf_dir / "vtysh.conf").write_text(VTYSH_CONF)
        for name in ("frr.conf", "vtysh.conf"):
            shutil.chown(self.conf_dir / name, FRR_USER, FRR_USER)
        self.daemons[0].start()  # zebra first: the others connect to its zserv socket
        wait_for(
            lambda: (self.sock_dir / "zserv.api").exists() or self._dead(self.daemons[:1]),
            10,
            what=f"zebra of {self.name}",
        )
        for proc in self.daemons[1:]:
            proc.start()

    def wait_ready(self, timeout: float = 15.0) -> None:
        def ready() -> bool:
            self._dead(self.daemons)
            out = self.vtysh("show daemons", check=False)
            return all(d in out.split() for d in FRR_DAEMONS)

        wait_for(ready, timeout, interval=0.1, what=f"FRR of {self.name} answering vtysh")
        if not self.reloader.alive:
            self.reloader.start()

    @staticmethod
    def _dead(daemons: list[Process]) -> bool:
        """False, or raises with the log of a daemon that exited."""
        for proc in daemons:
            if proc.popen is not None and not proc.alive:
                raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail(15)}")
        return False

    def kill(self) -> None:
        """SIGKILL every daemon and the reloader (the node died): its BGP sessions drop
        (the router sees the TCP reset, or, with the link down, BFD's silence)."""
        _kill_group(self.reloader)
        for daemon, proc in zip(FRR_DAEMONS, self.daemons, strict=True):
            pid = proc.pid
            _kill_group(proc)
            if pid is not None:  # a daemon's crash-log buffer, left behind by a SIGKILL
                shutil.rmtree(FRR_CRASH_DIR / f"{daemon}.{pid}", ignore_errors=True)

    def stop(self) -> None:
        """Kill everything and remove the pathspace directories."""
        self.kill()
        for path in (self.conf_dir, self.sock_dir):
            shutil.rmtree(path, ignore_errors=True)

    # ---- looking at it ----

    def vtysh(self, *commands: str, check: bool = True) -> str:
        args = [a for c in commands for a in ("-c", c)]
        return sh("vtysh", "-N", self.pathspace, *args, check=check)

    def show(self, command: str) -> str:
        """`vtysh -c <command>` in this node's FRR, e.g. ``show("show bgp summary")``."""
        return self.vtysh(command)

    def bgp_neighbors(self) -> dict[str, dict[str, object]]:
        """{peer address: its entry of `show bgp summary json`} over every address family
        (``state`` is "Established" when up; ``pfxSnt`` counts the family's routes sent)."""
        peers: dict[str, dict[str, object]] = {}
        summary = json.loads(self.show("show bgp summary json") or "{}")
        for family, data in summary.items():
            if isinstance(data, dict):
                for peer, info in data.get("peers", {}).items():
                    peers.setdefault(peer, {}).update(info, family=family)
        return peers

    def bfd_peers(self) -> dict[str, str]:
        """{peer address: BFD status ("up", "down", ...)}."""
        return {
            str(p["peer"]): str(p.get("status"))
            for p in json.loads(self.show("show bfd peers json") or "[]")
        }

    # ---- the reloader ----

    def write_config(self, text: str) -> str:
        """Replace the config file atomically (what the controller does); its sha256."""
        tmp = self.config_file.with_name(self.config_file.name + ".new")
        tmp.write_text(text)
        tmp.replace(self.config_file)
        return hashlib.sha256(text.encode()).hexdigest()

    def status(self) -> tuple[str, str, str] | None:
        """What the reloader said last: (sha256, "applied" | "failed", frr-reload's tail)."""
        try:
            first, _, rest = self.status_file.read_text().partition("\n")
        except FileNotFoundError:
            return None
        sha, _, state = first.partition(" ")
        return sha, state, rest

    def wait_config(self, sha: str, timeout: float = 20.0) -> str:
        """Until the reloader has tried the config `sha` (`write_config`'s); its outcome."""

        def tried() -> str | None:
            status = self.status()
            return status[1] if status is not None and status[0] == sha else None

        return str(wait_for(tried, timeout, interval=0.1, what=f"{self.name} reloading {sha}"))


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


def router_peer(name: str, address: str) -> dict[str, Any]:
    """The bed's router as a BGPPeer of every node (one per family: a session carries one),
    with BFD at the router's own interval, short timers and a fast reconnect."""
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "BGPPeer",
        "metadata": {"name": name},
        "spec": {
            "peerAddress": address,
            "peerASN": ROUTER_ASN,
            "myASN": NODE_ASN,
            "holdTimeSeconds": 9,
            "keepaliveTimeSeconds": 3,
            "connectTimeSeconds": 1,
            "bfd": {"receiveIntervalMs": BFD_INTERVAL_MS, "transmitIntervalMs": BFD_INTERVAL_MS},
        },
    }
