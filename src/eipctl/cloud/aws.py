"""EC2 Elastic IPs behind `AddressProvider`, with aiobotocore (async botocore).

Credentials and region come from the standard AWS chain (environment, shared config and
credentials files, web identity / IRSA, instance metadata); ``region`` and ``endpoint_url``
only override it.

Idempotence (docs/node-ips.md, "Cloud"): every address carries the tags
``eipctl.io/cluster``, ``eipctl.io/pool`` and ``eipctl.io/node``; `ensure_address` describes
by those tags before it allocates, and botocore's own retries are off (``max_attempts=1``),
because a blind retry of AllocateAddress after a lost response allocates a second address.
Our retry goes through the work queue and starts again with the describe.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import aiohttp
import structlog
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import BotoCoreError, ClientError

from eipctl.cloud.provider import (
    ADDRESS_LIMIT,
    BAD_PROVIDER_ID,
    CLOUD_API_ERROR,
    INSTANCE_NOT_FOUND,
    NO_PUBLIC_INTERFACE,
    CloudAddress,
    CloudError,
)

log = structlog.get_logger(__name__)

TAG_CLUSTER: Final = "eipctl.io/cluster"
TAG_POOL: Final = "eipctl.io/pool"
TAG_NODE: Final = "eipctl.io/node"

_REASONS: Final = {
    "AddressLimitExceeded": ADDRESS_LIMIT,
    "Gateway.NotAttached": NO_PUBLIC_INTERFACE,
    "InvalidInstanceID.NotFound": INSTANCE_NOT_FOUND,
    "InvalidInstanceID.Malformed": INSTANCE_NOT_FOUND,
}
_GONE: Final = frozenset(
    {
        "InvalidAllocationID.NotFound",
        "InvalidAssociationID.NotFound",
        "InvalidAddress.NotFound",
        "InvalidAddressID.NotFound",
    }
)


def instance_id(provider_id: str) -> str:
    """``aws:///us-east-1a/i-0abc`` -> ``i-0abc``; CloudError(BadProviderID) otherwise."""
    scheme, sep, rest = provider_id.partition("://")
    instance = rest.rstrip("/").rpartition("/")[2]
    if scheme != "aws" or not sep or not instance.startswith("i-"):
        raise CloudError(
            BAD_PROVIDER_ID,
            f"Node spec.providerID {provider_id!r} is not aws:///<zone>/<instance-id>",
            retryable=False,
        )
    return instance


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _error(exc: Exception, call: str) -> CloudError:
    if isinstance(exc, ClientError):
        code = _code(exc)
        reason = _REASONS.get(code, CLOUD_API_ERROR)
        message = str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
        return CloudError(reason, f"{call}: {code}: {message}")
    return CloudError(CLOUD_API_ERROR, f"{call}: {exc!r}")


def _address(raw: dict[str, Any]) -> CloudAddress:
    tags = {t.get("Key", ""): t.get("Value", "") for t in raw.get("Tags") or ()}
    return CloudAddress(
        allocation_id=str(raw.get("AllocationId", "")),
        ip=str(raw.get("PublicIp", "")),
        association_id=str(raw.get("AssociationId") or ""),
        network_interface_id=str(raw.get("NetworkInterfaceId") or ""),
        node=tags.get(TAG_NODE, ""),
    )


class AwsProvider:
    """Elastic IPs of one account and region, tagged for one cluster."""

    name = "aws"

    def __init__(
        self,
        *,
        cluster_id: str,
        region: str = "",
        endpoint_url: str = "",
        connect_timeout: float = 5.0,
        read_timeout: float = 15.0,
    ) -> None:
        if not cluster_id:
            raise ValueError("an AWS provider needs a cluster id (tags tell clusters apart)")
        self.cluster_id = cluster_id
        self._region = region or None
        self._endpoint = endpoint_url or None
        self._config = AioConfig(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
        self._stack = contextlib.AsyncExitStack()
        self._client: Any = None

    async def start(self) -> None:
        session = get_session()
        self._client = await self._stack.enter_async_context(
            session.create_client(
                "ec2", region_name=self._region, endpoint_url=self._endpoint, config=self._config
            )
        )

    async def close(self) -> None:
        await self._stack.aclose()
        self._client = None

    async def _call(self, name: str, **kw: Any) -> dict[str, Any]:
        if self._client is None:
            await self.start()
        try:
            result: dict[str, Any] = await getattr(self._client, name)(**kw)
        except (ClientError, BotoCoreError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _error(exc, name) from exc
        return result

    def _tags(self, pool: str, node: str) -> list[dict[str, str]]:
        return [
            {"Key": TAG_CLUSTER, "Value": self.cluster_id},
            {"Key": TAG_POOL, "Value": pool},
            {"Key": TAG_NODE, "Value": node},
        ]

    # --- AddressProvider ---------------------------------------------------------------
    async def tagged(self, *, pool: str, node: str) -> list[CloudAddress]:
        filters = [
            {"Name": f"tag:{t['Key']}", "Values": [t["Value"]]} for t in self._tags(pool, node)
        ]
        found = await self._call("describe_addresses", Filters=filters)
        return sorted(
            (_address(a) for a in found.get("Addresses") or ()), key=lambda a: a.allocation_id
        )

    async def ensure_address(self, *, pool: str, node: str) -> CloudAddress:
        addresses = await self.tagged(pool=pool, node=node)
        if addresses:
            log.info(
                "eip.found",
                node=node,
                pool=pool,
                ip=addresses[0].ip,
                allocation_id=addresses[0].allocation_id,
                extra=len(addresses) - 1,
            )
            return addresses[0]
        raw = await self._call(
            "allocate_address",
            Domain="vpc",
            TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": self._tags(pool, node)}],
        )
        address = CloudAddress(
            allocation_id=str(raw.get("AllocationId", "")),
            ip=str(raw.get("PublicIp", "")),
            node=node,
        )
        log.info(
            "eip.allocated",
            node=node,
            pool=pool,
            ip=address.ip,
            allocation_id=address.allocation_id,
        )
        return address

    async def find(self, allocation_id: str) -> CloudAddress | None:
        try:
            found = await self._call("describe_addresses", AllocationIds=[allocation_id])
        except CloudError as exc:
            if any(code in exc.message for code in _GONE):
                return None
            raise
        items = found.get("Addresses") or ()
        return _address(items[0]) if items else None

    async def _primary_interface(self, provider_id: str) -> tuple[str, str]:
        instance = instance_id(provider_id)
        found = await self._call("describe_instances", InstanceIds=[instance])
        instances = [i for r in found.get("Reservations") or () for i in r.get("Instances") or ()]
        if not instances:
            raise CloudError(INSTANCE_NOT_FOUND, f"instance {instance} not found", retryable=True)
        for eni in instances[0].get("NetworkInterfaces") or ():
            if (eni.get("Attachment") or {}).get("DeviceIndex") == 0:
                private = str(eni.get("PrivateIpAddress") or "")
                return str(eni.get("NetworkInterfaceId", "")), private
        raise CloudError(
            NO_PUBLIC_INTERFACE,
            f"instance {instance} has no primary network interface (device index 0)",
        )

    async def associate(
        self, address: CloudAddress, *, provider_id: str, node: str
    ) -> CloudAddress:
        eni, private_ip = await self._primary_interface(provider_id)
        current = await self.find(address.allocation_id)
        if current is None:
            raise CloudError(
                CLOUD_API_ERROR, f"Elastic IP {address.allocation_id} no longer exists"
            )
        if current.network_interface_id == eni and current.association_id:
            return current
        kw: dict[str, Any] = {
            "AllocationId": address.allocation_id,
            "NetworkInterfaceId": eni,
            "AllowReassociation": True,
        }
        if private_ip:
            kw["PrivateIpAddress"] = private_ip
        raw = await self._call("associate_address", **kw)
        log.info(
            "eip.associated",
            node=node,
            ip=address.ip,
            interface=eni,
            allocation_id=address.allocation_id,
        )
        return CloudAddress(
            allocation_id=address.allocation_id,
            ip=current.ip,
            association_id=str(raw.get("AssociationId", "")),
            network_interface_id=eni,
            node=current.node,
        )

    async def disassociate(self, address: CloudAddress) -> None:
        current = await self.find(address.allocation_id)
        if current is None or not current.association_id:
            return
        try:
            await self._call("disassociate_address", AssociationId=current.association_id)
        except CloudError as exc:
            if not any(code in exc.message for code in _GONE):
                raise
        log.info("eip.disassociated", ip=current.ip, allocation_id=current.allocation_id)

    async def release(self, address: CloudAddress) -> None:
        await self.disassociate(address)
        try:
            await self._call("release_address", AllocationId=address.allocation_id)
        except CloudError as exc:
            if any(code in exc.message for code in _GONE):
                return
            raise
        log.info("eip.released", ip=address.ip, allocation_id=address.allocation_id)

    async def retag(self, address: CloudAddress, *, node: str) -> None:
        await self._call(
            "create_tags",
            Resources=[address.allocation_id],
            Tags=[{"Key": TAG_NODE, "Value": node}],
        )
