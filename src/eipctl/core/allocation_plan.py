"""What planning one Service produces (`AllocationPlan` and its parts) and what it reads (`Ledger`).

Value types only; the rules that fill them are in `core.allocation_planner`, the book that
implements `Ledger` in `core.allocation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo, ServiceInfo, ip_order
from eipctl.core.pool import IPAddress


@dataclass(frozen=True)
class Acquire:
    """Get ``ip`` for the Service: create its claim, or join an existing shared one."""

    ip: IPAddress
    pool: str
    join: bool = False


@dataclass(frozen=True)
class Problem:
    """Something to tell the user (an Event on the Service); ``waiting`` = retry on change."""

    reason: str
    message: str
    waiting: bool = False


@dataclass(frozen=True)
class Mark:
    """A kept IP whose pool no longer fits it: reason for the claim's condition and an Event."""

    ip: IPAddress
    reason: str
    message: str


@dataclass(frozen=True)
class AllocationPlan:
    """What to do for one Service; empty when it holds exactly what it should."""

    service: str
    keep: tuple[IPAddress, ...] = ()
    acquire: tuple[Acquire, ...] = ()
    release: tuple[IPAddress, ...] = ()
    problems: tuple[Problem, ...] = ()
    marks: tuple[Mark, ...] = ()
    deferred: str = ""
    """Non-empty: try again shortly (another Service of the same key is creating the claim
    this one should join); the reason is for the log."""
    hands_off: bool = False
    """A Service of another loadBalancerClass: nothing of it is written."""
    rekey: tuple[tuple[IPAddress, str], ...] = ()
    """Kept claims this Service holds alone whose sharing key is to follow the Service's."""

    @property
    def desired(self) -> tuple[IPAddress, ...]:
        """The IPs the Service should carry once the plan is done, in a stable order."""
        return tuple(sorted((*self.keep, *(a.ip for a in self.acquire)), key=ip_order))


class Ledger(Protocol):
    """What planning reads from, and reserves in, the book (`AllocationBook`)."""

    purge_on_pool_delete: bool

    def pool(self, name: str) -> PoolInfo | None: ...
    def pools(self) -> list[PoolInfo]: ...
    def claim(self, ip: IPAddress) -> ClaimInfo | None: ...
    def claims(self) -> list[ClaimInfo]: ...
    def pending_for(self, ip: IPAddress) -> str | None: ...
    def pending_shared(self, sharing_key: str) -> list[tuple[IPAddress, str, str]]: ...
    def service(self, key: str) -> ServiceInfo | None: ...
    def hand_set_by(self, ip: IPAddress) -> frozenset[str]: ...
    def reserve_pending(
        self, ip: IPAddress, service: str, *, sharing_key: str = "", pool: str = ""
    ) -> None: ...
    def reserve_lowest_free(
        self, pool: str, service: str, *, sharing_key: str = ""
    ) -> IPAddress | None: ...
