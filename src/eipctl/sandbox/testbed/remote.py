"""A real cluster as the bed: the user-level checks only (no namespaces, no process control).

`EIPCTL_E2E_KUBECONFIG=path` selects it. eipctl must already run there (deploy/), with the
CRDs installed. The scenarios that need to kill nodes or watch ARP skip themselves; those
about allocation, placement and leader handover run. A leader is "killed" by deleting its
pod (the Lease holder identity is the pod name); the Deployment brings a new one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eipctl.sandbox.testbed.kube import Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from eipctl.sandbox.testbed.pools import LEASE_NAMESPACE, POOLS
from eipctl.sandbox.testbed.processes import wait_for


class RemotePod:
    """Enough of `Process` for the leader scenarios: a pod that can be killed."""

    def __init__(self, cluster: RemoteCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name

    def kill(self) -> None:
        self.cluster.kube.delete_pod(self.name, self.cluster.lease_namespace)

    @property
    def alive(self) -> bool:
        return True


class RemoteCluster:
    local = False

    def __init__(self, kubeconfig: str, lease_namespace: str = LEASE_NAMESPACE) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.lease_namespace = lease_namespace
        self.loop: BackgroundLoop | None = None
        self.kube: Kube = None  # type: ignore[assignment]

    def __enter__(self) -> RemoteCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self.loop = BackgroundLoop("remote")
        self.kube = Kube(self.loop, self.kubeconfig)
        for name, spec in POOLS.items():
            self.kube.apply_pool(name, spec)

    def close(self) -> None:
        if self.kube is not None:
            self.kube.close()
        if self.loop is not None:
            self.loop.stop()

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.kube.ipnodes()]

    @property
    def live_nodes(self) -> list[str]:
        return self.node_names

    def wait_for_ip(self, service: str, timeout: float = 30.0) -> str:
        ips = wait_for(
            lambda: self.kube.external_ips(service), timeout, what=f"an external IP on {service}"
        )
        return str(ips[0])

    def leader(self, component: str) -> Any:
        holder = wait_for(
            lambda: self.kube.lease_holder(f"eipctl-{component}", self.lease_namespace),
            30,
            what=f"a {component} leader",
        )
        return RemotePod(self, holder)

    def heal(self) -> None:
        """Nothing to undo: pods come back by themselves."""

    def reset(self, timeout: float = 60.0) -> None:
        for svc in self.kube.services():
            self.kube.delete_service(svc["metadata"]["name"])
        e2e_ips = {
            c["spec"]["ip"]
            for c in self.kube.claims()
            if (c["metadata"].get("labels") or {}).get("eipctl.io/pool") in POOLS
        }
        wait_for(
            lambda: not e2e_ips & {c["spec"]["ip"] for c in self.kube.claims()},
            timeout,
            what="the e2e claims released",
        )

    def diagnostics(self, lines: int = 40) -> str:
        return f"real cluster {self.kubeconfig}: see the eipctl pods' logs"
