"""`kubectl apply -k deploy/` installs eipctl, and what it installs fits together.

The real kubectl (v1.37, from the venv) applies the kustomization to the API emulator, twice
(the second apply must change nothing), then again with the optional nodeips add-on (the
Component `deploy/workloads/nodeips/`, listed under `components:` as an operator enables it);
the same with the FRR Component (`deploy/workloads/frr/`: FRR and its reloader beside every
controller). Then the installed objects are read back and checked
against each other and against the code: every workload runs an eipctl command with a
ServiceAccount, a ConfigMap and ports that exist, and each container's command line (args with
the kubelet's `$(VAR)` expansion, EIPCTL_* variables, the mounted config file and liveness key)
is accepted by its command's settings as the process itself would read it: a flag, variable or
config key the code does not know fails. The controller's metrics, on the host network, listen
on the loopback only and kube-rbac-proxy serves them on the node's IP. With FRR, the file the
controller renders (--frr-config) is the one the reloader applies, in a volume both mount, and
the reloader is the repository's reload.sh.

Every test applies deploy/ as a fresh clone has it (`operator_deploy.deploy_checkout`):
nothing is written before it. It holds no liveness key: the Secret eipctl-liveness is made
in the cluster by a scheduler (`scheduler.liveness_secret`), which test_deploy_liveness_key.py proves
with the real `eipctl scheduler` process against the emulator; where the processes' command
lines are checked, the mounted key file is written as the kubelet would once it exists.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from story_sandbox import kubectl_binary

from eipctl import __version__
from eipctl.cli.main import build_parser, build_settings, join_dash_values
from eipctl.controller.bgp import read_status, sha256_of, write_atomically
from eipctl.core.cluster_key import new_cluster_key_text
from eipctl.core.liveness_wire import Keyring
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.config import AllocatorSettings, ControllerSettings, SchedulerSettings
from eipctl.runtime.settings import ENV_PREFIX, flag_specs, load_config_file
from kubemu import ApiServer
from operator_deploy import OLD_KEY_FILE, deploy_checkout

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ADDON_PATH = Path("workloads") / "nodeips"
FRR_PATH = Path("workloads") / "frr"
PROXY = "kube-rbac-proxy"  # the controller's sidecar: its metrics, authenticated
# with workloads/frr, beside the controller: FRR, the reloader, and the startup files' copier
FRR, RELOADER, FRR_FILES = "frr", "frr-reloader", "frr-files"
FRR_IMAGE = "quay.io/frrouting/frr"
FRR_STARTUP = "eipctl-frr-startup"  # the Component's ConfigMap (a generated name: a hash added)
LIVENESS_SECRET = "eipctl-liveness"
KEY_TEXT = new_cluster_key_text()  # what the kubelet writes once a scheduler made the Secret
NAMESPACE = "eipctl-system"
# what the downward API would give the containers' env (fieldRef) on a node
POD_FIELDS = {
    "spec.nodeName": "node-1",
    "status.hostIP": "192.0.2.10",
    "metadata.name": "eipctl-pod-0",
    "metadata.namespace": NAMESPACE,
}
KUBELET_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")  # $(VAR) in args (no $$ escapes here)
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
    "Service": ("", "services"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
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
    """What the kustomizations produce (`kubectl kustomize`, offline)."""
    docs: list[dict[str, Any]] = []
    for directory in dirs:
        code, out = await kubectl(kubeconfig, home, "kustomize", str(directory))
        assert code == 0, out
        docs += [d for d in yaml.safe_load_all(out) if d]
    return docs


def with_components(deploy: Path, *components: str) -> Path:
    """`deploy` with these Components listed under `components:` of its kustomization.yaml,
    as an operator enables them."""
    path = deploy / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    kustomization["components"] = [*kustomization.get("components", []), *components]
    path.write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return deploy


def stored(srv: ApiServer, doc: dict[str, Any]) -> dict[str, Any]:
    group, plural = STORAGE[doc["kind"]]
    meta = doc["metadata"]
    return srv.store.get(group, plural, meta["name"], meta.get("namespace", ""))


def _version(srv: ApiServer, doc: dict[str, Any]) -> str:
    return str(stored(srv, doc)["metadata"]["resourceVersion"])


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ("Deployment", "DaemonSet")]


def eipctl_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's eipctl container: the first; the others are the controller's proxy and, with
    workloads/frr, FRR and its reloader."""
    container, *sidecars = pod["containers"]
    names = sorted(c["name"] for c in sidecars)
    assert names in ([], [PROXY], sorted([PROXY, FRR, RELOADER])), pod["containers"]
    return container


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    return deploy_checkout(tmp_path / "checkout")


@pytest.fixture(params=[False, True], ids=["nodeips", "nodeips+frr"])
def full(deploy: Path, request: pytest.FixtureRequest) -> Path:
    """The base with the nodeips add-on enabled; and with the FRR Component too."""
    return with_components(deploy, str(ADDON_PATH), *([str(FRR_PATH)] if request.param else []))


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment on a node: values, and the downward API's fields."""
    env = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = POD_FIELDS[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def mounted(
    docs: list[dict[str, Any]],
    workload: dict[str, Any],
    root: Path,
    container: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Every volume the container (by default the eipctl one) mounts, written under `root` as
    the kubelet would write it (ConfigMap data, Secret data decoded, an emptyDir or a new
    node's DirectoryOrCreate hostPath empty):
    mountPath -> the directory holding its files. One directory per volume of the pod: the
    containers that mount a volume share it."""
    objects = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    pod = workload["spec"]["template"]["spec"]
    container = eipctl_container(pod) if container is None else container
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    out = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        where = root / mount["name"]
        where.mkdir(parents=True, exist_ok=True)
        if "emptyDir" in volume:
            pass  # an empty directory, as long as the pod lives
        elif volume.get("hostPath", {}).get("type") == "DirectoryOrCreate":
            pass  # the node's directory, made empty on a new node
        elif "configMap" in volume:
            for key, text in objects["ConfigMap", volume["configMap"]["name"]]["data"].items():
                (where / key).write_text(text)
        elif volume.get("secret", {}).get("secretName") == LIVENESS_SECRET:
            (where / "key").write_text(KEY_TEXT)  # made in the cluster, not by deploy/
        elif "secret" in volume:
            for key, data in objects["Secret", volume["secret"]["secretName"]]["data"].items():
                (where / key).write_bytes(base64.b64decode(data))
        else:
            raise AssertionError(f"a volume the test does not know how to mount: {volume}")
        out[mount["mountPath"]] = where
    return out


def command_line(container: dict[str, Any], files: dict[str, Path]) -> list[str]:
    """The container's args as the process gets them: `$(VAR)` expanded from its env (each
    must be defined: the kubelet passes an unknown one on as text), and the mounted paths
    moved to where the test wrote the files."""
    env = container_env(container)
    argv = []
    for raw in container["args"]:
        for name in KUBELET_VAR.findall(raw):
            assert name in env, f"{raw!r}: the container defines no env var {name}"
        argv.append(on_host(KUBELET_VAR.sub(lambda m: env[m.group(1)], raw), files))
    return argv


def on_host(arg: str, files: dict[str, Path]) -> str:
    """`arg` with the mounted paths moved to where the test wrote the files (`mounted`)."""
    for mount_path, where in files.items():
        arg = arg.replace(mount_path.rstrip("/") + "/", f"{where}/")
    return arg


def container_settings(
    docs: list[dict[str, Any]],
    workload: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, Any]:
    """(command, settings) the workload's process would run with, read as `eipctl` reads
    them. Fails on a flag (also an abbreviated one), an EIPCTL_* variable or a config key its
    command does not know, and on a value its settings refuse."""
    container = eipctl_container(workload["spec"]["template"]["spec"])
    name = f"{workload['kind']}/{workload['metadata']['name']}"
    files = mounted(docs, workload, tmp_path / "mounts" / workload["metadata"]["name"])
    argv = command_line(container, files)
    command = argv[0]
    assert command in COMMANDS, f"{name} runs {command!r}"
    specs = flag_specs(COMMANDS[command])
    flags = {f"--{spec.name}" for spec in specs}
    for arg in argv[1:]:
        if arg.startswith("-"):
            assert arg.split("=", 1)[0] in flags, f"{name}: eipctl {command} has no flag {arg}"
    env_vars = {spec.env_var for spec in specs}
    env = container_env(container)
    for var in env:
        if var.startswith(ENV_PREFIX):
            assert var in env_vars, f"{name}: eipctl {command} reads no variable {var}"
    for var in [v for v in os.environ if v.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(var)  # only what the pod sets
    for var, value in env.items():
        if var.startswith(ENV_PREFIX):
            monkeypatch.setenv(var, value)
    try:
        args = build_parser().parse_args(join_dash_values(argv))
    except SystemExit:
        raise AssertionError(f"{name}: eipctl refuses the command line {argv}") from None
    return command, build_settings(COMMANDS[command], args, command)


async def test_apply_installs_every_object_and_reapply_changes_nothing(
    apiserver: ApiServer, kubeconfig_path: Path, home: Path, deploy: Path
) -> None:
    docs = await rendered(kubeconfig_path, home, deploy)
    assert {d["kind"] for d in docs} == set(STORAGE), "a kind the test does not know of"

    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(deploy))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(docs)
    assert all(line.endswith(" created") for line in lines), out
    for doc in docs:
        assert stored(apiserver, doc)["metadata"]["name"] == doc["metadata"]["name"]
    await _apply_again_changes_nothing(apiserver, kubeconfig_path, home, deploy, docs)

    with_components(deploy, str(ADDON_PATH))
    full = await rendered(kubeconfig_path, home, deploy)
    addon = [d for d in full if d not in docs]
    assert {d["kind"] for d in addon} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    }
    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(deploy))
    assert code == 0, out
    assert len([line for line in out.splitlines() if line.endswith(" created")]) == len(addon)
    for doc in addon:
        assert stored(apiserver, doc)["metadata"]["name"] == doc["metadata"]["name"]

    # the CRDs are served at once: a pool from the examples is accepted
    code, out = await kubectl(
        kubeconfig_path, home, "apply", "-f", str(DEPLOY / "examples" / "pool.yaml")
    )
    assert code == 0, out


async def _apply_again_changes_nothing(
    srv: ApiServer, kubeconfig: Path, home: Path, deploy: Path, docs: list[dict[str, Any]]
) -> None:
    """`kubectl apply -k` of what is installed: kubectl says nothing changed, and the
    emulator wrote nothing (every resourceVersion as it was)."""
    versions = {(d["kind"], d["metadata"]["name"]): _version(srv, d) for d in docs}
    code, out = await kubectl(kubeconfig, home, "apply", "-k", str(deploy))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(docs), out
    # A PodDisruptionBudget's selector is patched by replacing it (patchStrategy "replace"),
    # so kubectl always sends it and says "configured", on a real cluster too: the apiserver
    # writes nothing (the same resourceVersion), and neither may the emulator.
    pdbs = {d["metadata"]["name"] for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert {"eipctl-allocator", "eipctl-scheduler"} <= pdbs
    for line in lines:
        name = line.split()[0].split("/", 1)[1]
        if line.startswith("poddisruptionbudget.policy/") and name in pdbs:
            assert line.endswith(" configured"), out
        else:
            assert line.endswith(" unchanged"), out
    assert versions == {(d["kind"], d["metadata"]["name"]): _version(srv, d) for d in docs}


async def test_frr_component_installs_and_reapply_changes_nothing(
    apiserver: ApiServer, kubeconfig_path: Path, home: Path, deploy: Path
) -> None:
    base = await rendered(kubeconfig_path, home, deploy)
    with_components(deploy, str(FRR_PATH))
    docs = await rendered(kubeconfig_path, home, deploy)
    # the Component adds its ConfigMap and changes the controller's DaemonSet, nothing else
    changed = sorted((d["kind"], d["metadata"]["name"]) for d in docs if d not in base)
    (startup,) = [d for d in docs if d["metadata"]["name"].startswith(f"{FRR_STARTUP}-")]
    assert changed == [
        ("ConfigMap", startup["metadata"]["name"]),
        ("DaemonSet", "eipctl-controller"),
    ]
    assert len(docs) == len(base) + 1

    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(deploy))
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == len(docs)
    assert all(line.endswith(" created") for line in lines), out
    for doc in docs:
        assert stored(apiserver, doc)["metadata"]["name"] == doc["metadata"]["name"]
    # kubectl asks for strict field validation: the emulator decoded the DaemonSet by the
    # apps/v1 schema, found no field the pod spec does not have, and dropped nothing
    (ds,) = [w for w in workloads(docs) if w["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert stored(apiserver, ds)["spec"]["template"]["spec"] == pod
    check_pod_spec(pod)
    await _apply_again_changes_nothing(apiserver, kubeconfig_path, home, deploy, docs)

    # and with the nodeips add-on: its objects come, the rest stays as it is
    with_components(deploy, str(ADDON_PATH))
    full = await rendered(kubeconfig_path, home, deploy)
    addon = [d for d in full if d not in docs]
    assert {d["metadata"]["name"] for d in addon if d["kind"] == "Deployment"} == {"eipctl-nodeips"}
    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(deploy))
    assert code == 0, out
    assert len([line for line in out.splitlines() if line.endswith(" created")]) == len(addon)
    assert f"configmap/{startup['metadata']['name']} unchanged" in out
    assert "daemonset.apps/eipctl-controller unchanged" in out
    await _apply_again_changes_nothing(apiserver, kubeconfig_path, home, deploy, full)

    # the check is not vacuous: a field the pod spec does not have is refused
    bad = yaml.safe_load(yaml.safe_dump(ds))
    bad["spec"]["template"]["spec"]["containers"][-1]["volumeMount"] = []
    (deploy / "bad.yaml").write_text(yaml.safe_dump(bad))
    code, out = await kubectl(kubeconfig_path, home, "apply", "-f", str(deploy / "bad.yaml"))
    assert code != 0 and 'unknown field "spec.template.spec.containers[' in out, out


def check_pod_spec(pod: dict[str, Any]) -> None:
    """What the apiserver's pod validation (not its schema) requires of the pod spec the
    Component makes: unique container names (init containers too) and volume names, every
    mount of a volume the pod has, no mountPath twice in a container."""
    containers = [*pod.get("initContainers", []), *pod["containers"]]
    names = [c["name"] for c in containers]
    assert len(names) == len(set(names)), names
    volumes = [v["name"] for v in pod.get("volumes", [])]
    assert len(volumes) == len(set(volumes)), volumes
    for container in containers:
        mounts = container.get("volumeMounts", [])
        assert {m["name"] for m in mounts} <= set(volumes), container["name"]
        paths = [m["mountPath"] for m in mounts]
        assert len(paths) == len(set(paths)), container["name"]
        assert container.get("image"), container["name"]


async def test_workloads_reference_what_the_kustomization_installs(
    kubeconfig_path: Path, home: Path, full: Path
) -> None:
    docs = await rendered(kubeconfig_path, home, full)
    by_kind: dict[str, set[tuple[str, str]]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], set()).add(
            (d["metadata"].get("namespace", ""), d["metadata"]["name"])
        )
    commands = []
    for w in workloads(docs):
        ns = w["metadata"]["namespace"]
        pod = w["spec"]["template"]["spec"]
        check_pod_spec(pod)
        assert (ns, pod["serviceAccountName"]) in by_kind["ServiceAccount"]
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert (ns, volume["configMap"]["name"]) in by_kind["ConfigMap"]
            if "secret" in volume:  # the one Secret: made in the cluster, not by deploy/
                assert volume["secret"] == {"secretName": LIVENESS_SECRET, "optional": True}
        container = eipctl_container(pod)
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
    (cm,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "eipctl-config"
    ]
    path = tmp_path / "eipctl.yaml"
    path.write_text(cm["data"]["eipctl.yaml"])
    return path


async def test_each_container_command_line_is_valid_for_its_command(
    kubeconfig_path: Path,
    home: Path,
    tmp_path: Path,
    full: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = await rendered(kubeconfig_path, home, full)
    config = _config_file(docs, tmp_path)
    raw = yaml.safe_load(config.read_text())
    for command, cls in COMMANDS.items():
        known = {spec.name for spec in flag_specs(cls)}
        keys = set(load_config_file(str(config), command))
        assert keys <= known, f"{command} would ignore {sorted(keys - known)}"
    sections = {k for k, v in raw.items() if isinstance(v, dict)}
    assert sections <= set(COMMANDS), f"sections no command reads: {sections - set(COMMANDS)}"
    settings = dict(container_settings(docs, w, tmp_path, monkeypatch) for w in workloads(docs))
    assert sorted(settings) == sorted(COMMANDS)
    assert all(s.log_format == "json" for s in settings.values())
    ctl, sched = settings["controller"], settings["scheduler"]
    assert isinstance(ctl, ControllerSettings) and isinstance(sched, SchedulerSettings)
    # when the probes stop for as long as it takes the scheduler to declare the node dead,
    # the controller checks the API at once and fences if it is cut off (docs/liveness.md)
    assert ctl.probe_silence <= sched.liveness_timeout
    assert ctl.liveness_address == POD_FIELDS["status.hostIP"]  # the downward API's host IP
    # both read the same keys (the one Secret), and they make a keyring
    ctl_keys = Path(ctl.liveness_key_file).read_bytes()
    assert ctl_keys == Path(sched.liveness_key_file).read_bytes()
    Keyring.from_text(ctl_keys.decode())


async def test_a_flag_the_code_does_not_know_fails_the_check(
    kubeconfig_path: Path,
    home: Path,
    tmp_path: Path,
    deploy: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = await rendered(kubeconfig_path, home, deploy)
    (ctl,) = [w for w in workloads(docs) if w["metadata"]["name"] == "eipctl-controller"]
    container = eipctl_container(ctl["spec"]["template"]["spec"])
    args = list(container["args"])
    for bad, why in (
        (["--liveness-keyfile", "/etc/eipctl-liveness/key"], "has no flag --liveness-keyfile"),
        (["--liveness-key", "/etc/eipctl-liveness/key"], "has no flag --liveness-key"),
        (["--liveness-address=$(HOSTIP)"], "defines no env var HOSTIP"),
    ):
        container["args"] = args + bad
        with pytest.raises(AssertionError, match=re.escape(why)):
            container_settings(docs, ctl, tmp_path / "bad" / bad[0], monkeypatch)
    container["args"] = args
    container["env"] = [*container["env"], {"name": "EIPCTL_LIVENESS_INTERVAL", "value": "1s"}]
    with pytest.raises(AssertionError, match="reads no variable EIPCTL_LIVENESS_INTERVAL"):
        container_settings(docs, ctl, tmp_path / "bad-env", monkeypatch)


async def test_liveness_secret_is_made_in_the_cluster_and_mounted_where_it_is_read(
    kubeconfig_path: Path, home: Path, deploy: Path
) -> None:
    docs = await rendered(kubeconfig_path, home, deploy)
    assert [d for d in docs if d["kind"] == "Secret"] == []  # no key comes with deploy/
    mounting = {}
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        container = eipctl_container(pod)
        secrets = {v["name"] for v in pod.get("volumes", []) if "secret" in v}
        for volume in pod.get("volumes", []):
            if "secret" in volume:  # optional: a pod starts before a scheduler has made it
                assert volume["secret"] == {"secretName": LIVENESS_SECRET, "optional": True}
        mounts = [m for m in container.get("volumeMounts", []) if m["name"] in secrets]
        assert all(m.get("readOnly") is True for m in mounts)
        if mounts:
            mounting[container["args"][0]] = mounts
    assert sorted(mounting) == ["controller", "scheduler"]  # not the allocator
    # who may do what with Secrets in eipctl-system: the scheduler create (RBAC cannot name
    # the object of a create), nothing else; no other account anything
    bound: dict[str, set[str]] = {}
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"].endswith("Role")}
    for binding in [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]:
        if binding["metadata"].get("namespace", NAMESPACE) != NAMESPACE:
            continue
        role = roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]))
        verbs = {
            verb
            for rule in (role or {}).get("rules", [])
            if "" in rule.get("apiGroups", []) and "secrets" in rule.get("resources", [])
            for verb in rule["verbs"]
        }
        for subject in binding["subjects"]:
            bound.setdefault(subject["name"], set()).update(verbs)
    assert {who: verbs for who, verbs in bound.items() if verbs} == {"eipctl-scheduler": {"create"}}
    # the leader writes the Live condition: a status update of IpNodes (after a get)
    (role,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "eipctl-scheduler"
    ]
    grants = {
        (resource, verb)
        for rule in role["rules"]
        if "eipctl.io" in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {("ipnodes", "get"), ("ipnodes/status", "update")} <= grants


async def test_a_fresh_clone_renders_with_no_key_written(
    kubeconfig_path: Path, home: Path, tmp_path: Path
) -> None:
    """What `kubectl apply -k deploy/` needs before it: nothing. The clone holds no key file
    (an older install's, deploy/liveness.key, stays ignored) and renders as it is."""
    assert OLD_KEY_FILE in (DEPLOY / ".gitignore").read_text().split()
    clone = deploy_checkout(tmp_path / "clone")
    assert not (clone / OLD_KEY_FILE).exists()
    code, out = await kubectl(kubeconfig_path, home, "kustomize", str(clone))
    assert code == 0, out
    assert "kind: Secret" not in out


async def test_container_ports_are_the_ones_each_command_listens_on(
    kubeconfig_path: Path,
    home: Path,
    tmp_path: Path,
    full: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = await rendered(kubeconfig_path, home, full)
    for w in workloads(docs):
        pod = w["spec"]["template"]["spec"]
        container = eipctl_container(pod)
        command, settings = container_settings(docs, w, tmp_path, monkeypatch)
        assert container["args"][1:3] == ["--config", "/etc/eipctl/eipctl.yaml"]
        config_mount = [m for m in container["volumeMounts"] if m["name"] == "config"]
        assert [m["mountPath"] for m in config_mount] == ["/etc/eipctl"]
        ports = {
            p["name"]: (p["containerPort"], p.get("protocol", "TCP")) for p in container["ports"]
        }
        expected = {
            "metrics": (settings.metrics_bind_address.port, "TCP"),
            "health": (settings.health_probe_bind_address.port, "TCP"),
        }
        if command == "controller":
            # its metrics on the loopback, not declared: the proxy's `metrics` port is the way in
            del expected["metrics"]
            expected["liveness"] = (settings.liveness_port, "UDP")
        assert ports == expected
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        env = {e["name"] for e in container.get("env", [])}
        if command == "controller":
            assert pod["hostNetwork"] is True
            assert {"NODE_NAME", "HOST_IP"} <= env
            caps = container["securityContext"]["capabilities"]
            assert caps == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW"]}
            _check_metrics_proxy(pod, settings)
        else:
            assert [c["name"] for c in pod["containers"]] == [command]
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


async def test_frr_reloader_applies_the_file_the_controller_renders(
    kubeconfig_path: Path,
    home: Path,
    tmp_path: Path,
    deploy: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With workloads/frr the controller renders FRR's configuration into a file (--frr-config,
    as EIPCTL_FRR_CONFIG) on an emptyDir that the reloader mounts at the same path; the
    reloader's command names that file and runs the ConfigMap's reload.sh, the repository's.
    Run as its command line says, on the volumes as mounted, it answers what the controller
    writes with the status file the controller reads."""
    docs = await rendered(
        kubeconfig_path, home, with_components(deploy, str(ADDON_PATH), str(FRR_PATH))
    )
    (ds,) = [w for w in workloads(docs) if w["metadata"]["name"] == "eipctl-controller"]
    pod = ds["spec"]["template"]["spec"]
    check_pod_spec(pod)
    command, ctl = container_settings(docs, ds, tmp_path, monkeypatch)
    assert command == "controller" and isinstance(ctl, ControllerSettings)
    controller = eipctl_container(pod)
    containers = {c["name"]: c for c in pod["containers"]}
    reloader, frr = containers[RELOADER], containers[FRR]
    (init,) = pod["initContainers"]
    assert init["name"] == FRR_FILES
    volumes = {v["name"]: v for v in pod["volumes"]}

    # one file: the controller's setting, its env, the reloader's argument
    path = PurePosixPath(ctl.frr_config)
    assert str(path) == container_env(controller)["EIPCTL_FRR_CONFIG"] == reloader["command"][-1]
    assert path.is_absolute() and path.name == "frr.conf"
    # in one emptyDir that both mount, writable, at the file's directory
    (shared,) = [m for m in controller["volumeMounts"] if m["mountPath"] == str(path.parent)]
    assert volumes[shared["name"]] == {"name": shared["name"], "emptyDir": {}}
    assert [m for m in reloader["volumeMounts"] if m["name"] == shared["name"]] == [shared]
    assert not shared.get("readOnly")  # the controller writes frr.conf, the reloader .status
    assert all(m["name"] != shared["name"] for m in frr["volumeMounts"] + init["volumeMounts"])

    # the reloader's script: the ConfigMap's reload.sh, the repository's, byte for byte
    objects = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in reloader["volumeMounts"]}
    assert reloader["command"][:1] == ["/bin/sh"] and len(reloader["command"]) == 3
    script = PurePosixPath(reloader["command"][1])
    startup = objects["ConfigMap", mounts[str(script.parent)]["configMap"]["name"]]
    assert startup["metadata"]["name"].startswith(f"{FRR_STARTUP}-")
    assert startup["data"][script.name] == (DEPLOY / FRR_PATH / "reload.sh").read_text()
    # and every startup file as it is in the repository; the init container copies them
    # into the volume FRR reads its configuration from (/etc/frr)
    kustomization = yaml.safe_load((DEPLOY / FRR_PATH / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    assert sorted(startup["data"]) == sorted(generator["files"])
    for name, text in startup["data"].items():
        assert text == (DEPLOY / FRR_PATH / name).read_text(), name
    init_mounts = {m["mountPath"]: volumes[m["name"]] for m in init["volumeMounts"]}
    frr_mounts = {m["mountPath"]: volumes[m["name"]] for m in frr["volumeMounts"]}
    assert init_mounts["/etc/frr-startup"]["configMap"]["name"] == startup["metadata"]["name"]
    assert init_mounts["/etc/frr"] == frr_mounts["/etc/frr"]
    assert "emptyDir" in frr_mounts["/etc/frr"]
    for name in ("daemons", "vtysh.conf", "frr.conf"):
        assert f"/etc/frr-startup/{name}" in init["command"][-1], name

    # FRR's image, tagged in deploy/kustomization.yaml's `images:`, in all three
    images = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["images"]
    (tag,) = [i["newTag"] for i in images if i["name"] == FRR_IMAGE]
    assert {c["image"] for c in (init, frr, reloader)} == {f"{FRR_IMAGE}:{tag}"}

    # the Secrets of BGP passwords: the controller reads them where a Role lets it get them
    granted = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for d in docs
        if d["kind"] == "Role"
        for rule in d["rules"]
        if "secrets" in rule["resources"] and "get" in rule["verbs"]
    }
    account = {"kind": "ServiceAccount", "name": "eipctl-controller", "namespace": NAMESPACE}
    bound = {
        (d["metadata"]["namespace"], d["roleRef"]["name"])
        for d in docs
        if d["kind"] == "RoleBinding" and account in d["subjects"]
    }
    assert {namespace for namespace, _ in granted & bound} == {ctl.bgp_secret_namespace}

    # the reloader, run as its command says on the volumes as the kubelet mounts them (the
    # controller's and its own share the emptyDir), with frr-reload.py stubbed: it answers
    # the file the controller writes with the status the controller reads
    root = tmp_path / "pod"
    files = mounted(docs, ds, root, controller) | mounted(docs, ds, root, reloader)
    config = files[str(path.parent)] / path.name
    text = "frr defaults traditional\nrouter bgp 64512\n"
    await asyncio.to_thread(write_atomically, config, text)
    env = {
        **os.environ,
        "RELOAD_INTERVAL": "0.1",
        "FRR_RELOAD": shutil.which("true") or "true",
        "FRR_PATHSPACE": "eipctl-deploy-test",  # no FRR of this host is asked anything
    }
    proc = await asyncio.create_subprocess_exec(
        *(on_host(arg, files) for arg in reloader["command"]),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(10):
            while (status := read_status(Path(f"{config}.status"))) is None:
                await asyncio.sleep(0.05)
    finally:
        proc.terminate()
        await proc.wait()
    assert status.ok and status.sha256 == sha256_of(text)


def _check_metrics_proxy(pod: dict[str, Any], settings: ControllerSettings) -> None:
    """On the host network the controller's /metrics listens on 127.0.0.1, never on every
    address of the node; kube-rbac-proxy serves it, over TLS and authorized, on the node's
    IP (the kubelet's `$(HOST_IP)`), at the port named `metrics` that the Service targets."""
    metrics = settings.metrics_bind_address
    assert metrics.enabled and metrics.host == "127.0.0.1", metrics
    assert settings.health_probe_bind_address.port != metrics.port  # the kubelet's probes
    (proxy,) = [c for c in pod["containers"] if c["name"] == PROXY]
    args = dict(arg.split("=", 1) for arg in proxy["args"])
    assert args.keys() == {"--secure-listen-address", "--upstream", "--allow-paths"}
    assert args["--upstream"] == f"http://127.0.0.1:{metrics.port}/"
    assert args["--allow-paths"] == "/metrics"
    env = container_env(proxy)
    listen = KUBELET_VAR.sub(lambda m: env[m.group(1)], args["--secure-listen-address"])
    assert listen == f"[{POD_FIELDS['status.hostIP']}]:9484"
    assert proxy["ports"] == [{"name": "metrics", "containerPort": 9484}]
    sc = proxy["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["capabilities"] == {"drop": ["ALL"]}
