"""ResourceRef paths and object keys (the HTTP verbs are exercised against the emulator)."""

from __future__ import annotations

from pathlib import Path

from eipctl.kube.client import (
    IPCLAIMS,
    LEASES,
    NODES,
    SERVICES,
    KubeApi,
    connect,
    object_key,
    split_key,
)
from kubemu import ApiServer


def test_paths_for_core_group_namespaced_and_status() -> None:
    assert SERVICES.path() == "/api/v1/services"
    assert SERVICES.path("web", "svc1") == "/api/v1/namespaces/web/services/svc1"
    assert SERVICES.path("web", "svc1", "status").endswith("/svc1/status")
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"
    assert LEASES.path("kube-system", "l") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l"
    )
    assert IPCLAIMS.path(None, "203-0-113-7", "status") == (
        "/apis/eipctl.io/v1alpha1/ipclaims/203-0-113-7/status"
    )
    assert IPCLAIMS.api_version == "eipctl.io/v1alpha1" and SERVICES.api_version == "v1"


def test_object_keys_round_trip() -> None:
    assert object_key({"metadata": {"name": "a", "namespace": "ns"}}) == "ns/a"
    assert object_key({"metadata": {"name": "203-0-113-7"}}) == "203-0-113-7"
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("n1") == (None, "n1")


async def test_connect_with_a_kubeconfig_path(apiserver: ApiServer, kubeconfig_path: Path) -> None:
    api = await connect(str(kubeconfig_path))
    async with api:
        assert isinstance(api, KubeApi)
        nodes = await api.list(NODES)
        assert nodes.resource_version


class RecordingClient:
    """An ApiClient that records the query of each call and answers 200 {}."""

    def __init__(self) -> None:
        self.queries: list[list[tuple[str, str]]] = []

    async def call_api(self, path: str, method: str, **kw: object) -> object:
        query = kw["query_params"]
        assert isinstance(query, list)
        self.queries.append(query)

        class Response:
            status = 200

            async def read(self) -> bytes:
                return b"{}"

            def release(self) -> None:
                pass

        return Response()


async def test_a_get_from_the_watch_cache_asks_for_resource_version_zero() -> None:
    recorder = RecordingClient()
    api = KubeApi(recorder)
    await api.get(NODES, "n1")
    await api.get(NODES, "n1", resource_version="0")
    assert recorder.queries == [[], [("resourceVersion", "0")]]
