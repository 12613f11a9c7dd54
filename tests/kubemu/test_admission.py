"""The emulator evaluates ValidatingAdmissionPolicies (CEL, with cel-python).

Checked with the policy eipctl ships (deploy/policy/controller-own-node.yaml): a controller
may write its own IpNode and the status of claims placed on its own node, nothing of another
node's, and the policy leaves every other account alone. Then the generic rules: matching by
operation and subresource, failurePolicy, messageExpression, reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import celpy  # noqa: F401  # the emulator checks CEL rules with it: the test extra ships it, no skip
import pytest
import pytest_asyncio
import yaml

from eipctl.kube.client import IPCLAIMS, IPNODES, KubeApi, connect
from eipctl.kube.errors import Invalid
from kubemu import ApiServer

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ADM = "admissionregistration.k8s.io"
NS = "eipctl-system"
CONTROLLER = "eipctl-controller"

Client = Callable[..., Awaitable[KubeApi]]


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest_asyncio.fixture
async def srv() -> AsyncIterator[ApiServer]:
    server = ApiServer(history_window=200, bookmark_interval=0, rbac=True, admission=True)
    await server.start()
    try:
        await server.load_crds_from_dir(DEPLOY / "crds")
        for doc in load(DEPLOY / "policy" / "controller-own-node.yaml"):
            plural = {
                "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
                "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
            }[doc["kind"]]
            server.store.create(ADM, plural, doc)
        # RBAC is not under test here: every account may write IpNodes and claims
        server.store.create(
            "rbac.authorization.k8s.io",
            "clusterroles",
            {
                "metadata": {"name": "all-eipctl"},
                "rules": [{"apiGroups": ["eipctl.io"], "resources": ["*"], "verbs": ["*"]}],
            },
        )
        server.store.create(
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            {
                "metadata": {"name": "all-eipctl"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "all-eipctl",
                },
                "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}],
            },
        )
        for node in ("node-a", "node-b"):
            server.store.create(
                "eipctl.io", "ipnodes", {"metadata": {"name": node}, "spec": {"link": "eth0"}}
            )
        for name, ip, node in (
            ("203-0-113-1", "203.0.113.1", "node-a"),
            ("203-0-113-2", "203.0.113.2", "node-b"),
        ):
            server.store.create(
                "eipctl.io",
                "ipclaims",
                {"metadata": {"name": name}, "spec": {"ip": ip, "nodeName": node}},
            )
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def client(srv: ApiServer, tmp_path: Path) -> AsyncIterator[Client]:
    opened: list[KubeApi] = []

    async def make(account: str, node: str = "") -> KubeApi:
        assert srv.rbac is not None
        token = srv.rbac.service_account_token(NS, account, node=node)
        api = await connect(str(srv.write_kubeconfig(tmp_path / f"kc{len(opened)}", token=token)))
        opened.append(api)
        return api

    yield make
    for api in opened:
        await api.close()


def heartbeat(n: int) -> dict[str, Any]:
    return {"status": {"heartbeat": n}}


async def test_controller_writes_its_own_ipnode(client: Client) -> None:
    api = await client(CONTROLLER, node="node-a")
    await api.patch(IPNODES, "node-a", heartbeat(1), status=True)
    await api.patch(IPNODES, "node-a", {"metadata": {"labels": {"zone": "z1"}}})
    node = await api.get(IPNODES, "node-a")
    assert node["status"]["heartbeat"] == 1
    assert node["metadata"]["labels"] == {"zone": "z1"}


async def test_controller_cannot_write_another_nodes_ipnode(client: Client, srv: ApiServer) -> None:
    api = await client(CONTROLLER, node="node-a")
    with pytest.raises(Invalid) as info:
        await api.patch(IPNODES, "node-b", heartbeat(7), status=True)
    assert info.value.status == 422
    assert info.value.message == (
        "ValidatingAdmissionPolicy 'eipctl-controller-own-node' with binding "
        "'eipctl-controller-own-node' denied request: a controller may only write its own IpNode"
    )
    with pytest.raises(Invalid):
        await api.create(IPNODES, {"metadata": {"name": "node-c"}, "spec": {"link": "eth0"}})
    assert "status" not in srv.store.get("eipctl.io", "ipnodes", "node-b")
    assert srv.store.find("eipctl.io", "ipnodes", "node-c") is None


async def test_controller_writes_status_only_of_claims_placed_on_its_node(
    client: Client, srv: ApiServer
) -> None:
    api = await client(CONTROLLER, node="node-a")
    bound = {"status": {"phase": "Bound", "boundNode": "node-a"}}
    await api.patch(IPCLAIMS, "203-0-113-1", bound, status=True)
    with pytest.raises(Invalid) as info:
        await api.patch(IPCLAIMS, "203-0-113-2", bound, status=True)
    assert info.value.message.endswith(
        "a controller may only write the status of claims placed on its own node"
    )
    assert srv.store.get("eipctl.io", "ipclaims", "203-0-113-1")["status"]["phase"] == "Bound"
    assert "status" not in srv.store.get("eipctl.io", "ipclaims", "203-0-113-2")


async def test_controller_token_without_a_node_name_is_refused(client: Client) -> None:
    api = await client(CONTROLLER)
    with pytest.raises(Invalid) as info:
        await api.patch(IPNODES, "node-a", heartbeat(1), status=True)
    assert info.value.message.endswith("the controller's token carries no node name")


async def test_other_accounts_are_not_confined(client: Client, srv: ApiServer) -> None:
    scheduler = await client("eipctl-scheduler")
    await scheduler.patch(IPCLAIMS, "203-0-113-2", {"status": {"phase": "Scheduled"}}, status=True)
    await scheduler.patch(IPNODES, "node-b", {"metadata": {"labels": {"x": "y"}}})
    assert srv.admission is not None and srv.admission.applied == 0


async def test_direct_store_writes_are_not_admission_requests(srv: ApiServer) -> None:
    node = srv.store.get("eipctl.io", "ipnodes", "node-b")
    node["status"] = {"heartbeat": 3}
    srv.store.update("eipctl.io", "ipnodes", node, status=True)
    assert srv.store.get("eipctl.io", "ipnodes", "node-b")["status"]["heartbeat"] == 3


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


async def test_generic_rules_failure_policy_and_message_expression(
    client: Client, srv: ApiServer
) -> None:
    rules = {
        "resourceRules": [
            {
                "apiGroups": ["eipctl.io"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["ipclaims"],  # the main resource only, not ipclaims/status
            }
        ]
    }
    srv.store.create(
        ADM,
        "validatingadmissionpolicies",
        policy(
            "no-link",
            {
                "failurePolicy": "Fail",
                "matchConstraints": rules,
                "validations": [
                    {
                        "expression": "!has(object.spec.link)",
                        "messageExpression": "'link ' + object.spec.link + ' is not allowed'",
                        "reason": "Forbidden",
                    }
                ],
            },
        ),
    )
    srv.store.create(
        ADM,
        "validatingadmissionpolicies",
        policy(
            "broken",
            {
                "failurePolicy": "Ignore",
                "matchConstraints": rules,
                "validations": [{"expression": "object.no.such.field == 1"}],
            },
        ),
    )
    for name in ("no-link", "broken"):
        srv.store.create(
            ADM,
            "validatingadmissionpolicybindings",
            policy(name, {"policyName": name, "validationActions": ["Deny"]}),
        )
    api = await client("someone")
    with pytest.raises(Exception) as info:
        await api.patch(IPCLAIMS, "203-0-113-1", {"spec": {"link": "eth1"}})
    assert getattr(info.value, "status", None) == 403
    assert str(info.value).endswith("denied request: link eth1 is not allowed")
    # the status subresource does not match "ipclaims"; the broken policy is ignored
    await api.patch(IPCLAIMS, "203-0-113-1", {"status": {"phase": "Pending"}}, status=True)
    await api.patch(IPCLAIMS, "203-0-113-1", {"metadata": {"labels": {"a": "b"}}})
