"""The emulator's RBAC mode: tokens, request attributes, rules and bindings, 403s.

The rules are Kubernetes' (rbac/v1 RuleAllows and the RBAC authorizer): these tests pin the
cases that decide whether deploy/rbac/ is really least privilege, such as `*/status`,
resourceNames, and RoleBindings that grant only inside their own namespace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eipctl.kube.client import (
    IPCLAIMS,
    LEASES,
    SERVICES,
    KubeApi,
    ResourceRef,
    connect,
)
from eipctl.kube.errors import Forbidden, NotFound
from kubemu import ApiServer
from kubemu.rbac import (
    NODE_NAME_EXTRA,
    RequestAttributes,
    request_attributes,
    rule_allows,
)

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"
RBAC = "rbac.authorization.k8s.io"
CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        (
            "GET",
            "/api/v1/namespaces/default/services",
            {},
            ("list", "", "services", "", "default", ""),
        ),
        ("GET", "/api/v1/services", {"watch": "true"}, ("watch", "", "services", "", "", "")),
        ("GET", "/api/v1/namespaces/ns/services/web", {}, ("get", "", "services", "", "ns", "web")),
        (
            "PUT",
            "/api/v1/namespaces/ns/services/web/status",
            {},
            ("update", "", "services", "status", "ns", "web"),
        ),
        (
            "PATCH",
            "/apis/eipctl.io/v1alpha1/ipclaims/203-0-113-7/status",
            {},
            ("patch", "eipctl.io", "ipclaims", "status", "", "203-0-113-7"),
        ),
        (
            "POST",
            "/apis/eipctl.io/v1alpha1/ipclaims",
            {},
            ("create", "eipctl.io", "ipclaims", "", "", ""),
        ),
        (
            "DELETE",
            "/apis/eipctl.io/v1alpha1/ipclaims/x",
            {},
            ("delete", "eipctl.io", "ipclaims", "", "", "x"),
        ),
        (
            "DELETE",
            "/apis/eipctl.io/v1alpha1/ipclaims",
            {},
            ("deletecollection", "eipctl.io", "ipclaims", "", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/kube-system",
            {},
            ("get", "", "namespaces", "", "kube-system", "kube-system"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns1/status",
            {},
            ("update", "", "namespaces", "status", "ns1", "ns1"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/eipctl-system/leases/eipctl-scheduler",
            {},
            ("get", "coordination.k8s.io", "leases", "", "eipctl-system", "eipctl-scheduler"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            {"watch": "true", "fieldSelector": "metadata.name=mine"},
            ("watch", "coordination.k8s.io", "leases", "", "ns", "mine"),
        ),
        (
            "GET",
            "/api/v1/services",
            {"fieldSelector": "metadata.name!=web"},
            ("list", "", "services", "", "", ""),
        ),
    ],
)
def test_request_attributes(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    a = request_attributes(method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name) == expected


@pytest.mark.parametrize(
    "path", ["/api", "/apis", "/apis/eipctl.io/v1alpha1", "/version", "/openapi/v3"]
)
def test_discovery_paths_are_not_resource_requests(path: str) -> None:
    assert not request_attributes("GET", path, {}).resource_request


def attrs(
    verb: str, resource: str, sub: str = "", group: str = "", name: str = ""
) -> RequestAttributes:
    return RequestAttributes(
        verb=verb,
        resource_request=True,
        path="/",
        api_group=group,
        resource=resource,
        subresource=sub,
        name=name,
    )


@pytest.mark.parametrize(
    ("rule", "request_", "allowed"),
    [
        (
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
            attrs("get", "services"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
            attrs("update", "services"),
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["services"], "verbs": ["update"]},
            attrs("update", "services", "status"),
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["services/status"], "verbs": ["update"]},
            attrs("update", "services", "status"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]},
            attrs("update", "services", "status"),
            True,
        ),
        (
            {"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]},
            attrs("update", "services"),
            False,
        ),
        (
            {"apiGroups": [""], "resources": ["*"], "verbs": ["*"]},
            attrs("patch", "services", "status"),
            True,
        ),
        (
            {"apiGroups": ["eipctl.io"], "resources": ["ipclaims"], "verbs": ["get"]},
            attrs("get", "ipclaims"),
            False,
        ),
        (
            {"apiGroups": ["*"], "resources": ["ipclaims"], "verbs": ["get"]},
            attrs("get", "ipclaims", group="eipctl.io"),
            True,
        ),
        (
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["a"],
                "verbs": ["get", "update"],
            },
            attrs("update", "leases", group="coordination.k8s.io", name="a"),
            True,
        ),
        (
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["a"],
                "verbs": ["get", "update"],
            },
            attrs("update", "leases", group="coordination.k8s.io", name="b"),
            False,
        ),
        (
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["a"],
                "verbs": ["create", "list"],
            },
            attrs("list", "leases", group="coordination.k8s.io"),
            False,
        ),
    ],
)
def test_rule_allows(rule: dict[str, Any], request_: RequestAttributes, allowed: bool) -> None:
    assert rule_allows(rule, request_) is allowed


@pytest_asyncio.fixture
async def srv() -> AsyncIterator[ApiServer]:
    server = ApiServer(history_window=200, bookmark_interval=0, rbac=True)
    await server.start()
    try:
        await server.load_crds_from_dir(CRDS)
        server.store.create("", "namespaces", {"metadata": {"name": "team-a"}})
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def as_user(srv: ApiServer, tmp_path: Path) -> AsyncIterator[Any]:
    clients: list[KubeApi] = []

    async def make(token: str) -> KubeApi:
        path = srv.write_kubeconfig(tmp_path / f"kc-{len(clients)}", token=token)
        api = await connect(str(path))
        clients.append(api)
        return api

    yield make
    for api in clients:
        await api.close()


def grant(
    srv: ApiServer,
    name: str,
    rules: list[dict[str, Any]],
    subject: dict[str, Any],
    *,
    namespace: str = "",
    cluster_role: bool = True,
) -> None:
    role_kind = "ClusterRole" if cluster_role else "Role"
    role: dict[str, Any] = {"metadata": {"name": name}, "rules": rules}
    binding: dict[str, Any] = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": name},
        "subjects": [subject],
    }
    if cluster_role:
        srv.store.create(RBAC, "clusterroles", role)
    else:
        role["metadata"]["namespace"] = namespace
        srv.store.create(RBAC, "roles", role, namespace)
    if namespace:
        binding["metadata"]["namespace"] = namespace
        srv.store.create(RBAC, "rolebindings", binding, namespace)
    else:
        srv.store.create(RBAC, "clusterrolebindings", binding)


SA = {"kind": "ServiceAccount", "name": "reader", "namespace": "team-a"}


async def test_the_default_kubeconfig_is_admin(srv: ApiServer, tmp_path: Path) -> None:
    api = await connect(str(srv.write_kubeconfig(tmp_path / "admin")))
    try:
        await api.create(CONFIGMAPS, {"metadata": {"name": "c"}}, "team-a")
        assert (await api.list(IPCLAIMS)).items == []
    finally:
        await api.close()
    assert srv.rbac is not None and srv.rbac.denials == []


async def test_unknown_token_is_unauthorized(srv: ApiServer, as_user: Any) -> None:
    api = await as_user("not-a-token")
    with pytest.raises(Forbidden) as info:
        await api.list(SERVICES, "team-a")
    assert info.value.status == 401


async def test_service_account_without_bindings_is_refused_with_kubernetes_words(
    srv: ApiServer, as_user: Any
) -> None:
    assert srv.rbac is not None
    api = await as_user(srv.rbac.service_account_token("team-a", "reader"))
    with pytest.raises(Forbidden) as info:
        await api.get(SERVICES, "web", "team-a")
    assert info.value.status == 403
    assert info.value.message == (
        'services "web" is forbidden: User "system:serviceaccount:team-a:reader" cannot get '
        'resource "services" in API group "" in the namespace "team-a"'
    )
    with pytest.raises(Forbidden) as info:
        await api.patch(IPCLAIMS, "203-0-113-7", {"status": {}}, status=True)
    assert info.value.message == (
        'ipclaims.eipctl.io "203-0-113-7" is forbidden: User '
        '"system:serviceaccount:team-a:reader" cannot patch resource "ipclaims/status" in API '
        'group "eipctl.io" at the cluster scope'
    )
    assert [d.attributes.verb for d in srv.rbac.denials] == ["get", "patch"]


async def test_cluster_role_binding_grants_everywhere_and_only_the_verbs(
    srv: ApiServer, as_user: Any
) -> None:
    assert srv.rbac is not None
    grant(
        srv,
        "svc-reader",
        [{"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list"]}],
        SA,
    )
    api = await as_user(srv.rbac.service_account_token("team-a", "reader"))
    assert (await api.list(SERVICES, "default")).items == []
    assert (await api.list(SERVICES)).items == []  # all namespaces
    with pytest.raises(NotFound):  # allowed, and absent
        await api.get(SERVICES, "web", "team-a")
    with pytest.raises(Forbidden):
        await api.create(
            SERVICES, {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}, "team-a"
        )


async def test_role_binding_grants_only_in_its_namespace(srv: ApiServer, as_user: Any) -> None:
    assert srv.rbac is not None
    grant(
        srv,
        "cm",
        [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
        SA,
        namespace="team-a",
        cluster_role=False,
    )
    api = await as_user(srv.rbac.service_account_token("team-a", "reader"))
    await api.create(CONFIGMAPS, {"metadata": {"name": "c"}}, "team-a")
    with pytest.raises(Forbidden):
        await api.create(CONFIGMAPS, {"metadata": {"name": "c"}}, "default")
    with pytest.raises(Forbidden):
        await api.list(CONFIGMAPS)  # across namespaces: cluster scope


async def test_group_subjects_and_resource_names(srv: ApiServer, as_user: Any) -> None:
    assert srv.rbac is not None
    srv.store.create("", "namespaces", {"metadata": {"name": "eipctl-system"}})
    grant(
        srv,
        "lease",
        [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": ["mine"],
                "verbs": ["get", "update"],
            },
        ],
        {"kind": "Group", "name": "system:serviceaccounts:team-a", "apiGroup": RBAC},
        namespace="eipctl-system",
        cluster_role=False,
    )
    api = await as_user(srv.rbac.service_account_token("team-a", "anyone"))
    for name in ("mine", "theirs"):
        await api.create(LEASES, {"metadata": {"name": name}, "spec": {}}, "eipctl-system")
    lease = await api.get(LEASES, "mine", "eipctl-system")
    await api.replace(LEASES, {**lease, "spec": {"holderIdentity": "me"}})
    with pytest.raises(Forbidden):
        await api.get(LEASES, "theirs", "eipctl-system")
    with pytest.raises(Forbidden):
        await api.list(LEASES, "eipctl-system")


async def test_service_account_tokens_carry_the_node_name(srv: ApiServer) -> None:
    assert srv.rbac is not None
    token = srv.rbac.service_account_token("eipctl-system", "eipctl-controller", node="node-a")
    user = srv.rbac.authenticate(f"Bearer {token}")
    assert user is not None
    assert user.username == "system:serviceaccount:eipctl-system:eipctl-controller"
    assert user.extra[NODE_NAME_EXTRA] == ("node-a",)
    assert "system:serviceaccounts:eipctl-system" in user.groups
