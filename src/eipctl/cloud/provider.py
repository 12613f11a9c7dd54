"""The small interface `eipctl nodeips` needs from a cloud that owns public addresses.

The core stays pure: it never imports a cloud SDK. `eipctl.nodeips` talks to an
`AddressProvider`; `eipctl.cloud.aws` implements it with aiobotocore, tests use moto.

Every verb is idempotent, so a retry after a lost response is always safe:

- `ensure_address` first looks for an address already tagged for (cluster, pool, node) and
  allocates only when there is none (describe before allocate);
- `associate` does nothing when the address is already on the node's primary interface;
- `disassociate` and `release` treat "already done" as success.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CloudAddress:
    """A public address the cloud holds for us."""

    allocation_id: str
    ip: str
    association_id: str = ""
    network_interface_id: str = ""
    node: str = ""
    """The ``eipctl.io/node`` tag: the Node it was allocated for or last given to."""


class CloudError(Exception):
    """A cloud call failed; ``reason`` is CamelCase, for claim conditions and Events."""

    def __init__(self, reason: str, message: str, *, retryable: bool = True) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.retryable = retryable


# Reasons surfaced on claims and Events (docs/node-ips.md lists them).
ADDRESS_LIMIT = "AddressLimitExceeded"
NO_PUBLIC_INTERFACE = "NoPublicInterface"
INSTANCE_NOT_FOUND = "InstanceNotFound"
BAD_PROVIDER_ID = "BadProviderID"
CLOUD_API_ERROR = "CloudAPIError"


class AddressProvider(Protocol):
    """Public addresses of one cloud account and region, for one cluster."""

    name: str
    """The pool ``spec.provider`` value it serves ("aws")."""

    async def ensure_address(self, *, pool: str, node: str) -> CloudAddress:
        """The address tagged for (cluster, pool, node); allocated (and tagged) if none is."""
        ...

    async def tagged(self, *, pool: str, node: str) -> list[CloudAddress]:
        """Every address tagged for (cluster, pool, node), by allocation id."""
        ...

    async def find(self, allocation_id: str) -> CloudAddress | None:
        """The address with this id; None if it does not exist (released)."""
        ...

    async def associate(
        self, address: CloudAddress, *, provider_id: str, node: str
    ) -> CloudAddress:
        """Put the address on the primary interface of the instance behind ``provider_id``."""
        ...

    async def disassociate(self, address: CloudAddress) -> None:
        """Take it off whatever it is on (no-op when on nothing)."""
        ...

    async def release(self, address: CloudAddress) -> None:
        """Give the address back to the cloud (disassociating first; no-op when gone)."""
        ...

    async def retag(self, address: CloudAddress, *, node: str) -> None:
        """Record which Node holds it now ("" = orphan), so describe-before-allocate stays exact."""
        ...

    async def close(self) -> None: ...
