"""The EC2 provider against moto's server on loopback: idempotent by tags, faults surfaced.

No in-process patching: aiobotocore sends real HTTP to moto, through a proxy that can lose
an answer or answer with an EC2 error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from test_nodeips_ec2 import (
    Ec2Proxy,
    addresses,
    aws_env,  # noqa: F401 (fixture)
    ec2_proxy_fixture,  # noqa: F401 (the `ec2_proxy` fixture)
    make_instances,
    moto_url,  # noqa: F401 (fixture)
)

from eipctl.cloud.aws import TAG_CLUSTER, TAG_NODE, TAG_POOL, AwsProvider, instance_id
from eipctl.cloud.provider import (
    ADDRESS_LIMIT,
    BAD_PROVIDER_ID,
    NO_PUBLIC_INTERFACE,
    CloudError,
)


@pytest_asyncio.fixture
async def provider(ec2_proxy: Ec2Proxy) -> AsyncIterator[AwsProvider]:
    aws = AwsProvider(cluster_id="c1", endpoint_url=ec2_proxy.url)  # region from the chain
    try:
        yield aws
    finally:
        await aws.close()


def _tags(raw: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {t["Key"]: t["Value"] for t in raw.get("Tags") or ()}


async def test_ensure_address_allocates_once_and_tags(
    provider: AwsProvider, ec2_proxy: Ec2Proxy
) -> None:
    first = await provider.ensure_address(pool="eips", node="n1")
    again = await provider.ensure_address(pool="eips", node="n1")
    other = await provider.ensure_address(pool="eips", node="n2")
    assert again == first
    assert other.allocation_id != first.allocation_id
    raw = await addresses(ec2_proxy.upstream)
    assert len(raw) == 2
    by_id = {a["AllocationId"]: _tags(a) for a in raw}
    assert by_id[first.allocation_id] == {TAG_CLUSTER: "c1", TAG_POOL: "eips", TAG_NODE: "n1"}
    assert ec2_proxy.calls["AllocateAddress"] == 2


async def test_lost_allocate_answer_then_retry_allocates_nothing_more(
    provider: AwsProvider, ec2_proxy: Ec2Proxy
) -> None:
    ec2_proxy.lose_response["AllocateAddress"] = 1
    with pytest.raises(CloudError):
        await provider.ensure_address(pool="eips", node="n1")
    assert ec2_proxy.calls["AllocateAddress"] == 1  # EC2 did allocate; we never heard
    found = await provider.ensure_address(pool="eips", node="n1")  # the retry
    assert ec2_proxy.calls["AllocateAddress"] == 1  # described, not allocated again
    raw = await addresses(ec2_proxy.upstream)
    assert [a["AllocationId"] for a in raw] == [found.allocation_id]


async def test_associate_is_idempotent_and_release_disassociates(
    provider: AwsProvider, ec2_proxy: Ec2Proxy
) -> None:
    (inst,) = await make_instances(ec2_proxy.upstream, 1)
    address = await provider.ensure_address(pool="eips", node="n1")
    on = await provider.associate(address, provider_id=inst.provider_id, node="n1")
    assert on.network_interface_id == inst.eni and on.association_id
    calls = ec2_proxy.calls.get("AssociateAddress", 0)
    await provider.associate(address, provider_id=inst.provider_id, node="n1")
    assert ec2_proxy.calls.get("AssociateAddress", 0) == calls  # already there: no call
    (raw,) = await addresses(ec2_proxy.upstream)
    assert raw["NetworkInterfaceId"] == inst.eni and raw["PrivateIpAddress"] == inst.private_ip
    await provider.disassociate(address)
    (raw,) = await addresses(ec2_proxy.upstream)
    assert not raw.get("AssociationId")
    await provider.associate(address, provider_id=inst.provider_id, node="n1")
    await provider.release(address)
    assert await addresses(ec2_proxy.upstream) == []
    await provider.release(address)  # again: already gone is fine
    assert await provider.find(address.allocation_id) is None


async def test_move_between_instances(provider: AwsProvider, ec2_proxy: Ec2Proxy) -> None:
    a, b = await make_instances(ec2_proxy.upstream, 2)
    address = await provider.ensure_address(pool="eips", node="n1")
    await provider.associate(address, provider_id=a.provider_id, node="n1")
    await provider.retag(address, node="n2")
    await provider.associate(address, provider_id=b.provider_id, node="n2")
    (raw,) = await addresses(ec2_proxy.upstream)
    assert raw["NetworkInterfaceId"] == b.eni
    assert _tags(raw)[TAG_NODE] == "n2"
    assert (await provider.ensure_address(pool="eips", node="n2")).allocation_id == (
        address.allocation_id
    )


async def test_errors_have_reasons(provider: AwsProvider, ec2_proxy: Ec2Proxy) -> None:
    ec2_proxy.errors["AllocateAddress"] = (
        "AddressLimitExceeded",
        "The maximum number of addresses has been reached.",
    )
    with pytest.raises(CloudError) as limit:
        await provider.ensure_address(pool="eips", node="n1")
    assert limit.value.reason == ADDRESS_LIMIT
    del ec2_proxy.errors["AllocateAddress"]
    (inst,) = await make_instances(ec2_proxy.upstream, 1)
    address = await provider.ensure_address(pool="eips", node="n1")
    ec2_proxy.errors["AssociateAddress"] = ("Gateway.NotAttached", "no internet gateway")
    with pytest.raises(CloudError) as gateway:
        await provider.associate(address, provider_id=inst.provider_id, node="n1")
    assert gateway.value.reason == NO_PUBLIC_INTERFACE
    with pytest.raises(CloudError) as bad:
        instance_id("gce://project/zone/vm")
    assert bad.value.reason == BAD_PROVIDER_ID
