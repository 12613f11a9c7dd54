"""The whole bed: emulator, scheduler and allocator replicas, node namespaces with controllers.

The schedulers run in the control namespace on the node network (they probe every node's
controller over UDP, docs/liveness.md); the allocators, which need only the API, run in the
host namespace. Schedulers and controllers share a random liveness key written into the run
directory (`liveness.key`).

    with LocalBed(BedOptions(nodes=3)) as bed:
        bed.kube.create_service("web")
        ip = bed.wait_for_ip("web")
        assert bed.client.ask(ip) in bed.node_names

`LocalBed` builds everything on this machine (root needed); `RemoteCluster` gives the same
`kube` view of a real cluster for the scenarios that need no namespaces. Everything a bed
starts is removed by `close()`, which `with` and the pytest fixture always call; what a
crashed run left behind is removed when the next bed starts.
"""

from __future__ import annotations

import base64
import functools
import itertools
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from eipctl.sandbox.namespaces import Namespace, nft_unavailable
from eipctl.sandbox.relay import NODE_API_PORT, ApiRelay
from eipctl.sandbox.testbed.client import Client
from eipctl.sandbox.testbed.emulator import Emulator
from eipctl.sandbox.testbed.kube import Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from eipctl.sandbox.testbed.network import Network, NodeNet
from eipctl.sandbox.testbed.pools import LEASE_NAMESPACE, POOLS
from eipctl.sandbox.testbed.processes import (
    Process,
    reap_leftover_processes,
    wait_for,
)
from eipctl.sandbox.testbed.responder import Responder
from eipctl.sandbox.testbed.routing import FrrNode, Router

CRDS = Path(str(resources.files("eipctl") / "crds"))  # the package's CRDs (deploy/crds)
RUN_PREFIX = "eipctl-e2e-"
_beds = itertools.count()
# Fast-but-realistic flags for the test suite; benchmarks pass `fast=False` (the defaults).
FAST_CONTROLLER_FLAGS = ["--resync-interval", "2s"]
QUIET = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]
LIVENESS_PORT = 9473  # the controllers' default --liveness-port
LIVENESS_KEY = "liveness.key"  # in the run directory: what the Secret eipctl-liveness holds


@dataclass
class BedOptions:
    nodes: int = 3
    eipctl: bool = True  # False: network and API only (the bed's own self-test)
    fast: bool = True
    log_level: str = "info"
    scheduler_flags: list[str] = field(default_factory=list)
    allocator_flags: list[str] = field(default_factory=list)
    controller_flags: list[str] = field(default_factory=list)
    keep_logs: bool = True  # False: the run directory (logs, kubeconfigs) goes at close()
    bgp: bool = False  # a BGP router (bird), a far client and FRR in every node (routing.py)


class LocalBed:
    """Everything on this machine. Methods are synchronous and safe to call from tests."""

    local = True

    def __init__(self, options: BedOptions | None = None) -> None:
        self.options = options or BedOptions()
        base = Path(os.environ.get("EIPCTL_E2E_RUN_DIR") or tempfile.gettempdir())
        self.run_dir = base / f"{RUN_PREFIX}{os.getpid()}-{next(_beds)}"
        self.network = Network(self.options.nodes)
        self.loop: BackgroundLoop | None = None
        self.kube: Kube = None  # type: ignore[assignment]
        self.client: Client = None  # type: ignore[assignment]
        self.emulator: Emulator | None = None
        self.api: Process | None = None  # the emulator's process
        self.api_url = ""
        self.schedulers: list[Process] = []
        self.allocators: list[Process] = []
        self.controllers: dict[str, Process] = {}
        self.relays: dict[str, ApiRelay] = {}  # per node, and "control" for the schedulers
        self.responders: dict[str, Responder] = {}
        self.router: Router | None = None  # with `options.bgp`
        self.frr: dict[str, FrrNode] = {}  # with `options.bgp`: per node
        self.key_file = self.run_dir / LIVENESS_KEY
        self.dead: set[str] = set()
        self.cut: set[str] = set()
        self.liveness_cut: set[str] = set()
        self.frozen: set[str] = set()
        self._restarting: dict[str, int] = {}  # node -> its heartbeat before a (re)start

    # ---- lifecycle ----

    def __enter__(self) -> LocalBed:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Build the network and the API, then start eipctl (unless `options.eipctl` is off)."""
        reap_leftover_processes(self.run_dir.parent, RUN_PREFIX)
        self.run_dir.mkdir(parents=True)
        self._write_liveness_key()
        self._start_api()
        self.loop = BackgroundLoop("bed")
        self.kube = Kube(self.loop, self.run_dir / "kubeconfig")
        self.kube.ensure_namespace(LEASE_NAMESPACE)
        self.network.build()
        assert self.network.client is not None
        self.client = Client(self.network.client.name)
        assert self.network.control is not None
        self._start_relay("control", self.network.control)
        for node in self.network.nodes:
            self._start_node_plumbing(node)
        if self.options.bgp:
            self._start_routing()
        for name, spec in POOLS.items():
            self.kube.apply_pool(name, spec)
        if self.options.eipctl:
            self.start_processes()

    def _start_api(self) -> None:
        self.emulator = Emulator(self.run_dir, crds=CRDS)
        self.api = self.emulator.process
        self.emulator.start()
        self.api_url = self.emulator.url

    def _write_liveness_key(self) -> None:
        """A fresh random key (32 bytes, base64: one line of 44 characters), owner-only."""
        key = base64.b64encode(secrets.token_bytes(32)).decode()
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")

    def _start_relay(self, name: str, ns: Namespace) -> None:
        """An API relay on 127.0.0.1:6443 in `ns`, and `kubeconfig-<name>` pointing at it."""
        assert self.loop is not None
        host, port = self.api_url.removeprefix("http://").rsplit(":", 1)
        relay = ApiRelay(ns.name, (host, int(port)))
        self.relays[name] = relay  # registered first: close() stops it even if start fails
        self.loop.run(relay.start())
        kubeconfig = yaml.safe_load((self.run_dir / "kubeconfig").read_text())
        kubeconfig["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{NODE_API_PORT}"
        (self.run_dir / f"kubeconfig-{name}").write_text(yaml.safe_dump(kubeconfig))

    def _start_node_plumbing(self, node: NodeNet) -> None:
        assert self.loop is not None
        self._start_relay(node.name, node.ns)
        responder = Responder(node.ns.name, node.name, self.run_dir)
        self.responders[node.name] = responder
        self.loop.run(responder.start())
        self.kube.create_node(node.name, {"kubernetes.io/hostname": node.name})

    def _start_routing(self) -> None:
        """The router with the far client, and FRR in every node (docs/testbed.md)."""
        self.router = Router(self.network, self.run_dir)  # registered first: close() stops it
        self.router.build()
        for node in self.network.nodes:
            self.frr[node.name] = FrrNode(node, self.run_dir)
        for frr in self.frr.values():
            frr.launch()
        for frr in self.frr.values():
            frr.wait_ready()

    def start_processes(self) -> None:
        assert self.network.control is not None
        common = ["--log-level", self.options.log_level, *QUIET]
        lease = ["--lease-namespace", LEASE_NAMESPACE]
        key = ["--liveness-key-file", str(self.key_file)]
        for i in range(2):  # two replicas each: a leader and a standby
            name = f"scheduler-{i}"
            args = ["scheduler", *self._kubeconfig("control"), *common, *lease, *key]
            args += ["--identity", name, *self.options.scheduler_flags]
            self.schedulers.append(self._eipctl(name, args, netns=self.network.control.name))
            name = f"allocator-{i}"
            args = ["allocator", *self._kubeconfig(None), *common, *lease, "--identity", name]
            self.allocators.append(self._eipctl(name, [*args, *self.options.allocator_flags]))
        for node in self.network.nodes:
            flags = ["controller", "--node-name", node.name, "--iface", "eth0", *common]
            flags += [*self._kubeconfig(node.name), *key, "--liveness-address", node.ip4]
            flags += (FAST_CONTROLLER_FLAGS if self.options.fast else []) + list(
                self.options.controller_flags
            )
            if node.name in self.frr:  # the controller renders what the node's FRR runs
                flags += ["--frr-config", str(self.frr[node.name].config_file)]
            self.controllers[node.name] = self._eipctl(
                f"controller-{node.name}", flags, netns=node.ns.name
            )
        for proc in self.processes():
            proc.start()

    def _kubeconfig(self, relay: str | None) -> list[str]:
        """--kubeconfig: the API itself (None), or through the relay of a namespace."""
        name = "kubeconfig" if relay is None else f"kubeconfig-{relay}"
        return ["--kubeconfig", str(self.run_dir / name)]

    def _eipctl(self, name: str, args: list[str], netns: str | None = None) -> Process:
        return Process(name, [sys.executable, "-m", "eipctl", *args], self.run_dir, netns=netns)

    def processes(self) -> list[Process]:
        return [*self.schedulers, *self.allocators, *self.controllers.values()]

    def close(self) -> None:
        """Stop and remove everything; never raises until all of it was tried."""
        errors: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as exc:
                errors.append(f"{what}: {exc!r}")

        for proc in self.processes():
            attempt(proc.name, proc.kill)
        loop = self.loop
        if loop is not None:

            def stop(part: ApiRelay | Responder) -> None:
                loop.run(part.stop(), 5)

            parts: list[ApiRelay | Responder] = [*self.relays.values(), *self.responders.values()]
            for part in parts:
                attempt(type(part).__name__, functools.partial(stop, part))
            if self.kube is not None:
                attempt("kube client", self.kube.close)
        if self.client is not None:
            attempt("client loop", self.client.close)
        for frr in self.frr.values():
            attempt(f"FRR of {frr.name}", frr.stop)
        if self.router is not None:
            attempt("router", self.router.close)
        if self.loop is not None:
            attempt("bed loop", self.loop.stop)
        attempt("network", self.network.close)
        if self.api is not None:
            attempt("apiserver", self.api.kill)
        if not self.options.keep_logs and not errors:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        if errors:
            raise RuntimeError("bed cleanup: " + "; ".join(errors))

    # ---- what the scenarios look at ----

    @property
    def node_names(self) -> list[str]:
        return [n.name for n in self.network.nodes]

    @property
    def live_nodes(self) -> list[str]:
        faulty = self.dead | self.cut | self.liveness_cut | self.frozen
        return [n for n in self.node_names if n not in faulty]

    def node(self, name: str) -> NodeNet:
        return self.network.node(name)

    def holders(self, ip: str) -> list[str]:
        """Nodes whose link carries `ip` right now (read from each namespace)."""
        return [n.name for n in self.network.nodes if ip in n.external_addresses()]

    def mac_of(self, node: str) -> str:
        return self.network.node(node).mac

    def wait_for_ip(self, service: str, timeout: float = 15.0) -> str:
        ips = wait_for(
            lambda: self.kube.external_ips(service), timeout, what=f"an external IP on {service}"
        )
        return str(ips[0])

    def wait_answering(self, ip: str, timeout: float = 15.0, by: str | None = None) -> str:
        """Until a TCP probe from the client to `ip` is answered (by node `by`, if given)."""

        def answered() -> str | None:
            who = self.client.ask(ip, timeout=0.5)
            return who if who and (by is None or who == by) else None

        return str(
            wait_for(answered, timeout, what=f"{ip} answering" + (f" from {by}" if by else ""))
        )

    def leader(self, component: str) -> Process:
        """The running process that holds `component`'s Lease."""
        holder = wait_for(
            lambda: self.kube.lease_holder(f"eipctl-{component}", LEASE_NAMESPACE),
            15,
            what=f"a {component} leader",
        )
        replicas = self.schedulers if component == "scheduler" else self.allocators
        return next(p for p in replicas if p.name == holder)

    def managed_addresses(self) -> dict[str, set[str]]:
        """{node: the addresses with eipctl's marker on its link} for every node, read over
        netlink in each namespace (`NodeNet.managed_addresses`): what controllers left."""
        return {n.name: n.managed_addresses() for n in self.network.nodes}

    # ---- rolling updates ----

    def replace_controller(self, name: str, grace: float = 15.0, timeout: float = 20.0) -> float:
        """One step of the DaemonSet's rolling update on node `name`: SIGTERM to the running
        controller (SIGKILL after `grace`, the pod's terminationGracePeriodSeconds), the new
        one started, then waited for until in service (`wait_in_service`), as the DaemonSet
        waits for the new pod to be ready before the next node. Returns the seconds from the
        SIGTERM to back in service."""
        started = time.monotonic()
        self.controllers[name].terminate(grace=grace)
        self.start_controller(name)
        self.wait_in_service([name], timeout)
        return time.monotonic() - started

    def replace_replica(
        self,
        proc: Process,
        *,
        env: dict[str, str] | None = None,
        grace: float = 10.0,
        timeout: float = 20.0,
        while_down: Callable[[], object] | None = None,
    ) -> float:
        """One step of a scheduler or allocator Deployment's rolling update (maxSurge 0,
        maxUnavailable 1): SIGTERM to the replica (SIGKILL after `grace`), its replacement
        started (with `env` added to its environment, as `kubectl set env` changes the pod
        template), then waited for until it is back as leader or warm standby
        (`wait_replica_ready`). `while_down` is called after the old one exited and before
        the new one starts. Returns the seconds from the SIGTERM to ready."""
        started = time.monotonic()
        proc.terminate(grace=grace)
        if while_down is not None:
            while_down()
        if env:
            proc.env = {**(proc.env or {}), **env}
        offset = proc.log_size()
        proc.start()
        self.wait_replica_ready(proc, offset, timeout)
        return time.monotonic() - started

    def wait_replica_ready(self, proc: Process, since: int, timeout: float = 20.0) -> None:
        """Until a scheduler or allocator replica, started after its log offset `since`, is
        back as leader or warm standby: its caches have listed (what its /readyz checks,
        `caches.synced`) and it has read the Lease (`leader.observed`)."""

        def ready() -> bool:
            if not proc.alive:
                raise RuntimeError(f"{proc.name} exited after its start:\n{proc.log_tail(15)}")
            text = proc.log_since(since)
            return "caches.synced" in text and "leader.observed" in text

        wait_for(ready, timeout, what=f"{proc.name} back as leader or standby")

    # ---- faults ----

    def kill_node(self, name: str) -> None:
        """The node dies: its controller is SIGKILLed and its link goes down at once (then its
        FRR is killed: with the link down no TCP reset leaves, the router sees BFD's silence)."""
        if name in self.controllers:
            self.controllers[name].kill()
        self.network.node(name).link_down()
        if name in self.frr:
            self.frr[name].kill()
        self.dead.add(name)

    def revive_node(self, name: str) -> None:
        node = self.network.node(name)
        node.link_up()
        if self.router is not None:
            self.router.route_back(node)  # the link going down took it
        if name in self.frr and not self.frr[name].alive:
            self.frr[name].kill()  # what is left of it
            self.frr[name].start()
        if name in self.controllers and not self.controllers[name].alive:
            self.start_controller(name)
        self.dead.discard(name)

    def start_controller(self, name: str) -> None:
        """Start node `name`'s controller again; `wait_in_service` then waits for it."""
        self._restarting[name] = self.kube.heartbeats().get(name, -1)
        self.controllers[name].start()

    def cut_from_api(self, name: str) -> None:
        assert self.loop is not None
        self.loop.run(self.relays[name].cut())
        self.cut.add(name)

    def reconnect_to_api(self, name: str) -> None:
        assert self.loop is not None
        self.loop.run(self.relays[name].heal())
        self.cut.discard(name)

    def cut_liveness(self, name: str) -> None:
        """The node's liveness UDP (port 9473, both ways) is dropped inside its namespace;
        its API and its link for the client stay. Needs `nft` (`nft_unavailable()`)."""
        if (reason := nft_unavailable()) is not None:
            raise RuntimeError(f"cut_liveness {reason}")
        self.liveness_cut.add(name)  # first: heal() removes even a half-made table
        self.network.node(name).cut_liveness(LIVENESS_PORT)

    def heal_liveness(self, name: str) -> None:
        self.network.node(name).heal_liveness()
        self.liveness_cut.discard(name)

    def freeze_controller(self, name: str) -> None:
        self.controllers[name].freeze()
        self.frozen.add(name)

    def thaw_controller(self, name: str) -> None:
        self.controllers[name].thaw()
        self.frozen.discard(name)

    def restart_api(self) -> int:
        """The API server restarts: every connection (all watches) drops; the data stays.
        Returns once the restarted server answers (its restart generation, which it returns,
        moved), so the next call cannot land in the restart."""
        assert self.emulator is not None
        return self.emulator.restart()

    def drop_watches(self) -> int:
        assert self.emulator is not None
        return self.emulator.drop_watches()

    # ---- between scenarios ----

    def heal(self) -> None:
        """Undo every fault: thaw, reconnect, revive nodes, restart dead processes.

        Then fails if a node that stayed up lost one of its admin addresses meanwhile (they
        are put back first). A dead node's link went down, which dropped its IPv6 addresses:
        that is not eipctl's doing, and reviving the node puts them back.
        """
        lost = self.admin_addresses_lost([n for n in self.node_names if n not in self.dead])
        for name in list(self.frozen):
            self.thaw_controller(name)
        for name in list(self.cut):
            self.reconnect_to_api(name)
        for name in list(self.liveness_cut):
            self.heal_liveness(name)
        for name in list(self.dead):
            self.revive_node(name)
        for frr in self.frr.values():
            if not frr.alive:
                frr.kill()
                frr.start()
        for name, proc in self.controllers.items():
            if not proc.alive:
                self.start_controller(name)
        for proc in [*self.schedulers, *self.allocators]:
            if not proc.alive:
                proc.start()
        if lost:
            raise RuntimeError(f"eipctl removed admin addresses (put back now): {lost}")

    def admin_addresses_lost(self, nodes: list[str]) -> list[str]:
        """The admin addresses (`NodeNet.admin_addresses`) missing from these nodes' links,
        each put back at once so that the next scenario starts whole."""
        lost = []
        for node in self.network.nodes:
            missing = node.missing_admin_addresses() if node.name in nodes else set()
            if missing:
                lost += [f"{address} on {node.name}" for address in sorted(missing)]
                node.configure()
        return lost

    def reset(self, timeout: float = 20.0) -> None:
        """Heal, delete the scenarios' Services, wait until their claims and addresses are gone.

        If eipctl does not clean up within `timeout`, the leftovers are removed by hand (so the
        next scenario starts clean) and this reset fails, naming them.
        """
        self.heal()
        for svc in self.kube.services():
            self.kube.delete_service(svc["metadata"]["name"])
        for name, spec in POOLS.items():
            self.kube.apply_pool(name, spec)
        left: list[str] = []
        try:
            wait_for(lambda: not self.kube.claims(), timeout, what="every IpClaim released")
        except TimeoutError:
            for claim in self.kube.claims():
                left.append(f"claim {claim['metadata']['name']} {claim.get('spec')}")
                self.kube.delete_claim(claim["metadata"]["name"])
        try:
            wait_for(
                lambda: not any(n.external_addresses() for n in self.network.nodes),
                timeout,
                what="every external address removed from the nodes",
            )
        except TimeoutError:
            for node in self.network.nodes:
                for ip in node.external_addresses():
                    left.append(f"{ip} on {node.name}")
                    node.del_address(ip)
        self.wait_in_service(self.node_names, timeout)
        # what a restarted controller does after this is seen by the next heal()
        lost = self.admin_addresses_lost(self.node_names)
        if left:
            raise RuntimeError(f"eipctl did not clean up (removed by hand now): {left}")
        if lost:
            raise RuntimeError(f"eipctl removed admin addresses (put back now): {lost}")

    def wait_in_service(self, nodes: list[str], timeout: float = 20.0) -> None:
        """Until each node is back in service as the scheduler and the client see it: a
        controller the bed (re)started has registered (its start-up heartbeat moved the
        counter), the scheduler leader judges every node live (its IpNode's Live condition
        is True: it answers the liveness probes), and every controller has published its
        link's MACs (a pass over the link; after a start, after its start-up purge)."""

        def started() -> bool:
            beats = self.kube.heartbeats()
            for name in [n for n in self._restarting if n in nodes]:
                if beats.get(name, -1) != self._restarting[name]:
                    del self._restarting[name]
            return not any(n in self._restarting for n in nodes)

        wait_for(started, timeout, interval=0.1, what=f"the controllers of {nodes} registered")
        wait_for(
            lambda: self.kube.live(nodes),
            timeout,
            interval=0.05,
            what=f"{nodes} live (IpNode condition Live=True)",
        )
        wait_for(
            lambda: self.kube.macs_published(nodes),
            timeout,
            interval=0.1,
            what="a pass by every controller",
        )

    def log_lines(self, since: dict[str, int], *words: str) -> list[str]:
        """Lines with any of `words` that processes logged after the offsets in `since`
        ({process name: `log_size()` then})."""
        found = []
        for proc in [self.api, *self.processes()]:
            if proc is not None and proc.name in since:
                text = proc.log_since(since[proc.name])
                found += [
                    f"{proc.name}: {line}"
                    for line in text.splitlines()
                    if any(w in line for w in words)
                ]
        return found

    def diagnostics(self, lines: int = 40) -> str:
        """The last lines of every process log, for a failure report."""
        parts = [f"bed run dir: {self.run_dir}"]
        routing = [p for f in self.frr.values() for p in f.processes]
        routing += [self.router.bird] if self.router is not None else []
        for proc in [self.api, *self.processes(), *routing]:
            if proc is not None:
                state = (
                    "running" if proc.alive else f"exited {proc.popen and proc.popen.returncode}"
                )
                parts.append(f"--- {proc.name} ({state}) {proc.log_path}\n{proc.log_tail(lines)}")
        return "\n".join(parts)
