"""Stories of `eipctl nodeips` with an `aws` pool: Elastic IPs from EC2 (moto on loopback).

The Node's IP is allocated in EC2 (tagged with cluster, pool and Node), associated with the
primary interface of the instance behind ``spec.providerID``, reported Bound by nodeips
itself (no controller holds a cloud address), and released when the Node goes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from test_nodeips_ec2 import (
    Ec2Proxy,
    Instance,
    addresses,
    aws_env,  # noqa: F401 (fixture)
    ec2_proxy_fixture,  # noqa: F401 (the `ec2_proxy` fixture)
    make_instances,
    moto_url,  # noqa: F401 (fixture)
)
from test_nodeips_support import (
    IPCLAIMPOOLS,
    NODES,
    claims_by_node,
    eventually,
    get,
    node,
    node_claims,
    node_ip,
    nodeips,
    pool,
)

from eipctl.cloud.aws import AwsProvider
from eipctl.core.naming import TAINT_NOT_ATTACHED
from eipctl.kube.client import EVENTS, IPCLAIMS, KubeApi, Obj

POOL = pool("eips", "203.0.113.0/24", provider="aws")


@pytest_asyncio.fixture
async def aws(ec2_proxy: Ec2Proxy) -> AsyncIterator[AwsProvider]:
    provider = AwsProvider(cluster_id="test-cluster", endpoint_url=ec2_proxy.url)
    try:
        yield provider
    finally:
        await provider.close()


def cloud_node(name: str, inst: Instance, **kw: Any) -> Obj:
    return node(name, pool_name="eips", provider_id=inst.provider_id, **kw)


async def _live(api: KubeApi, name: str) -> str:
    """The Node's IP once its claim is Bound there and the label is set."""
    ip = await node_ip(api, name)
    if not ip:
        return ""
    claim = await get(api, IPCLAIMS, ip.replace(".", "-"))
    status = (claim or {}).get("status") or {}
    return ip if status.get("phase") == "Bound" and status.get("boundNode") == name else ""


async def test_node_gets_an_elastic_ip_on_its_primary_interface(
    api: KubeApi, kubeconfig_path: Path, ec2_proxy: Ec2Proxy, aws: AwsProvider
) -> None:
    (inst,) = await make_instances(ec2_proxy.upstream, 1)
    await api.create(IPCLAIMPOOLS, POOL)
    await api.create(NODES, cloud_node("n1", inst, tainted=True))
    ec2_proxy.lose_response["AllocateAddress"] = 1  # the first answer never arrives
    async with nodeips(
        kubeconfig_path, node_reconciliation_requeue_interval=1.0, providers={"aws": aws}
    ):
        ip = await eventually(lambda: _live(api, "n1"), timeout=30)
        (raw,) = await addresses(ec2_proxy.upstream)  # one address although we retried
        assert raw["PublicIp"] == ip
        assert raw["NetworkInterfaceId"] == inst.eni
        assert ec2_proxy.calls["AllocateAddress"] == 1
        (claim,) = await node_claims(api)
        assert claim["spec"]["nodeName"] == "n1" and claim["spec"]["nodeBound"] is True
        labels = claim["metadata"]["labels"]
        assert labels["eipctl.io/provider"] == "aws"
        assert "eipctl.io/node" not in labels  # no controller puts it on a link
        assert claim["metadata"]["annotations"]["eipctl.io/allocation-id"] == raw["AllocationId"]
        n1 = await get(api, NODES, "n1")
        assert not any(
            t["key"] == TAINT_NOT_ATTACHED for t in (n1 or {})["spec"].get("taints") or ()
        )
        await api.delete(NODES, "n1")
        await eventually(lambda: _none_left(api, ec2_proxy), timeout=30)


async def _none_left(api: KubeApi, proxy: Ec2Proxy) -> bool:
    return not await node_claims(api) and not await addresses(proxy.upstream)


async def test_prevent_deallocation_keeps_the_eip_for_the_next_node(
    api: KubeApi, kubeconfig_path: Path, ec2_proxy: Ec2Proxy, aws: AwsProvider
) -> None:
    old, new = await make_instances(ec2_proxy.upstream, 2)
    await api.create(IPCLAIMPOOLS, POOL)
    await api.create(NODES, cloud_node("old", old))
    async with nodeips(
        kubeconfig_path,
        node_reconciliation_requeue_interval=1.0,
        providers={"aws": aws},
        prevent_deallocation=True,
    ):
        ip = await eventually(lambda: _live(api, "old"), timeout=30)
        await api.delete(NODES, "old")
        await eventually(lambda: _orphaned(api, ec2_proxy), timeout=30)
        await api.create(NODES, cloud_node("new", new))
        assert await eventually(lambda: _live(api, "new"), timeout=30) == ip
        (raw,) = await addresses(ec2_proxy.upstream)
        assert raw["NetworkInterfaceId"] == new.eni
        assert await claims_by_node(api) == {"new": [ip]}


async def _orphaned(api: KubeApi, proxy: Ec2Proxy) -> bool:
    by_node = await claims_by_node(api)
    raw = await addresses(proxy.upstream)
    return list(by_node) == [""] and len(raw) == 1 and not raw[0].get("AssociationId")


async def test_aws_errors_become_conditions_and_events(
    api: KubeApi, kubeconfig_path: Path, ec2_proxy: Ec2Proxy, aws: AwsProvider
) -> None:
    a, b = await make_instances(ec2_proxy.upstream, 2)
    await api.create(IPCLAIMPOOLS, POOL)
    ec2_proxy.errors["AllocateAddress"] = ("AddressLimitExceeded", "too many addresses")
    ec2_proxy.errors["AssociateAddress"] = ("Gateway.NotAttached", "no internet gateway")
    await api.create(NODES, cloud_node("full", a))
    async with nodeips(
        kubeconfig_path, node_reconciliation_requeue_interval=1.0, providers={"aws": aws}
    ):
        await eventually(lambda: _event(api, "full", "AddressLimitExceeded"), timeout=30)
        assert await node_claims(api) == []
        del ec2_proxy.errors["AllocateAddress"]
        await api.create(NODES, cloud_node("closed", b))
        claim = await eventually(
            lambda: _claim_with_condition(api, "NoPublicInterface"), timeout=30
        )
        await eventually(
            lambda: _event(api, claim["metadata"]["name"], "NoPublicInterface"), timeout=30
        )
        assert await node_ip(api, "closed") == ""
        del ec2_proxy.errors["AssociateAddress"]
        await eventually(lambda: _live(api, "closed"), timeout=30)
        await eventually(lambda: _live(api, "full"), timeout=30)


async def _event(api: KubeApi, name: str, reason: str) -> bool:
    items = (await api.list(EVENTS, "default")).items
    return any(
        e.get("involvedObject", {}).get("name") == name and e.get("reason") == reason for e in items
    )


async def _claim_with_condition(api: KubeApi, reason: str) -> Obj | None:
    for claim in await node_claims(api):
        for cond in (claim.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "CloudAddress" and cond.get("reason") == reason:
                return claim
    return None


async def test_second_eip_hidden_by_eventual_consistency_is_released(
    api: KubeApi, kubeconfig_path: Path, ec2_proxy: Ec2Proxy, aws: AwsProvider
) -> None:
    """A lost AllocateAddress answer and then a describe that does not show the address yet:
    the retry allocates a second EIP. nodeips keeps the one its claim names and releases
    the other as soon as it sees it."""
    (inst,) = await make_instances(ec2_proxy.upstream, 1)
    await api.create(IPCLAIMPOOLS, POOL)
    ec2_proxy.lose_response["AllocateAddress"] = 1
    ec2_proxy.hide_addresses = 2  # the describe before the lost allocate, and the retry
    await api.create(NODES, cloud_node("n1", inst))
    async with nodeips(
        kubeconfig_path, node_reconciliation_requeue_interval=1.0, providers={"aws": aws}
    ):
        ip = await eventually(lambda: _live(api, "n1"), timeout=30)
        assert ec2_proxy.calls["AllocateAddress"] == 2  # the leak happened...
        await eventually(lambda: _only(ec2_proxy, ip), timeout=30)  # ...and was undone
        assert await claims_by_node(api) == {"n1": [ip]}


async def _only(proxy: Ec2Proxy, ip: str) -> bool:
    return [a["PublicIp"] for a in await addresses(proxy.upstream)] == [ip]
