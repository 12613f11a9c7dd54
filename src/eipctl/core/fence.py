"""Self-fencing: a node that cannot write its heartbeat stops holding addresses.

Healthy -> fenced once no heartbeat has succeeded for `node_timeout`; fenced -> healthy on
the next success. Judged on our own monotonic clock (an injected callable): the scheduler
judges the same heartbeats on its clock, so a node that cannot reach the API lets go of its
addresses at about the time the scheduler moves them. While fenced, the controller plans
with `core.link_plan.plan(..., fenced=True)`: every managed address goes, none is added.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field


class FenceTransition(enum.Enum):
    NONE = "none"
    FENCE = "fence"  # remove every managed address now
    RESTORE = "restore"  # heartbeat works again: re-add the claims still placed here


@dataclass
class Fence:
    """Self-fencing on our own monotonic clock.

    The timer starts at construction: a controller that never reaches the API fences
    `node_timeout` after start, exactly like one that loses it later.
    """

    node_timeout: float
    clock: Callable[[], float]
    _last_success: float = field(init=False)
    _fenced: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.node_timeout <= 0:
            raise ValueError("node_timeout must be positive")
        self._last_success = self.clock()

    @property
    def fenced(self) -> bool:
        return self._fenced

    def heartbeat_age(self) -> float:
        """Seconds since the last successful heartbeat (or since start)."""
        return self.clock() - self._last_success

    def succeeded(self) -> FenceTransition:
        """Record a successful heartbeat write."""
        self._last_success = self.clock()
        if self._fenced:
            self._fenced = False
            return FenceTransition.RESTORE
        return FenceTransition.NONE

    def check(self) -> FenceTransition:
        """Fence if the heartbeat has been failing for `node_timeout`; call it often."""
        if not self._fenced and self.heartbeat_age() >= self.node_timeout:
            self._fenced = True
            return FenceTransition.FENCE
        return FenceTransition.NONE

    def may_hold(self) -> bool:
        """Whether addresses may be added or their lifetimes renewed right now."""
        return not self._fenced and self.heartbeat_age() < self.node_timeout
