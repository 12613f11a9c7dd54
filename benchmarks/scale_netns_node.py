"""bench_scale.py --netns-node: one real ``eipctl controller`` process on the netns bed beside
the simulated nodes, and what it costs the API and the network, to compare with them.

The node is the sandbox's (`eipctl.sandbox.netns.NetnsFleet`, what ``eipctl sandbox --netns``
runs): a namespace on the bed's switch (198.51.100.11 on eth0), the real controller started
as the CLI starts it (``python -m eipctl controller`` in ``ip netns exec``) with deploy/'s
flags for a node (its liveness key file, its own node key file, its node name and link) and
the API through the bed's relay (127.0.0.1:6443 inside the namespace, to the benchmark's
emulator). Two things differ from a DaemonSet pod, both for the benchmark's sake:

- liveness: the schedulers run in the host namespace (where they probe the simulated nodes
  on 127.1.x.y), which has no route to the bed's node network and must get none. So the
  controller answers on the loopback address a simulated node ``node-<N>`` would have
  (`nodes.liveness_address`), inside its namespace (``--liveness-address``, where a pod has
  the node's IP), and `LivenessRelay` carries the datagrams: a socket on that address in the
  host namespace, and per prober a socket made inside the node's namespace that sends to the
  controller and gets its replies. Both ends are loopback; the probes and replies themselves
  are untouched;
- the API user: its kubeconfig carries a token of its own (the emulator checks none), by
  which `RequestTally` counts, in the emulator, the requests this controller makes, by verb.

Its UDP is counted twice, independently: by the relay (probes in, replies out) and by the
namespace's own ``/proc/net/snmp`` (``Udp: InDatagrams OutDatagrams``, read with ``ip netns
exec``). The relay's inner sockets live in that namespace too, so each probe and each reply
is counted there twice (sent by one socket, received by another): the controller's own is
half the sum. The pool is then a TEST-NET one (`POOL_CIDR`): the controller really adds its
claims' addresses to eth0 and announces them on the bed's switch.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections import Counter
from pathlib import Path
from typing import Any

from bench_api_load import verb_of

POOL_CIDR = "203.0.113.0/24"
"""The pool with --netns-node (the real controller puts these addresses on a link)."""
MAX_SERVICES = 250
LIVENESS_PORT = 9473


class RequestTally:
    """The emulator's requests by verb, for one bearer token (wraps its resource handler, as
    `bench_api_load.instrument` does for all of them)."""

    def __init__(self, server: Any, token: str) -> None:
        self.by_verb: Counter[str] = Counter()
        self.token = token
        self._auth = f"Bearer {token}"
        handlers = server._routes.handlers
        inner = handlers.resource

        async def counted(request: Any) -> Any:
            if request.headers.get("Authorization") == self._auth:
                self.by_verb[f"{verb_of(request)} {_resource(request.path)}"] += 1
            return await inner(request)

        handlers.resource = counted


def _resource(path: str) -> str:
    """``/apis/eipctl.io/v1alpha1/ipnodes/node-1/status`` -> ``ipnodes/status``."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return rest[0] + (f"/{rest[2]}" if len(rest) >= 3 else "")


class LivenessRelay:
    """UDP between the host namespace's probers and a controller in a namespace, on the same
    loopback address and port on both sides (the module docstring)."""

    def __init__(self, netns: str, address: str, port: int = LIVENESS_PORT) -> None:
        self.netns = netns
        self.address = address
        self.port = port
        self.probes = 0
        self.replies = 0
        self._outer: socket.socket | None = None
        self._inner: dict[tuple[str, int], socket.socket] = {}

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((self.address, self.port))
        sock.setblocking(False)
        self._outer = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._from_prober)

    def _from_prober(self) -> None:
        assert self._outer is not None
        while True:
            try:
                data, source = self._outer.recvfrom(65536)
            except BlockingIOError:
                return
            inner = self._inner.get(source)
            if inner is None:
                inner = self._inner[source] = self._open_inner(source)
            with contextlib.suppress(OSError):  # the controller not up yet: refused
                inner.send(data)
                self.probes += 1

    def _open_inner(self, source: tuple[str, int]) -> socket.socket:
        from eipctl.sandbox.namespaces import call_in_netns

        sock: socket.socket = call_in_netns(self.netns, _connected, self.address, self.port)
        asyncio.get_running_loop().add_reader(sock.fileno(), self._from_node, sock, source)
        return sock

    def _from_node(self, sock: socket.socket, source: tuple[str, int]) -> None:
        assert self._outer is not None
        while True:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:  # ICMP port unreachable of an earlier probe
                continue
            with contextlib.suppress(OSError):
                self._outer.sendto(data, source)
                self.replies += 1

    def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in [*self._inner.values(), *filter(None, [self._outer])]:
            loop.remove_reader(sock.fileno())
            sock.close()
        self._inner.clear()
        self._outer = None


def _connected(address: str, port: int) -> socket.socket:
    """A UDP socket made in the calling thread's namespace, sending to address:port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.connect((address, port))
    sock.setblocking(False)
    return sock


class NetnsController:
    """Node `name` (index `index` of the cell) as a real controller on the netns bed."""

    def __init__(self, server: Any, name: str, index: int, key_file: Path, tmp: Path) -> None:
        from eipctl.sandbox.netns import NetnsFleet
        from eipctl.sandbox.nodes import liveness_address

        self.server = server
        self.name = name
        self.address = liveness_address(index)
        self.token = f"netns-node-{secrets.token_hex(8)}"
        self.requests = RequestTally(server, self.token)
        state = tmp / "netns"
        state.mkdir(parents=True, exist_ok=True)
        self.fleet = NetnsFleet(
            [name],
            state_dir=state,
            upstream=(server.host, server.port),
            log_level="info",
            liveness_key_file=key_file,
            controller_flags=["--liveness-address", self.address],
        )
        self.relay: LivenessRelay | None = None

    @property
    def log_path(self) -> Path:
        return self.fleet.state_dir / f"controller-{self.name}.log"

    async def start(self) -> None:
        """Build the bed (switch, control namespace, the node's namespace and relay), start
        the controller, and relay its liveness. `stop` undoes whatever of it was done."""
        from eipctl.sandbox.netns import write_node_kubeconfig

        write_node_kubeconfig(self.server, self.fleet.node_kubeconfig, token=self.token)
        await self.fleet.start()
        net = self.fleet.get(self.name).net
        assert net is not None
        self.relay = LivenessRelay(net.ns.name, self.address)
        await self.relay.start()

    def registered(self) -> bool:
        """Whether its IpNode exists (the controller registered)."""
        return self.server.store.find("eipctl.io", "ipnodes", self.name) is not None

    def sample(self) -> dict[str, Any]:
        """Counters so far: requests by verb and resource, the relay's datagrams, and the
        namespace's UDP (/proc/net/snmp)."""
        net = self.fleet.get(self.name).net
        snmp = udp_counters(net.ns.exec("cat", "/proc/net/snmp")) if net is not None else {}
        relay = self.relay
        return {
            "requests": dict(self.requests.by_verb),
            "relay_probes": relay.probes if relay else 0,
            "relay_replies": relay.replies if relay else 0,
            "snmp_in": snmp.get("InDatagrams", 0),
            "snmp_out": snmp.get("OutDatagrams", 0),
            "snmp_errors": snmp.get("InErrors", 0) + snmp.get("NoPorts", 0),
        }

    async def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
        await self.fleet.stop()


def udp_counters(snmp: str) -> dict[str, int]:
    """The ``Udp:`` line pair of /proc/net/snmp as a dict."""
    rows = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0], rows[1], strict=True)}


def reap() -> list[str]:
    """The bed's namespaces whose benchmark process is gone (and what runs in them)."""
    from eipctl.sandbox.namespaces import reap_leftovers
    from eipctl.sandbox.netns import PREFIX

    return reap_leftovers(PREFIX)


def figures(a: dict[str, Any], b: dict[str, Any], elapsed: float) -> dict[str, Any]:
    """Per second over the window, from two `NetnsController.sample`s."""
    verbs: dict[str, float] = {}
    by_resource: dict[str, float] = {}
    for key, v in b["requests"].items():
        rate = (v - a["requests"].get(key, 0)) / elapsed
        verb = key.split(" ", 1)[0]
        verbs[verb] = verbs.get(verb, 0.0) + rate
        by_resource[key] = rate
    relay = b["relay_probes"] - a["relay_probes"] + b["relay_replies"] - a["relay_replies"]
    snmp = b["snmp_in"] - a["snmp_in"] + b["snmp_out"] - a["snmp_out"]
    return {
        "requests": dict(sorted(verbs.items())),
        "by_resource": dict(sorted(by_resource.items())),
        "udp_relay": relay / elapsed,
        "udp_snmp": snmp / 2 / elapsed,
        "probes": (b["relay_probes"] - a["relay_probes"]) / elapsed,
        "replies": (b["relay_replies"] - a["relay_replies"]) / elapsed,
        "snmp_errors": b["snmp_errors"] - a["snmp_errors"],
        "total": dict(sorted(b["requests"].items())),  # since its start, by verb and resource
    }


def compare_lines(r: dict[str, Any]) -> list[str]:
    """The real controller beside the simulated nodes' average, with the difference."""
    real, sim = r["netns"], r["node_requests"]
    out = ["  the real controller (netns bed) vs a simulated node, per second:"]
    for verb in sorted(set(real["requests"]) | set(sim)):
        a, b = real["requests"].get(verb, 0.0), sim.get(verb, 0.0)
        out.append(f"    {verb:6} real {a:.4f}  simulated {b:.4f}  {_diff(a, b)}")
    a, b = sum(real["requests"].values()), sum(sim.values())
    out.append(f"    {'all':6} real {a:.4f}  simulated {b:.4f}  {_diff(a, b)}")
    out.append(
        f"    UDP    real {real['udp_relay']:.2f} (relay: {real['probes']:.2f} probes in, "
        f"{real['replies']:.2f} replies out; netns snmp {real['udp_snmp']:.2f}, "
        f"{real['snmp_errors']} errors)  simulated {r['udp_per_node']:.2f}  "
        f"{_diff(real['udp_relay'], r['udp_per_node'])}"
    )
    out.append(
        "    real by resource: "
        + ", ".join(f"{k} {v:.4f}" for k, v in real["by_resource"].items() if v)
    )
    out.append(
        "    since the start (counts, not rates): real "
        + ", ".join(f"{k} {v}" for k, v in real["total"].items())
        + "; a simulated node "
        + ", ".join(f"{k} {v:.1f}" for k, v in r.get("node_requests_total", {}).items())
    )
    return out


def _diff(real: float, simulated: float) -> str:
    if not real:
        return "(real 0)"
    return f"{100 * (simulated - real) / real:+.1f}%"
