"""Self-fencing: a node that cannot reach the API stops holding addresses.

Healthy -> fenced once no API request (a read of our IpNode, or the heartbeat write) has
succeeded for `node_timeout`, or at once (`lose`) when the scheduler's liveness probes have
stopped and the API does not answer either: then the scheduler has declared us dead and is
moving our claims, and we cannot see it. Fenced -> healthy on the next success. Judged on
our own monotonic clock (an injected callable). While fenced, the controller plans with
`core.link_plan.plan(..., fenced=True)`: every managed address goes, none is added, and its
liveness replies say FENCED so the scheduler moves its claims without waiting.
docs/liveness.md has every partition case.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field


class FenceTransition(enum.Enum):
    NONE = "none"
    FENCE = "fence"  # remove every managed address now
    RESTORE = "restore"  # the API answers again: re-add the claims still placed here


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

    def api_silence(self) -> float:
        """Seconds since the API last answered us (or since start)."""
        return self.clock() - self._last_success

    def succeeded(self) -> FenceTransition:
        """Record a successful API request."""
        self._last_success = self.clock()
        if self._fenced:
            self._fenced = False
            return FenceTransition.RESTORE
        return FenceTransition.NONE

    def check(self) -> FenceTransition:
        """Fence if the API has not answered for `node_timeout`; call it often."""
        if not self._fenced and self.api_silence() >= self.node_timeout:
            self._fenced = True
            return FenceTransition.FENCE
        return FenceTransition.NONE

    def may_hold(self) -> bool:
        """Whether addresses may be added or their lifetimes renewed right now."""
        return not self._fenced and self.api_silence() < self.node_timeout

    def lose(self) -> FenceTransition:
        """Fence now: the probes stopped and the API did not answer a check either."""
        if self._fenced:
            return FenceTransition.NONE
        self._fenced = True
        return FenceTransition.FENCE
