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
crashed run left behind is removed when the next bed starts. This module builds and removes
the parts; what the bed holds and the views on it are `state.py`'s, the faults `faults.py`'s,
the rolling updates `rollouts.py`'s.
"""

from __future__ import annotations

import base64
import functools
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import yaml

from eipctl.core.node_keys import NODE_KEY_NAMESPACE
from eipctl.sandbox.namespaces import Namespace
from eipctl.sandbox.relay import NODE_API_PORT, ApiRelay
from eipctl.sandbox.testbed.client import Client
from eipctl.sandbox.testbed.emulator import Emulator
from eipctl.sandbox.testbed.faults import BedFaults
from eipctl.sandbox.testbed.frr import FrrNode
from eipctl.sandbox.testbed.kube import Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from eipctl.sandbox.testbed.network import NodeNet
from eipctl.sandbox.testbed.pools import LEASE_NAMESPACE, POOLS
from eipctl.sandbox.testbed.processes import Process, reap_leftover_processes
from eipctl.sandbox.testbed.responder import Responder
from eipctl.sandbox.testbed.rollouts import BedRollouts
from eipctl.sandbox.testbed.router import Router
from eipctl.sandbox.testbed.state import RUN_PREFIX

CRDS = Path(str(resources.files("eipctl") / "crds"))  # the package's CRDs (deploy/crds)
# Fast-but-realistic flags for the test suite; benchmarks pass `fast=False` (the defaults).
FAST_CONTROLLER_FLAGS = ["--resync-interval", "2s"]
QUIET = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0"]


BED_SCHEDULER_FLAGS = ["--node-hold-down", "0s"]
"""The bed's stories kill and revive nodes and, after `reset`, expect a revived node to take
claims at once; the hold-down of a flapping node (default 10 s) would keep it out for the
next story. It is tested where it is the story (tests/unit/scheduler, bench_flap.py, which
set it); `BedOptions.scheduler_flags` (later on the command line) overrides this."""


class LocalBed(BedFaults, BedRollouts):
    """Everything on this machine. Methods are synchronous and safe to call from tests."""

    local = True

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
        self.kube.ensure_namespace(NODE_KEY_NAMESPACE)  # as deploy/namespace.yaml makes it
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
            args += ["--identity", name, *BED_SCHEDULER_FLAGS, *self.options.scheduler_flags]
            self.schedulers.append(self._eipctl(name, args, netns=self.network.control.name))
            name = f"allocator-{i}"
            args = ["allocator", *self._kubeconfig(None), *common, *lease, "--identity", name]
            self.allocators.append(self._eipctl(name, [*args, *self.options.allocator_flags]))
        for node in self.network.nodes:
            flags = ["controller", "--node-name", node.name, "--iface", "eth0", *common]
            flags += [*self._kubeconfig(node.name), *key, "--liveness-address", node.ip4]
            # its own liveness key, kept across its restarts as on a real node's disk
            flags += ["--liveness-node-key-file", str(self.run_dir / f"{node.name}.node-key")]
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
