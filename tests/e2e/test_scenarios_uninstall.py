"""Story: uninstalling eipctl, in the order docs/operations.md gives, leaves nothing behind;
the wrong order (the workloads first) sticks, as documented.

Each story gets a bed of its own (it takes the install down), installed the way an operator
installs: `kubectl apply -k deploy/` against the bed's API emulator, which deletes CRDs
through their instances' finalizers as a real apiserver does. The emulator runs no pods: the
bed's processes stand for the workloads, and where an operator's command would make the
kubelet act (a rollout, a deleted DaemonSet), the bed does the same to its processes
(SIGTERM, as the kubelet sends it). The order:

1. `kubectl -n eipctl-system set env deploy/eipctl-allocator EIPCTL_PURGE_ON_POOL_DELETE=true`
   (and its rollout): from now on deleting a pool releases its IPs instead of waiting for
   them (the default keeps a pool in use, docs/allocator.md "Deleting a pool");
2. `kubectl delete ipclaimpools --all`: no IP is handed out any more; the allocator takes
   every IP off its Services, deletes their claims and removes its finalizers, the scheduler
   deletes the claims of hand-set IPs, and the pools go;
3. wait until no IpClaim is left: every controller has removed its addresses;
4. delete the workloads (the controllers, holding nothing, keep nothing on SIGTERM);
5. `kubectl delete -k deploy/ --ignore-not-found`: CRDs, RBAC, policy, Secret, namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from story_sandbox import kubectl_binary

from eipctl.core.naming import POOL_FINALIZER
from eipctl.sandbox.namespaces import why_unavailable
from eipctl.sandbox.testbed import POOL_V4, BedOptions, LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    per_node,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)
from operator_deploy import deploy_checkout

SYSTEM = "eipctl-system"
GROUP = "eipctl.io"
HAND_SET_IP = "203.0.113.150"  # in e2e-v4, which allows hand-set IPs
RESTART_GRACE = 15  # the controllers' --restart-grace default, seconds
PURGE = {"EIPCTL_PURGE_ON_POOL_DELETE": "true"}
SERVICE_ANNOTATIONS = [
    "external-ip",
    "external-ip-pool",
    "external-ip-sharing-key",
    "eipctl.io/allocated-ips",
    "eipctl.io/write-id",
]
WORKLOADS = [
    "daemonset/eipctl-controller",
    "deployment/eipctl-scheduler",
    "deployment/eipctl-allocator",
]


class Kubectl:
    """kubectl against the bed's API, as the operator types it: (exit status, output)."""

    def __init__(self, bed: LocalBed, home: Path) -> None:
        self.binary = kubectl_binary()
        self.env = {**os.environ, "KUBECONFIG": str(bed.kube.kubeconfig), "HOME": str(home)}

    def __call__(self, *args: str, check: bool = True) -> str:
        code, out = self.run(*args)
        if check:
            assert code == 0, f"kubectl {' '.join(args)} exited {code}:\n{out}"
        return out

    def run(self, *args: str) -> tuple[int, str]:
        proc = subprocess.run(
            [self.binary, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=90,
            check=False,
        )
        return proc.returncode, proc.stdout

    def items(self, *args: str) -> list[dict[str, Any]]:
        return list(json.loads(self("get", *args, "-o", "json"))["items"])


@pytest.fixture
def bed(request: pytest.FixtureRequest) -> Iterator[LocalBed]:
    """A bed of this story's own (the shared one must survive): it is uninstalled here."""
    if os.environ.get("EIPCTL_E2E_KUBECONFIG"):
        pytest.skip("uninstalls eipctl: only on a bed of its own, never on a real cluster")
    if (reason := why_unavailable()) is not None:
        pytest.skip(reason)
    with LocalBed(BedOptions(nodes=3)) as fresh:
        yield fresh
        fresh.options.keep_logs = bool(
            request.session.testsfailed or os.environ.get("EIPCTL_E2E_KEEP_LOGS")
        )


@pytest.fixture
def kubectl(bed: LocalBed, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(bed, home)


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    """deploy/ as a fresh clone has it (no liveness key: the cluster makes it)."""
    return deploy_checkout(tmp_path)


def install_and_serve(bed: LocalBed, kubectl: Kubectl, deploy: Path, tmp: Path) -> dict[str, str]:
    """`kubectl apply -k deploy/` (the bed's processes are its workloads), six Services
    asking for `auto` and one with a hand-set IP; {ip: node} once all are Bound and answer."""
    kubectl("apply", "-k", str(deploy))
    bed.wait_in_service(bed.node_names, 30)
    names = [f"web-{i}" for i in range(2 * len(bed.node_names))]
    create_services(bed, names)
    manifest = tmp / "hand-set.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "hand-set", "labels": {"eipctl-e2e": "yes"}},
                "spec": {
                    "externalIPs": [HAND_SET_IP],
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                },
            }
        )
    )
    kubectl("apply", "-f", str(manifest))
    ips = wait_for_ips(bed, [*names, "hand-set"])
    placed = wait_bound(bed, ips.values())
    assert set(placed.values()) == set(bed.node_names), f"not spread: {per_node(placed)}"
    wait_answered_by(bed, placed)
    return placed


def terminating(kubectl: Kubectl) -> list[str]:
    """Every namespace, CRD and eipctl object (while its CRD is served) being deleted."""
    found = []
    kinds = ["namespaces", "customresourcedefinitions"]
    served = kubectl("api-resources", f"--api-group={GROUP}", "-o", "name").split()
    for kind in kinds + served:
        for obj in kubectl.items(kind, *(["-A"] if kind not in kinds else [])):
            if obj["metadata"].get("deletionTimestamp"):
                found.append(
                    f"{kind}/{obj['metadata']['name']} {obj['metadata'].get('finalizers')}"
                )
    return found


def eipctl_crds(kubectl: Kubectl) -> list[str]:
    return [
        crd["metadata"]["name"]
        for crd in kubectl.items("customresourcedefinitions")
        if crd["spec"]["group"] == GROUP
    ]


def service_leftovers(bed: LocalBed) -> dict[str, dict[str, Any]]:
    """What eipctl left on each Service: annotations, externalIPs, status.loadBalancer."""
    return {
        svc["metadata"]["name"]: {
            "annotations": svc["metadata"].get("annotations") or {},
            "externalIPs": svc["spec"].get("externalIPs") or [],
            "loadBalancer": (svc.get("status") or {}).get("loadBalancer") or {},
        }
        for svc in bed.kube.services()
    }


def ips_eipctl_gave(bed: LocalBed) -> dict[str, list[str]]:
    """{Service: externalIPs} of the Services that asked eipctl (`external-ip`) and hold any."""
    return {
        name: left["externalIPs"]
        for name, left in service_leftovers(bed).items()
        if left["externalIPs"] and "external-ip" in left["annotations"]
    }


def test_uninstall_in_the_documented_order_leaves_nothing_behind(
    bed: LocalBed, kubectl: Kubectl, deploy: Path, tmp_path: Path
) -> None:
    placed = install_and_serve(bed, kubectl, deploy, tmp_path)
    held = bed.managed_addresses()
    assert set().union(*held.values()) == set(placed), held
    steps: dict[str, float] = {}
    started = time.monotonic()

    # 1. deleting a pool now releases its IPs (a rollout of the allocator)
    kubectl(
        "-n",
        SYSTEM,
        "set",
        "env",
        "deployment/eipctl-allocator",
        *[f"{k}={v}" for k, v in PURGE.items()],
    )
    for proc in bed.allocators:
        bed.replace_replica(proc, env=PURGE)
    steps["allocator rolled with purge"] = time.monotonic() - started

    # 2. the pools go, and with them every IP the allocator handed out
    out = kubectl("delete", "ipclaimpools", "--all", "--timeout=60s")
    assert f'ipclaimpool.eipctl.io "{POOL_V4}" deleted' in out, out
    assert kubectl.items("ipclaimpools") == []
    steps["pools deleted"] = time.monotonic() - started

    # 3. no claim left (the scheduler deletes those of hand-set IPs): no address left
    kubectl("wait", "--for=delete", "ipclaims", "--all", "--timeout=60s")
    assert kubectl.items("ipclaims") == []
    wait_for(
        lambda: not any(bed.managed_addresses().values()),
        10,
        what="every managed address removed from the nodes",
    )
    # what the operator sees: `kubectl get ipnodes -o wide`, REPORTED ADDRESSES [] each
    wait_for(
        lambda: all(not (n.get("status") or {}).get("addresses") for n in kubectl.items("ipnodes")),
        10,
        what="every IpNode reporting no address",
    )
    steps["claims and addresses gone"] = time.monotonic() - started
    assert ips_eipctl_gave(bed) == {}, service_leftovers(bed)
    answers = bed.client.ask_all(placed, timeout=0.5)
    assert not any(answers.values()), f"still answering: {answers}"

    # 4. the workloads; SIGTERM as the kubelet sends it: nothing placed, nothing kept
    kubectl("-n", SYSTEM, "delete", *WORKLOADS)
    logs = {p.name: p.log_size() for p in bed.processes()}
    for proc in bed.processes():
        assert proc.terminate(grace=15) == 0, f"{proc.name}:\n{proc.log_tail(15)}"
    kept = bed.log_lines(logs, "shutdown.restart_grace", "shutdown.addresses")
    assert kept and all("addresses=0" in line or "kept" in line for line in kept), kept
    steps["workloads stopped"] = time.monotonic() - started

    # 5. the rest: CRDs (IpNodes go with theirs), RBAC, policy, Secret, namespace
    out = kubectl("delete", "-k", str(deploy), "--ignore-not-found", "--timeout=60s")
    steps["delete -k"] = time.monotonic() - started
    print(out)

    assert eipctl_crds(kubectl) == []
    assert terminating(kubectl) == []
    code, out = kubectl.run("get", "namespace", SYSTEM)
    assert code != 0 and "NotFound" in out, out
    assert bed.managed_addresses() == {n: set() for n in bed.node_names}
    assert not any(n.external_addresses() for n in bed.network.nodes)
    leftovers = service_leftovers(bed)
    print("uninstall steps (s since start):", {k: round(v, 2) for k, v in steps.items()})
    print("what eipctl left on the Services:", leftovers)
    assert ips_eipctl_gave(bed) == {}, leftovers
    for name, left in leftovers.items():
        assert not left["loadBalancer"], (name, left)
        assert "eipctl.io/allocated-ips" not in left["annotations"], (name, left)
    # a hand-set IP is the user's: it stays in the Service, announced by nobody
    assert leftovers["hand-set"]["externalIPs"] == [HAND_SET_IP]

    # 6. (optional) the annotations: the users' requests, now inert, and eipctl's write-id
    kubectl("annotate", "services", "--all", "-A", *[f"{a}-" for a in SERVICE_ANNOTATIONS])
    for name, left in service_leftovers(bed).items():
        ours = [a for a in left["annotations"] if a in SERVICE_ANNOTATIONS or "eipctl" in a]
        assert not ours, (name, left)


def test_uninstall_with_the_workloads_first_sticks_on_the_pools(
    bed: LocalBed, kubectl: Kubectl, deploy: Path, tmp_path: Path
) -> None:
    placed = install_and_serve(bed, kubectl, deploy, tmp_path)

    # the wrong order: the workloads first (their pods get SIGTERM), then everything else
    kubectl("-n", SYSTEM, "delete", *WORKLOADS)
    for proc in bed.processes():
        proc.terminate(grace=15)
    code, out = kubectl.run("delete", "-k", str(deploy), "--ignore-not-found", "--timeout=5s")
    assert code != 0 and "timed out waiting for the condition" in out, out
    assert f"customresourcedefinitions/ipclaimpools.{GROUP}" in out, out

    stuck = terminating(kubectl)
    print("stuck:", stuck)
    assert f"customresourcedefinitions/ipclaimpools.{GROUP} " in " ".join(stuck) + " ", stuck
    pools = kubectl.items("ipclaimpools")
    assert pools and all(p["metadata"].get("deletionTimestamp") for p in pools), pools
    assert all(p["metadata"].get("finalizers") == [POOL_FINALIZER] for p in pools), pools
    # the other CRDs went, and their objects with them (IpClaims have no finalizer)
    assert eipctl_crds(kubectl) == [f"ipclaimpools.{GROUP}"]
    # the controllers stopped as for a restart: the addresses stay on the links for the
    # restart grace (their lifetime, at most 15 s), announced by nobody; the Services still
    # list their IPs
    held = bed.managed_addresses()
    assert set().union(*held.values()) == set(placed), held
    lifetimes = {
        info["local"]: info.get("valid_life_time")
        for node in bed.network.nodes
        for entry in json.loads(node.ns.ip("-j addr show dev eth0"))
        for info in entry["addr_info"]
        if info["local"] in placed
    }
    assert all(0 < s <= RESTART_GRACE for s in lifetimes.values()), lifetimes
    leftovers = service_leftovers(bed)
    assert all(s["externalIPs"] for s in leftovers.values()), leftovers
    assert len(ips_eipctl_gave(bed)) == len(placed) - 1, leftovers

    # the way out: remove the finalizer the allocator is no longer there to remove
    for pool in kubectl("get", "ipclaimpools", "-o", "name").split():
        kubectl("patch", pool, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    wait_for(lambda: not eipctl_crds(kubectl), 10, what="the IpClaimPool CRD gone")
    assert terminating(kubectl) == []
