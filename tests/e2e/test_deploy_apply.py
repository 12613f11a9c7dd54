"""`kubectl apply -k deploy/` installs eipctl, and what it installs fits together.

The real kubectl (v1.37, from the venv) applies the kustomization to the API emulator, twice
(the second apply must change nothing), then the optional nodeips add-on
(`deploy/workloads/nodeips/`). Then the installed objects are read back and checked
against each other and against the code: every workload runs an eipctl command with a
ServiceAccount, a ConfigMap and ports that exist, and the config file in the ConfigMap is
accepted by each command's settings as the command itself would read it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from story_sandbox import kubectl_binary

from eipctl import __version__
from eipctl.cli.main import build_settings
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.config import AllocatorSettings, ControllerSettings, SchedulerSettings
from eipctl.runtime.settings import flag_specs, load_config_file
from eipctl.sandbox.apiserver import ApiServer

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ADDON = DEPLOY / "workloads" / "nodeips"
NAMESPACE = "eipctl-system"
COMMANDS: dict[str, type] = {
    "allocator": AllocatorSettings,
    "scheduler": SchedulerSettings,
    "controller": ControllerSettings,
    "nodeips": NodeIpsSettings,
}
STORAGE = {  # kind -> (group, plural) in the emulator's store
    "Namespace": ("", "namespaces"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
    "ServiceAccount": ("", "serviceaccounts"),
    "ConfigMap": ("", "configmaps"),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "Deployment": ("apps", "deployments"),
    "DaemonSet": ("apps", "daemonsets"),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
}


async def kubectl(kubeconfig: Path, home: Path, *args: str) -> tuple[int, str]:
    """Run kubectl without blocking the loop the emulator serves on."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def rendered(kubeconfig: Path, home: Path, *dirs: Path) -> list[dict[str, Any]]:
    """What the kustomizations produce (`kubectl kustomize`, offline): base and add-on."""
    docs: list[dict[str, Any]] = []
    for directory in dirs or (DEPLOY, ADDON):
        code, out = await kubectl(kubeconfig, home, "kustomize", str(directory))
        assert code == 0, out
        docs += [d for d in yaml.safe_load_all(out) if d]
    return docs


def stored(srv: ApiServer, doc: dict[str, Any]) -> dict[str, Any]:
    group, plural = STORAGE[doc["kind"]]
    meta = doc["metadata"]
    return srv.store.get(group, plural, meta["name"], meta.get("namespace", ""))


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ("Deployment", "DaemonSet")]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


async def test_apply_installs_every_object_and_reapply_changes_nothing(
    apiserver: ApiServer, kubeconfig_path: Path, home: Path
) -> None:
    docs = await rendered(kubeconfig_path, home, DEPLOY)
    assert {d["kind"] for d in docs} == set(STORAGE), "a kind the test does not know of"

    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(DEPLOY))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(docs)
    assert all(line.endswith(" created") for line in lines), out
    for doc in docs:
        assert stored(apiserver, doc)["metadata"]["name"] == doc["metadata"]["name"]

    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(DEPLOY))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert all(line.endswith(" unchanged") for line in lines), out

    addon = await rendered(kubeconfig_path, home, ADDON)
    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(ADDON))
    assert code == 0, out
    assert len([line for line in out.splitlines() if line.endswith(" created")]) == len(addon)
    for doc in addon:
        assert stored(apiserver, doc)["metadata"]["name"] == doc["metadata"]["name"]

    # the CRDs are served at once: a pool from the examples is accepted
    code, out = await kubectl(
        kubeconfig_path, home, "apply", "-f", str(DEPLOY / "examples" / "pool.yaml")
    )
    assert code == 0, out


async def test_workloads_reference_what_the_kustomization_installs(
    kubeconfig_path: Path, home: Path
) -> None:
    docs = await rendered(kubeconfig_path, home)
    by_kind: dict[str, set[tuple[str, str]]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], set()).add(
            (d["metadata"].get("namespace", ""), d["metadata"]["name"])
        )
    commands = []
    for w in workloads(docs):
        ns = w["metadata"]["namespace"]
        pod = w["spec"]["template"]["spec"]
        assert (ns, pod["serviceAccountName"]) in by_kind["ServiceAccount"]
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert (ns, volume["configMap"]["name"]) in by_kind["ConfigMap"]
        (container,) = pod["containers"]
        assert container["image"] == f"eipctl:{__version__}"
        command = container["args"][0]
        commands.append(command)
        assert pod["serviceAccountName"] == f"eipctl-{command}"
        # every ServiceAccount is bound to the ClusterRole of its command
        bindings = [
            d
            for d in docs
            if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == f"eipctl-{command}"
        ]
        assert [(s["namespace"], s["name"]) for b in bindings for s in b["subjects"]] == [
            (ns, pod["serviceAccountName"])
        ]
    assert sorted(commands) == sorted(COMMANDS)


def _config_file(docs: list[dict[str, Any]], tmp_path: Path) -> Path:
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    path = tmp_path / "eipctl.yaml"
    path.write_text(cm["data"]["eipctl.yaml"])
    return path


async def test_config_map_is_valid_for_each_command(
    kubeconfig_path: Path, home: Path, tmp_path: Path
) -> None:
    docs = await rendered(kubeconfig_path, home)
    config = _config_file(docs, tmp_path)
    raw = yaml.safe_load(config.read_text())
    for command, cls in COMMANDS.items():
        known = {spec.name for spec in flag_specs(cls)}
        keys = set(load_config_file(str(config), command))
        assert keys <= known, f"{command} would ignore {sorted(keys - known)}"
        settings = build_settings(cls, argparse.Namespace(config=str(config)), command)
        assert settings.log_format == "json"
    sections = {k for k, v in raw.items() if isinstance(v, dict)}
    assert sections <= set(COMMANDS), f"sections no command reads: {sections - set(COMMANDS)}"
    ctl = build_settings(ControllerSettings, argparse.Namespace(config=str(config)), "controller")
    sched = build_settings(SchedulerSettings, argparse.Namespace(config=str(config)), "scheduler")
    # a partitioned node must fence before the scheduler moves its claims (docs/controller.md)
    assert ctl.node_timeout <= sched.node_timeout


async def test_container_ports_are_the_ones_each_command_listens_on(
    kubeconfig_path: Path, home: Path, tmp_path: Path
) -> None:
    docs = await rendered(kubeconfig_path, home)
    config = _config_file(docs, tmp_path)
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        command = container["args"][0]
        assert container["args"][1:] == ["--config", "/etc/eipctl/eipctl.yaml"]
        (mount,) = container["volumeMounts"]
        assert mount["mountPath"] == "/etc/eipctl"
        settings = build_settings(
            COMMANDS[command], argparse.Namespace(config=str(config)), command
        )
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports == {
            "metrics": settings.metrics_bind_address.port,
            "health": settings.health_probe_bind_address.port,
        }
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        env = {e["name"] for e in container.get("env", [])}
        if command == "controller":
            assert pod["hostNetwork"] is True
            assert "NODE_NAME" in env
            caps = container["securityContext"]["capabilities"]
            assert caps == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW"]}
        else:
            # the Lease lives in the pod's namespace, where the leader-election Role grants it
            assert {"POD_NAME", "POD_NAMESPACE"} <= env
            roles = [
                d
                for d in docs
                if d["kind"] == "Role" and d["metadata"]["namespace"] == w["metadata"]["namespace"]
            ]
            assert any(
                f"eipctl-{command}" in rule.get("resourceNames", [])
                for role in roles
                for rule in role["rules"]
            )
