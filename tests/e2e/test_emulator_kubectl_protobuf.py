"""kubectl's imperative commands, which speak protobuf for the built-in kinds, against the
emulator: what they create is what `kubectl get -o json` then shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_emulator_kubectl import Kubectl

from kubemu import ApiServer

pytestmark = pytest.mark.kubectl
PROTOBUF = "application/vnd.kubernetes.protobuf"


@pytest.fixture
def kubectl(kubeconfig_path: Path, tmp_path: Path) -> Kubectl:
    return Kubectl(kubeconfig_path, tmp_path)


async def get(kubectl: Kubectl, *what: str) -> Any:
    return json.loads(await kubectl.out("get", *what, "-o", "json"))


async def test_create_and_expose_speak_protobuf(apiserver: ApiServer, kubectl: Kubectl) -> None:
    _, out, err = await kubectl.run("create", "namespace", "shop", "-v=8")
    assert out.strip() == "namespace/shop created"
    # the request and the answer were both protobuf
    assert f"Content-Type: {PROTOBUF}" in err and f"Accept: {PROTOBUF},application/json" in err
    assert err.count(f"Content-Type: {PROTOBUF}") >= 2, err[-3000:]
    ns = await get(kubectl, "namespace", "shop")
    assert ns["status"]["phase"] == "Active" and ns["metadata"]["uid"]

    n = "--namespace=shop"
    out = await kubectl.out("create", "configmap", "settings", "--from-literal=mode=fast", n)
    assert out.strip() == "configmap/settings created"
    out = await kubectl.out("create", "secret", "generic", "token", "--from-literal=t=s3cr3t", n)
    assert out.strip() == "secret/token created"
    out = await kubectl.out("create", "service", "clusterip", "cache", "--tcp=6379:6379", n)
    assert out.strip() == "service/cache created"
    out = await kubectl.out(
        "create", "deployment", "web", "--image=nginx:1.27", "--port=8080", "--replicas=2", n
    )
    assert out.strip() == "deployment.apps/web created"
    out = await kubectl.out(
        "expose", "deployment", "web", "--port=80", "--target-port=8080", "--name=web", n
    )
    assert out.strip() == "service/web exposed"

    cm = await get(kubectl, "configmap", "settings", n)
    assert cm["data"] == {"mode": "fast"}
    secret = await get(kubectl, "secret", "token", n)
    assert secret["data"] == {"t": "czNjcjN0"}
    cache = await get(kubectl, "service", "cache", n)
    assert cache["spec"]["type"] == "ClusterIP" and cache["spec"]["clusterIP"].startswith("10.")
    assert cache["spec"]["selector"] == {"app": "cache"}
    assert [(p["port"], p["targetPort"]) for p in cache["spec"]["ports"]] == [(6379, 6379)]
    deploy = await get(kubectl, "deployment", "web", n)
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["ports"]) == ("nginx:1.27", [{"containerPort": 8080}])
    web = await get(kubectl, "service", "web", n)
    assert web["spec"]["selector"] == {"app": "web"}
    assert [(p["port"], p["targetPort"]) for p in web["spec"]["ports"]] == [(80, 8080)]
    assert apiserver.store.get("", "services", "web", "shop")["spec"]["clusterIP"]


async def test_protobuf_answers_and_errors_reach_kubectl(
    apiserver: ApiServer, kubectl: Kubectl
) -> None:
    # `-o json` prints the object kubectl decoded from the protobuf answer
    created = json.loads(
        await kubectl.out(
            "create", "deployment", "idle", "--image=busybox", "--replicas=0", "-o", "json"
        )
    )
    stored = apiserver.store.get("apps", "deployments", "idle", "default")
    assert created["metadata"]["uid"] == stored["metadata"]["uid"]
    assert created["metadata"]["creationTimestamp"] == stored["metadata"]["creationTimestamp"]
    assert created["spec"]["replicas"] == 0 == stored["spec"]["replicas"]

    created = json.loads(await kubectl.out("create", "serviceaccount", "robot", "-o", "json"))
    assert created["metadata"]["resourceVersion"] == str(
        apiserver.store.get("", "serviceaccounts", "robot", "default")["metadata"][
            "resourceVersion"
        ]
    )
    await kubectl.out("create", "role", "reader", "--verb=get,list", "--resource=pods")
    await kubectl.out("create", "rolebinding", "robot-reads", "--role=reader", "--user=robot")
    binding = await get(kubectl, "rolebinding", "robot-reads")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "reader",
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "robot"}
    ]

    # a failure comes back as a protobuf Status, which kubectl prints as usual
    rc, _, err = await kubectl.run("create", "namespace", "default", check=False)
    assert rc == 1
    assert err.strip() == 'Error from server (AlreadyExists): namespaces "default" already exists'
    rc, _, err = await kubectl.run("create", "configmap", "x", "--namespace=nowhere", check=False)
    assert rc == 1 and 'namespaces "nowhere" not found' in err
