"""The scheduler's work-queue keys: a global pass, or one IP's claim.

Hashable (an enum and a frozen dataclass), so the queue still folds repeats into one call;
`str` gives the spelling the logs show (``place``, ``rebalance``, ``ip/<claim>``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Pass(enum.Enum):
    """A pass over every claim (placement is global: spread counts every node's claims)."""

    PLACE = "place"
    """Place unplaced claims, move those on dead or ineligible nodes, repair the rest."""
    REBALANCE = "rebalance"
    """The periodic placement pass that also moves claims to even the spread (--rebalance)."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ServiceIpKey:
    """One external IP in use, by its claim's name: a claim for a hand-set IP to create or
    keep in step, or an orphan to remove (`ServiceClaims.reconcile`)."""

    claim: str

    def __str__(self) -> str:
        return f"ip/{self.claim}"


SchedulerKey = Pass | ServiceIpKey
