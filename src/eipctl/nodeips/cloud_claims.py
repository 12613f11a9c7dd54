"""The cloud half of a node claim: what nodeips asks the `AddressProvider` at each step.

Bare-metal claims need none of this (the node's controller holds them). For a claim of a
pool with ``spec.provider``, the address lives in the cloud: it is allocated before the
claim exists, associated with the Node's instance while the claim is bound to it, moved
(retagged) on reuse, disassociated when orphaned, released when the claim is deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import structlog

from eipctl.cloud.provider import AddressProvider, CloudAddress, CloudError
from eipctl.core.claim_status import cloud_status
from eipctl.core.claims import IP, spec_of
from eipctl.core.naming import claim_name_for
from eipctl.core.node_claims import NodeClaim, NodeView
from eipctl.core.resources import IpClaimPool
from eipctl.kube.client import IPCLAIMS, Obj
from eipctl.kube.verbs import WritesStatus
from eipctl.nodeips import views as v

log = structlog.get_logger(__name__)

NO_CLOUD_PROVIDER = "NoCloudProvider"


class StatusWriter(WritesStatus, Protocol):
    """Claim status writes go through the writer (`SerializedWriter`)."""


class ClaimCache(Protocol):
    def get(self, key: str) -> Obj | None: ...


def address_of(obj: Obj) -> CloudAddress | None:
    """The cloud address a claim records (annotation ``eipctl.io/allocation-id``)."""
    allocation = v.allocation_id(obj)
    if not allocation:
        return None
    return CloudAddress(allocation_id=allocation, ip=str(spec_of(obj).get(IP)))


class CloudClaims:
    """Cloud steps of the node-claim lifecycle; every provider verb is idempotent."""

    def __init__(
        self,
        providers: Mapping[str, AddressProvider],
        *,
        writer: StatusWriter,
        claims: ClaimCache,
        report: Callable[[Obj, str, str], None],
    ) -> None:
        self.providers = dict(providers)
        self.writer = writer
        self.claims = claims
        self.report = report
        """Called with (claim, reason, message) when the provider refuses (Event, once)."""

    def provider(self, name: str, what: str) -> AddressProvider:
        provider = self.providers.get(name)
        if provider is None:
            raise CloudError(
                NO_CLOUD_PROVIDER,
                f"{what} needs provider {name!r} but nodeips runs without it (set --cluster-id)",
                retryable=False,
            )
        return provider

    async def ensure(self, pool: IpClaimPool, node: str) -> CloudAddress:
        """The address tagged for (pool, node), allocated if there is none."""
        provider = self.provider(pool.spec.provider, f"pool {pool.name}")
        return await provider.ensure_address(pool=pool.name, node=node)

    async def orphaned(self, claim: NodeClaim, obj: Obj | None) -> None:
        """Before a claim is orphaned: off the instance, tag cleared; the address is kept."""
        address = address_of(obj) if obj is not None else None
        if not claim.provider or address is None:
            return
        provider = self.provider(claim.provider, f"claim {claim.name}")
        await provider.disassociate(address)
        await provider.retag(address, node="")

    async def deleted(self, claim: NodeClaim, obj: Obj | None) -> None:
        """Before a claim is deleted: the address goes back to the cloud."""
        address = address_of(obj) if obj is not None else None
        if not claim.provider:
            return
        provider = self.provider(claim.provider, f"claim {claim.name}")
        if address is not None:
            await provider.release(address)

    async def reused(self, claim: NodeClaim, obj: Obj, node: str) -> None:
        """After a claim moved to ``node``: the tag follows, so describe-by-tags stays exact."""
        address = address_of(obj)
        if claim.provider and address is not None:
            await self.provider(claim.provider, f"claim {claim.name}").retag(address, node=node)

    async def hold(self, node: NodeView, own: NodeClaim, obj: Obj) -> None:
        """Associated with the Node's instance, Bound; refusals become a condition + Event."""
        address = address_of(obj)
        if address is None:
            return
        provider = self.provider(own.provider, f"claim {own.name}")
        try:
            await provider.associate(address, provider_id=node.provider_id, node=node.name)
        except CloudError as exc:
            await self.writer.update_status(
                IPCLAIMS, own.name, cloud_status(node.name, exc.reason, exc.message)
            )
            self.report(obj, exc.reason, exc.message)
            raise
        if own.live_on != node.name:
            await self.writer.update_status(IPCLAIMS, own.name, cloud_status(node.name))
            log.info("claim.associated", node=node.name, claim=own.name, ip=str(own.ip))
        await self._release_extras(provider, own, address)

    async def _release_extras(
        self, provider: AddressProvider, own: NodeClaim, address: CloudAddress
    ) -> None:
        """Addresses also tagged for this Node that no claim names and that are on nothing:
        a second allocation EC2's eventual consistency hid from the describe before it."""
        for extra in await provider.tagged(pool=own.pool, node=own.node):
            if extra.allocation_id == address.allocation_id or extra.association_id:
                continue
            if self.claims.get(claim_name_for(extra.ip)) is not None:
                continue
            await provider.release(extra)
            log.warning(
                "eip.extra_released",
                node=own.node,
                ip=extra.ip,
                allocation_id=extra.allocation_id,
                kept=address.allocation_id,
            )
