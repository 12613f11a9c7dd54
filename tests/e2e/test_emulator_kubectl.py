"""The real kubectl binary against the emulator: what a user types, and what kubectl prints."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml
from story_sandbox import kubectl_binary

from kubemu import ApiServer
from operator_deploy import deploy_checkout

pytestmark = pytest.mark.kubectl

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "deploy" / "crds"

SAMPLES = """
apiVersion: eipctl.io/v1alpha1
kind: IpClaimPool
metadata:
  name: pool-a
spec:
  cidr: 203.0.113.0/24
  autoAssign: true
---
apiVersion: eipctl.io/v1alpha1
kind: IpClaim
metadata:
  name: 203-0-113-7
  labels:
    eipctl.io/pool: pool-a
spec:
  ip: 203.0.113.7
  nodeName: node-1
  services: [default/web]
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""


class Kubectl:
    """Runs kubectl without blocking the loop the emulator runs on."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.binary = kubectl_binary()
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
        self.cache = home / "cache"

    async def run(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--cache-dir",
            str(self.cache),
            "--request-timeout=10s",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        async with asyncio.timeout(30):
            out, err = await proc.communicate(stdin.encode() if stdin else None)
        rc = proc.returncode or 0
        if check and rc != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({rc}): {err.decode()}")
        return rc, out.decode(), err.decode()

    async def out(self, *args: str, stdin: str | None = None) -> str:
        return (await self.run(*args, stdin=stdin))[1]


def table(text: str) -> list[list[str]]:
    """kubectl's table output as rows of cells (header first)."""
    return [line.split() for line in text.strip().splitlines()]


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig_path, tmp_path)


async def test_user_story_with_kubectl(apiserver: ApiServer, kubectl: Kubectl) -> None:
    out = await kubectl.out("apply", "-f", str(CRDS))
    assert "customresourcedefinition.apiextensions.k8s.io/ipclaims.eipctl.io created" in out
    assert "ipclaimpools.eipctl.io created" in out and "ipnodes.eipctl.io created" in out
    out = await kubectl.out(
        "wait", "--for=condition=Established", "crd/ipclaims.eipctl.io", "--timeout=10s"
    )
    assert (
        out.strip()
        == "customresourcedefinition.apiextensions.k8s.io/ipclaims.eipctl.io condition met"
    )

    out = await kubectl.out("apply", "-f", "-", stdin=SAMPLES)
    assert out.split("\n")[:3] == [
        "ipclaimpool.eipctl.io/pool-a created",
        "ipclaim.eipctl.io/203-0-113-7 created",
        "service/web created",
    ]

    rows = table(await kubectl.out("get", "ipclaims"))
    assert rows[0] == ["NAME", "IP", "NODE", "PHASE", "POOL", "SERVICES", "AGE"]
    assert rows[1][:3] == ["203-0-113-7", "203.0.113.7", "node-1"]
    assert rows[1][3:5] == ["pool-a", '["default/web"]']  # PHASE is empty until a status is written

    rows = table(await kubectl.out("get", "ipp"))
    assert rows[0][:3] == ["NAME", "CIDR", "AUTO"] and rows[1][:3] == [
        "pool-a",
        "203.0.113.0/24",
        "true",
    ]

    doc = yaml.safe_load(await kubectl.out("get", "ipclaim", "203-0-113-7", "-o", "yaml"))
    assert doc["spec"]["ip"] == "203.0.113.7" and doc["metadata"]["generation"] == 1
    assert doc["metadata"]["resourceVersion"] == str(
        apiserver.store.get("eipctl.io", "ipclaims", "203-0-113-7")["metadata"]["resourceVersion"]
    )

    assert (
        await kubectl.out("annotate", "service", "web", "external-ip=auto")
    ).strip() == "service/web annotated"
    svc = apiserver.store.get("", "services", "web", "default")
    assert svc["metadata"]["annotations"]["external-ip"] == "auto"

    out = await kubectl.out("label", "ipclaim", "203-0-113-7", "eipctl.io/node=node-1")
    assert out.strip() == "ipclaim.eipctl.io/203-0-113-7 labeled"
    rows = table(await kubectl.out("get", "ipc", "-l", "eipctl.io/node=node-1"))
    assert [r[0] for r in rows[1:]] == ["203-0-113-7"]
    _, out, err = await kubectl.run("get", "ipc", "-l", "eipctl.io/node=node-2")
    assert "No resources found" in out + err

    await kubectl.out("patch", "svc", "web", "-p", '{"spec":{"externalIPs":["203.0.113.7"]}}')
    rows = table(await kubectl.out("get", "svc"))
    assert rows[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    web = next(r for r in rows if r[0] == "web")
    assert (
        web[1] == "ClusterIP"
        and web[2].startswith("10.96.")
        and web[3:5] == ["203.0.113.7", "80/TCP"]
    )

    out = await kubectl.out("apply", "-f", "-", stdin=SAMPLES)
    assert "ipclaim.eipctl.io/203-0-113-7 unchanged" in out

    out = await kubectl.out("delete", "ipclaim", "203-0-113-7")
    assert out.strip() == 'ipclaim.eipctl.io "203-0-113-7" deleted'
    _, out, err = await kubectl.run("get", "ipclaims")
    assert "No resources found" in out + err
    assert apiserver.store.find("eipctl.io", "ipclaims", "203-0-113-7") is None


async def test_kubectl_shows_validation_errors(apiserver: ApiServer, kubectl: Kubectl) -> None:
    await kubectl.out("apply", "-f", str(CRDS))
    bad = "apiVersion: eipctl.io/v1alpha1\nkind: IpClaim\nmetadata: {name: x}\nspec: {ip: not-an-ip}\n"
    rc, _, err = await kubectl.run("apply", "-f", "-", stdin=bad, check=False)
    assert rc != 0 and "spec.ip" in err and "Invalid" in err


BAD_POOL = """
apiVersion: eipctl.io/v1alpha1
kind: IpClaimPool
metadata:
  name: bad
spec:
  cidr: 10.0.0.0/33
"""


async def test_kubectl_apply_bad_cidr_says_why(apiserver: ApiServer, kubectl: Kubectl) -> None:
    """The CRD's CEL rule (isCIDR) refuses a /33 with a message a person reads, worded as a
    real apiserver words a failed x-kubernetes-validations rule."""
    await kubectl.out("apply", "-f", str(CRDS))
    rc, _, err = await kubectl.run("apply", "-f", "-", stdin=BAD_POOL, check=False)
    assert rc != 0
    assert err.strip() == (
        'The IpClaimPool "bad" is invalid: spec.cidr: Invalid value: "string": '
        "cidr must be an IP prefix such as 192.0.2.0/24 or 2001:db8::/64"
    )
    assert apiserver.store.find("eipctl.io", "ipclaimpools", "bad") is None

    out = await kubectl.out("apply", "-f", "-", stdin=BAD_POOL.replace("/33", "/24"))
    assert out.strip() == "ipclaimpool.eipctl.io/bad created"
    rc, _, err = await kubectl.run(
        "patch",
        "ipp",
        "bad",
        "--type=merge",
        "-p",
        '{"spec":{"exclude":["10.0.0.1/40"]}}',
        check=False,
    )
    assert rc != 0 and "spec.exclude[0]: Invalid value" in err
    assert "each exclude entry must be an IP address or prefix" in err


async def test_kubectl_meets_deny_service_external_ips(
    apiserver: ApiServer, kubectl: Kubectl
) -> None:
    """With the DenyServiceExternalIPs switch on, kubectl prints what a real cluster prints."""
    apiserver.plugins.deny_service_external_ips = True
    web = SAMPLES.rsplit("---", maxsplit=1)[-1]
    assert (await kubectl.out("apply", "-f", "-", stdin=web)).strip() == "service/web created"
    rc, _, err = await kubectl.run(
        "patch", "svc", "web", "-p", '{"spec":{"externalIPs":["203.0.113.7"]}}', check=False
    )
    assert rc != 0
    assert err.strip() == (
        'Error from server (Forbidden): services "web" is forbidden: '
        "Use of external IPs is denied by admission control"
    )


async def test_kubectl_delete_waits_for_finalizers(apiserver: ApiServer, kubectl: Kubectl) -> None:
    # `kubectl create configmap` (the generators) sends protobuf, which the emulator refuses
    # with 415; `create -f` sends JSON.
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n"
    assert (await kubectl.out("create", "-f", "-", stdin=cm)).strip() == "configmap/cfg created"
    await kubectl.out(
        "patch", "configmap", "cfg", "--type=merge", "-p", '{"metadata":{"finalizers":["x/y"]}}'
    )
    out = await kubectl.out("delete", "configmap", "cfg", "--wait=false")
    assert out.strip() == 'configmap "cfg" deleted from default namespace'
    assert apiserver.store.get("", "configmaps", "cfg", "default")["metadata"]["deletionTimestamp"]
    await kubectl.out(
        "patch",
        "configmap",
        "cfg",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    _, out, err = await kubectl.run("get", "configmap", "cfg", check=False)
    assert 'configmaps "cfg" not found' in err


async def test_kubectl_apply_kustomization(
    apiserver: ApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    # deploy/ as a fresh clone has it: nothing to write first
    out = await kubectl.out("apply", "-k", str(deploy_checkout(tmp_path / "checkout")))
    assert "customresourcedefinition.apiextensions.k8s.io/ipclaims.eipctl.io created" in out
    kinds = {line.split("/")[0] for line in out.splitlines() if " created" in line}
    assert "deployment.apps" in kinds and "clusterrole.rbac.authorization.k8s.io" in kinds
    rows = table(await kubectl.out("get", "deployments", "-A"))
    assert len(rows) > 1 and rows[0][:2] == ["NAMESPACE", "NAME"]


async def test_kubectl_get_watch_prints_rows(apiserver: ApiServer, kubectl: Kubectl) -> None:
    await kubectl.out("apply", "-f", str(CRDS))
    await kubectl.out("apply", "-f", "-", stdin=SAMPLES)
    proc = await asyncio.create_subprocess_exec(
        kubectl.binary,
        "--cache-dir",
        str(kubectl.cache),
        "get",
        "ipclaims",
        "-w",
        "--request-timeout=20s",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=kubectl.env,
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(20):
            header = (await proc.stdout.readline()).decode().split()
            first = (await proc.stdout.readline()).decode().split()
            assert header[:3] == ["NAME", "IP", "NODE"] and first[:3] == [
                "203-0-113-7",
                "203.0.113.7",
                "node-1",
            ]
            claim = apiserver.store.get("eipctl.io", "ipclaims", "203-0-113-7")
            claim["status"] = {"phase": "Bound"}
            apiserver.store.update("eipctl.io", "ipclaims", claim, status=True)
            change = (await proc.stdout.readline()).decode().split()
            assert change[:4] == ["203-0-113-7", "203.0.113.7", "node-1", "Bound"]
    finally:
        proc.terminate()
        await proc.wait()
