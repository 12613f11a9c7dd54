"""Boot: the package's CRDs, the default pool, Nodes and demo Services, read back via the API."""

from __future__ import annotations

from importlib import resources

import pytest

from eipctl.kube.client import IPCLAIMPOOLS, NODES, SERVICES, KubeApi, connect
from eipctl.sandbox.boot import check_pool_cidr, crd_documents, node_names, seed
from kubemu import ApiError, ApiServer


def test_crds_come_from_the_package() -> None:
    names = sorted(d["metadata"]["name"] for d in crd_documents())
    assert names == [
        "bgppeers.eipctl.io",
        "ipclaimpools.eipctl.io",
        "ipclaims.eipctl.io",
        "ipnodes.eipctl.io",
    ]
    shipped = {e.name for e in (resources.files("eipctl") / "crds").iterdir()}
    assert {"ipclaimpools.yaml", "ipclaims.yaml", "ipnodes.yaml"} <= shipped


@pytest.mark.parametrize(
    ("text", "expected"),
    [("203.0.113.0/24", "203.0.113.0/24"), ("2001:DB8::/64", "2001:db8::/64")],
)
def test_pool_cidr_accepted(text: str, expected: str) -> None:
    assert check_pool_cidr(text) == expected


@pytest.mark.parametrize("text", ["203.0.113.5/24", "not-a-cidr", "203.0.113.0/33"])
def test_pool_cidr_refused_with_the_flag_name(text: str) -> None:
    with pytest.raises(ValueError, match="--pool-cidr"):
        check_pool_cidr(text)


async def test_seed_makes_a_usable_cluster(apiserver: ApiServer, tmp_path: object) -> None:
    seed(apiserver, pool_cidr="203.0.113.0/24", nodes=node_names(3), services=4)
    config = apiserver.write_kubeconfig(f"{tmp_path}/kubeconfig")
    api: KubeApi = await connect(str(config))
    try:
        pools = (await api.list(IPCLAIMPOOLS)).items
        assert [
            (p["metadata"]["name"], p["spec"]["cidr"], p["spec"]["autoAssign"]) for p in pools
        ] == [("sandbox", "203.0.113.0/24", True)]
        nodes = sorted(n["metadata"]["name"] for n in (await api.list(NODES)).items)
        assert nodes == ["node-1", "node-2", "node-3"]
        services = (await api.list(SERVICES, "default")).items
        assert sorted(s["metadata"]["name"] for s in services) == [f"demo-{i}" for i in range(1, 5)]
        assert all(s["metadata"]["annotations"]["external-ip"] == "auto" for s in services)
        # the IpClaim and IpNode kinds are served (empty until the processes run)
        assert (await api.list(IPCLAIMPOOLS)).resource_version
    finally:
        await api.close()


async def test_seed_rejects_a_bad_pool_through_the_crd_schema(apiserver: ApiServer) -> None:
    with pytest.raises(ApiError, match=r"spec\.cidr: Invalid value"):
        seed(apiserver, pool_cidr="not a cidr", nodes=[], services=0)
