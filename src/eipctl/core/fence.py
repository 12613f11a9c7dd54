"""Self-fencing: a node lets go of its addresses only when holding them is no longer safe.

A claim moves only through an API write by the scheduler leader. So holding an address is
safe while one of these is true, each judged on our own monotonic clock (an injected
callable):

- ``api``: the API answered us within `fence_timeout`: our watch shows every move.
- ``vouched``: within `vouch_window`, the writing leader's probe carried a digest of the
  claims it places here equal to ours: it hears us, it can write, and what it decided is
  what we hold.
- ``quorum``: more than half of the nodes (`core.outage.HOLD_QUORUM`) answered that they
  hear no writing leader either (`confirmed`): the control plane is down for the cluster, not
  just for us, and a leader that returns on the far side of a partition moves nothing unless
  it hears half of the nodes, one of which would then have told us.

Healthy -> fenced once none is true (`check`), or at once (`lose`) when the writer's probes
stopped, the API does not answer and no quorum confirms the outage. Fenced -> healthy on
the next API success. While fenced the controller plans with
`core.link_plan.plan(..., fenced=True)`: every managed address goes, none is added, and its
liveness replies say FENCED so the scheduler moves its claims without waiting.
docs/liveness.md has every partition case.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field


class FenceTransition(enum.Enum):
    NONE = "none"
    FENCE = "fence"  # remove every managed address now
    RESTORE = "restore"  # the API answers again: re-add the claims still placed here


class Justification(enum.Enum):
    """Why holding addresses is safe right now (docs/liveness.md, "Outages")."""

    API = "api"
    VOUCHED = "vouched"
    QUORUM = "quorum"


@dataclass
class Fence:
    """Self-fencing on our own monotonic clock.

    The timer starts at construction: a controller that never reaches the API and is never
    vouched for fences `fence_timeout` after start, exactly like one that loses it later.
    """

    fence_timeout: float
    clock: Callable[[], float]
    vouch_window: float = 1.0
    """How long one agreeing probe of the writing leader justifies holding."""
    _last_success: float = field(init=False)
    _fenced: bool = field(init=False, default=False)
    _vouched_at: float = field(init=False, default=-math.inf)
    _confirmed_until: float = field(init=False, default=-math.inf)
    _api_failing: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.fence_timeout <= 0:
            raise ValueError("fence_timeout must be positive")
        if self.vouch_window <= 0:
            raise ValueError("vouch_window must be positive")
        self._last_success = self.clock()

    @property
    def fenced(self) -> bool:
        return self._fenced

    @property
    def api_failing(self) -> bool:
        """Whether our latest API request failed (no success since): replies say API_STALE."""
        return self._api_failing

    def api_silence(self) -> float:
        """Seconds since the API last answered us (or since start)."""
        return self.clock() - self._last_success

    def succeeded(self) -> FenceTransition:
        """Record a successful API request.

        RESTORE also when we were not fenced but every reason to hold had already lapsed (a
        controller thawed after SIGSTOP, or one whose loop stalled past its deadline, before
        the watchdog could fence): what it cached meanwhile may be stale, and a restore
        relists the claims before any pass acts on them."""
        lapsed = self.clock() >= self.deadline()
        self._last_success = self.clock()
        self._api_failing = False
        if self._fenced or lapsed:
            self._fenced = False
            return FenceTransition.RESTORE
        return FenceTransition.NONE

    def failed(self) -> None:
        """Record a failed API request (it changes no deadline: only successes count)."""
        self._api_failing = True

    def vouched(self, at: float | None = None) -> None:
        """The writing leader's probe agrees with our claims (see the module docstring);
        ``at``: when that probe arrived (default: now)."""
        when = self.clock() if at is None else min(at, self.clock())
        self._vouched_at = max(self._vouched_at, when)

    def vouched_recently(self) -> bool:
        return self.clock() - self._vouched_at < self.vouch_window

    def confirmed(self, valid_for: float) -> None:
        """A quorum of nodes hears no writing leader: holding is safe for ``valid_for``."""
        self._confirmed_until = max(self._confirmed_until, self.clock() + valid_for)

    def unconfirmed(self) -> None:
        """Somebody hears a writing leader that we do not: the quorum's word no longer holds."""
        self._confirmed_until = -math.inf

    def justification(self) -> Justification | None:
        """The first reason, in the order of the module docstring, that holding is safe."""
        now = self.clock()
        if now - self._last_success < self.fence_timeout:
            return Justification.API
        if now - self._vouched_at < self.vouch_window:
            return Justification.VOUCHED
        if now < self._confirmed_until:
            return Justification.QUORUM
        return None

    def deadline(self) -> float:
        """When, on our clock, the last justification lapses unless renewed."""
        return max(
            self._last_success + self.fence_timeout,
            self._vouched_at + self.vouch_window,
            self._confirmed_until,
        )

    def check(self) -> FenceTransition:
        """Fence if nothing justifies holding any more; call it often."""
        if not self._fenced and self.justification() is None:
            self._fenced = True
            return FenceTransition.FENCE
        return FenceTransition.NONE

    def may_hold(self) -> bool:
        """Whether addresses may be added or their lifetimes renewed right now."""
        return not self._fenced and self.justification() is not None

    def lose(self) -> FenceTransition:
        """Fence now: the writer's probes stopped, the API did not answer a check and no
        quorum says the control plane is down."""
        if self._fenced:
            return FenceTransition.NONE
        self._fenced = True
        return FenceTransition.FENCE
