"""What a `LocalBed` holds and what the scenarios read from it and wait for.

`BedState` is the bed's parts (network, API, eipctl's processes, relays, routing) and the
faults in force, with the views and waits on them; `bed.py` builds and removes the parts,
`faults.py` and `rollouts.py` act on them. They are split by what they do to one bed:
`LocalBed` is all of them.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from eipctl.sandbox.relay import ApiRelay
from eipctl.sandbox.testbed.client import Client
from eipctl.sandbox.testbed.emulator import Emulator
from eipctl.sandbox.testbed.frr import FrrNode
from eipctl.sandbox.testbed.kube import Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from eipctl.sandbox.testbed.network import Network, NodeNet
from eipctl.sandbox.testbed.pools import LEASE_NAMESPACE
from eipctl.sandbox.testbed.processes import Process, wait_for
from eipctl.sandbox.testbed.responder import Responder
from eipctl.sandbox.testbed.router import Router

RUN_PREFIX = "eipctl-e2e-"
_beds = itertools.count()
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


def _fresh_run_dir(base: Path) -> Path:
    """``<base>/eipctl-e2e-<pid>-<n>``, a name not taken: a kept run directory of an
    earlier process with the same (reused) PID stays as it was."""
    while True:
        path = base / f"{RUN_PREFIX}{os.getpid()}-{next(_beds)}"
        if not path.exists():
            return path


class BedState:
    """The parts of one bed and the faults in force; empty until `LocalBed.start()`."""

    def __init__(self, options: BedOptions | None = None) -> None:
        self.options = options or BedOptions()
        base = Path(os.environ.get("EIPCTL_E2E_RUN_DIR") or tempfile.gettempdir())
        self.run_dir = _fresh_run_dir(base)
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
        self.api_down: str | None = None
        """How the API server is unavailable (`BedFaults.stop_api`), or None."""
        self.frozen_schedulers: set[int] = set()
        self._restarting: dict[str, int] = {}  # node -> its heartbeat before a (re)start

    def processes(self) -> list[Process]:
        return [*self.schedulers, *self.allocators, *self.controllers.values()]

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

    # ---- back in service ----

    def start_controller(self, name: str) -> None:
        """Start node `name`'s controller again; `wait_in_service` then waits for it."""
        self._restarting[name] = self.kube.heartbeats().get(name, -1)
        self.controllers[name].start()

    def wait_peers_known(self, timeout: float = 30.0) -> None:
        """Until every controller has listed every node as its peer (`peers.listed` with the
        bed's node count in its log since its last start): before that, a controller cannot
        count a quorum and lets go in an outage (docs/liveness.md, "Outages")."""
        wanted = f"nodes={len(self.node_names)}"

        def known() -> bool:
            for proc in self.controllers.values():
                text = proc.log_since(proc.last_start_offset)
                if not any("peers.listed" in line and wanted in line for line in text.splitlines()):
                    return False
            return True

        wait_for(known, timeout, interval=0.2, what="every controller to know its peers")

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

    # ---- logs ----

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
