"""The allocator's work-queue keys: what one reconcile call is about.

Frozen dataclasses, so equal keys hash alike and the queue still folds repeats into one
call (keys of different kinds are never equal). `str` gives the spelling the logs show
(``svc:<ns>/<name>``, ``pool:<name>``, ``claim:<name>``, ``pools``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class _ByName:
    """A key about one object, by name."""

    name: str
    prefix: ClassVar[str] = ""

    def __str__(self) -> str:
        return f"{self.prefix}{self.name}"


@dataclass(frozen=True)
class ServiceKey(_ByName):
    """Make what the Service (``<namespace>/<name>``) holds equal to what it asks for
    (`ServiceReconciler`)."""

    prefix: ClassVar[str] = "svc:"


@dataclass(frozen=True)
class PoolKey(_ByName):
    """The pool's status and finalizer (`PoolReconciler.reconcile`)."""

    prefix: ClassVar[str] = "pool:"


@dataclass(frozen=True)
class ClaimKey(_ByName):
    """Release the allocator's claim if its Services are gone (`reconcile_claim`)."""

    prefix: ClassVar[str] = "claim:"


@dataclass(frozen=True)
class AllPools:
    """Re-read the whole pool set: readiness and overlaps depend on every pool."""

    def __str__(self) -> str:
        return "pools"


ALL_POOLS = AllPools()

AllocatorKey = ServiceKey | PoolKey | ClaimKey | AllPools
