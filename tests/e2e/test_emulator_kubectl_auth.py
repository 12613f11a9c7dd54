"""`kubectl auth can-i` and `kubectl auth whoami` against the emulator: kubectl sends the
self reviews as protobuf, finds them in discovery, and prints what RBAC decides."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from test_emulator_kubectl import Kubectl

from kubemu import ApiServer

pytestmark = pytest.mark.kubectl
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig_path, tmp_path)


@pytest_asyncio.fixture
async def rbac_server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(rbac=True, tls=True)  # kubectl sends no bearer token over plain http
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


def rows(text: str) -> list[list[str]]:
    """kubectl's two-column output, cells split where two or more spaces are."""
    return [re.split(r"\s{2,}", line) for line in text.strip().splitlines()]


async def can_i(kubectl: Kubectl, *what: str) -> tuple[int, str]:
    rc, out, _ = await kubectl.run("auth", "can-i", *what, check=False)
    return rc, out.strip()


async def test_everything_is_allowed_without_rbac(apiserver: ApiServer, kubectl: Kubectl) -> None:
    await apiserver.load_crds_from_dir(REPO / "deploy" / "crds")
    rc, out, err = await kubectl.run("auth", "can-i", "create", "ipclaims", "-v=8")
    assert (rc, out.strip()) == (0, "yes")
    assert "Content-Type: application/vnd.kubernetes.protobuf" in err
    assert await can_i(kubectl, "delete", "nodes") == (0, "yes")
    assert await can_i(kubectl, "get", "/healthz") == (0, "yes")

    _, out, err = await kubectl.run("auth", "whoami", "-v=8")
    assert err.count("Content-Type: application/vnd.kubernetes.protobuf") >= 2  # the answer too
    assert rows(out) == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "kubernetes-admin"],
        ["Groups", "[system:masters system:authenticated]"],
    ]

    out = await kubectl.out("api-resources", "--api-group=authorization.k8s.io", "-o", "wide")
    header, row = (line.split() for line in out.strip().splitlines())
    assert header[:5] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    assert row == [
        "selfsubjectaccessreviews",
        "authorization.k8s.io/v1",
        "false",
        "SelfSubjectAccessReview",
        "create",
    ]


async def test_can_i_follows_rbac(rbac_server: ApiServer, tmp_path: Path) -> None:
    rbac = rbac_server.rbac
    assert rbac is not None
    token = rbac.service_account_token("team", "bot", node="node-1")
    bot = Kubectl(rbac_server.write_kubeconfig(tmp_path / "bot", token=token), tmp_path / "b")
    admin = Kubectl(rbac_server.write_kubeconfig(tmp_path / "admin"), tmp_path / "a")
    await admin.out("create", "namespace", "team")
    await admin.out("create", "role", "leases", "--verb=get", "--resource=leases", "-n", "team")
    await admin.out(
        "create",
        "rolebinding",
        "leases",
        "--role=leases",
        "--serviceaccount=team:bot",
        "-n",
        "team",
    )

    assert await can_i(bot, "get", "leases", "-n", "team") == (0, "yes")
    assert await can_i(bot, "get", "leases.coordination.k8s.io/x", "-n", "team") == (0, "yes")
    assert await can_i(bot, "update", "leases", "-n", "team") == (1, "no")
    assert await can_i(bot, "get", "leases", "-n", "default") == (1, "no")
    assert await can_i(bot, "create", "namespaces") == (1, "no")
    assert await can_i(admin, "create", "namespaces") == (0, "yes")

    out = json.loads(await bot.out("auth", "whoami", "-o", "json"))
    assert out["kind"] == "SelfSubjectReview"
    assert out["status"]["userInfo"] == {
        "username": "system:serviceaccount:team:bot",
        "uid": "sa-team-bot",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/node-name": ["node-1"]},
    }
    assert rows(await bot.out("auth", "whoami")) == [
        ["ATTRIBUTE", "VALUE"],
        ["Username", "system:serviceaccount:team:bot"],
        ["UID", "sa-team-bot"],
        ["Groups", "[system:serviceaccounts system:serviceaccounts:team system:authenticated]"],
        ["Extra: authentication.kubernetes.io/node-name", "[node-1]"],
    ]
    # only the reviews were asked, nothing was refused on the way
    assert rbac.denials == []
