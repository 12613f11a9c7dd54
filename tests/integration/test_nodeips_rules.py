"""Stories of `eipctl nodeips` on bare metal: one IP per labelled Node, reuse, Node labels.

Each runs a real `NodeIps` replica against the API emulator; a small loop plays the nodes'
controllers (marks claims placed on a node Bound there, as `eipctl controller` does).
"""

from __future__ import annotations

from pathlib import Path

from test_nodeips_support import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    NODES,
    PODS,
    claims_by_node,
    controllers,
    eventually,
    get,
    node,
    node_claims,
    node_ip,
    nodeips,
    pod,
    pool,
    slot,
    update,
)

from eipctl.core.naming import TAINT_NOT_ATTACHED
from eipctl.kube.client import KubeApi


async def test_labelled_node_gets_one_claim_then_label_and_taint_lifted(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(NODES, node("n1", tainted=True))
    await api.create(NODES, node("plain", auto=False))
    async with nodeips(kubeconfig_path):
        by_node = await eventually(lambda: _with(api, "n1"))
        assert by_node == {"n1": ["192.0.2.1"]}
        claim = await get(api, IPCLAIMS, "192-0-2-1")
        assert claim is not None
        assert claim["spec"]["nodeBound"] is True
        assert claim["metadata"]["labels"]["eipctl.io/node"] == "n1"
        assert claim["status"]["phase"] == "Scheduled"
        assert await slot(api, "n1") == "192-0-2-1"
        # not live yet: no label, taint kept
        assert await node_ip(api, "n1") == ""
        async with controllers(api):
            await eventually(lambda: _ip_is(api, "n1", "192.0.2.1"))
            await eventually(lambda: _untainted(api, "n1"))
        assert await claims_by_node(api) == {"n1": ["192.0.2.1"]}
        assert await slot(api, "plain") == ""


async def test_node_pool_label_and_missing_pool(api: KubeApi, kubeconfig_path: Path) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(IPCLAIMPOOLS, pool("edge", "198.51.100.0/28"))
    await api.create(NODES, node("a", pool_name="edge"))
    await api.create(NODES, node("b", pool_name="nowhere"))
    async with nodeips(kubeconfig_path):
        await eventually(lambda: _with(api, "a"))
        assert await claims_by_node(api) == {"a": ["198.51.100.1"]}
        await api.create(IPCLAIMPOOLS, pool("nowhere", "203.0.113.0/28"))
        await eventually(lambda: _with(api, "b"))
        assert (await claims_by_node(api))["b"] == ["203.0.113.1"]


async def test_node_deleted_releases_its_ip(api: KubeApi, kubeconfig_path: Path) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(NODES, node("n1"))
    async with nodeips(kubeconfig_path):
        await eventually(lambda: _with(api, "n1"))
        await api.delete(NODES, "n1")
        await eventually(lambda: _no_claims(api))


async def test_prevent_deallocation_keeps_ip_and_newcomer_reuses_most_referenced(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    for name in ("n1", "n2", "n3"):
        await api.create(NODES, node(name))
    async with nodeips(kubeconfig_path, prevent_deallocation=True):
        await eventually(lambda: _count(api, 3))
        ips = {n: ips[0] for n, ips in (await claims_by_node(api)).items()}
        # pods want n3's IP twice, n2's once: n3's IP ranks first although it is highest
        await api.create(PODS, pod("p1", ips["n3"]))
        await api.create(PODS, pod("p2", ips["n3"]))
        await api.create(PODS, pod("p3", ips["n2"]))
        for name in ("n1", "n2", "n3"):
            await api.delete(NODES, name)
        await eventually(lambda: _orphans(api, 3))
        await api.create(NODES, node("new"))
        await eventually(lambda: _with(api, "new"))
        assert (await claims_by_node(api))["new"] == [ips["n3"]]
        await api.create(NODES, node("new2"))
        await eventually(lambda: _with(api, "new2"))
        assert (await claims_by_node(api))["new2"] == [ips["n2"]]
        await api.create(NODES, node("new3"))
        await eventually(lambda: _with(api, "new3"))
        assert (await claims_by_node(api))["new3"] == [ips["n1"]]  # no pods: lowest IP
        assert len(await node_claims(api)) == 3


async def test_cordoned_node_ip_reused_only_when_nothing_pinned(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/30"))  # 2 addresses
    await api.create(NODES, node("old1"))
    await api.create(NODES, node("old2"))
    async with nodeips(kubeconfig_path), controllers(api):
        await eventually(lambda: _count(api, 2))
        ips = {n: ips[0] for n, ips in (await claims_by_node(api)).items()}
        await eventually(lambda: _ip_is(api, "old1", ips["old1"]))
        await api.create(PODS, pod("pinned", ips["old1"], node_name="old1"))
        for name in ("old1", "old2"):
            await update(api, NODES, name, lambda o: o["spec"].update(unschedulable=True))
        await api.create(NODES, node("fresh"))
        # old1's IP is pinned by a running pod: fresh takes old2's
        await eventually(lambda: _with(api, "fresh"))
        assert (await claims_by_node(api))["fresh"] == [ips["old2"]]
        await eventually(lambda: _ip_is(api, "fresh", ips["old2"]))
        await eventually(lambda: _ip_is(api, "old2", ""))  # the IP moved away
        assert await claims_by_node(api) == {"old1": [ips["old1"]], "fresh": [ips["old2"]]}


async def test_label_removed_releases(api: KubeApi, kubeconfig_path: Path) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(NODES, node("n1"))
    async with nodeips(kubeconfig_path), controllers(api):
        await eventually(lambda: _ip_is(api, "n1", "192.0.2.1"))

        def unlabel(o: dict) -> None:  # type: ignore[type-arg]
            o["metadata"]["labels"].pop("eipctl.io/external-ip-auto-assign")

        await update(api, NODES, "n1", unlabel)
        await eventually(lambda: _no_claims(api))
        await eventually(lambda: _ip_is(api, "n1", ""))
        assert await slot(api, "n1") == ""


# --- checks ------------------------------------------------------------------------------


async def _with(api: KubeApi, name: str) -> dict[str, list[str]] | None:
    by_node = await claims_by_node(api)
    return by_node if by_node.get(name) else None


async def _count(api: KubeApi, n: int) -> bool:
    by_node = await claims_by_node(api)
    return len([k for k in by_node if k]) == n


async def _orphans(api: KubeApi, n: int) -> bool:
    return len((await claims_by_node(api)).get("", [])) == n


async def _no_claims(api: KubeApi) -> bool:
    return not await node_claims(api)


async def _ip_is(api: KubeApi, name: str, ip: str) -> bool:
    return await node_ip(api, name) == ip


async def _untainted(api: KubeApi, name: str) -> bool:
    obj = await get(api, NODES, name)
    taints = ((obj or {}).get("spec") or {}).get("taints") or []
    return not any(t.get("key") == TAINT_NOT_ATTACHED for t in taints)


async def test_pool_label_change_moves_the_node_to_the_new_pool(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "192.0.2.0/28"))
    await api.create(IPCLAIMPOOLS, pool("edge", "198.51.100.0/28"))
    await api.create(NODES, node("n1"))
    async with nodeips(kubeconfig_path), controllers(api):
        await eventually(lambda: _ip_is(api, "n1", "192.0.2.1"))
        await update(
            api,
            NODES,
            "n1",
            lambda o: o["metadata"]["labels"].update({"eipctl.io/external-ip-pool": "edge"}),
        )
        await eventually(lambda: _ip_is(api, "n1", "198.51.100.1"))
        assert await claims_by_node(api) == {"n1": ["198.51.100.1"]}
        assert await slot(api, "n1") == "198-51-100-1"
