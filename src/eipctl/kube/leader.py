"""Leader election on a coordination.k8s.io/v1 Lease, written for "never two leaders acting".

Why our own: kubernetes_asyncio's elector does not re-contend after losing, lets
connection errors escape, writes naive local time as UTC, and never sets leaseTransitions.

Safety argument (details in docs/leader-election.md):
- A candidate judges a foreign lease expired only after seeing the *same* record
  (holder, renewTime, ...) unchanged for ``leaseDurationSeconds`` on its own monotonic clock,
  counted from when it first received that record. Clocks are never compared across hosts.
- The holder counts its renew deadline from the moment it *sent* its last successful write,
  which precedes the server storing it, which precedes anyone observing it. A timer cancels
  the work at ``sent + renew_deadline``, strictly before ``stored + lease_duration``, the
  earliest instant a candidate may take over (and its takeover write carries the
  resourceVersion it saw, so it fails if the holder renewed meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from eipctl.kube.client import LEASES, Obj
from eipctl.kube.errors import AlreadyExists, ApiError, Conflict, NotFound
from eipctl.kube.verbs import Creates, Gets, Replaces

log = structlog.get_logger(__name__)


class LeaseApi(Gets, Creates, Replaces, Protocol):
    """What the elector needs (`KubeApi` satisfies it)."""


@dataclass
class LeaderElectionConfig:
    lease_name: str
    """Lease object name, e.g. "eipctl-scheduler"."""
    namespace: str
    identity: str
    """Unique per replica (pod name); the Lease's holderIdentity."""
    lease_duration: float = 1.0
    """How long candidates wait on an unchanged record before taking over (written rounded
    up to whole seconds, as leaseDurationSeconds is an integer)."""
    renew_deadline: float = 0.6
    """The holder stops acting if it has not renewed for this long; must leave a margin
    below lease_duration for cancelling the work."""
    retry_period: float = 0.2
    """Renew / poll interval."""
    release_on_stop: bool = True
    """Clear holderIdentity on clean stop so a standby takes over within one retry period."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("need 0 < retry_period < renew_deadline < lease_duration")


def _now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: Obj) -> tuple[Any, ...]:
    spec = lease.get("spec") or {}
    return tuple(
        spec.get(k) for k in ("holderIdentity", "renewTime", "acquireTime", "leaseDurationSeconds")
    )


class LeaderElector:
    """Contends for one Lease; runs `work` only while it holds it."""

    def __init__(
        self,
        api: LeaseApi,
        config: LeaderElectionConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self._clock = clock
        self._on_new_leader = on_new_leader
        self._lease: Obj | None = None  # last copy read or written
        self._seen: tuple[Any, ...] | None = None
        self._seen_at = 0.0
        self.leader_identity = ""
        self.is_leader = False
        self._log = log.bind(lease=config.lease_name, identity=config.identity)

    async def run(self, work: Callable[[], Awaitable[None]]) -> None:
        """Acquire, run `work` while leading, cancel it on loss, contend again; forever.

        Returns when `work` returns by itself; on cancellation the work is cancelled first
        and the Lease released afterwards (if configured).
        """
        try:
            while True:
                sent = await self._acquire()
                if await self._lead(work, sent):
                    return
        finally:
            if self.is_leader:
                self.is_leader = False
                if self.config.release_on_stop:
                    await asyncio.shield(self._release())

    # --- acquiring --------------------------------------------------------------------
    async def _acquire(self) -> float:
        cfg = self.config
        while True:
            sent = await self._try_acquire_or_renew()
            if sent is not None:
                self.is_leader = True
                self._log.info("leader.acquired")
                return sent
            delay = cfg.retry_period
            if self._seen is not None and self._seen[0] not in ("", None, cfg.identity):
                # wake up right when the holder's lease would expire, not up to a period later
                left = self._seen_at + self._duration() - self._clock()
                if left > 0:
                    delay = min(delay, left + 0.002)
            await asyncio.sleep(delay)

    def _duration(self) -> float:
        declared = (self._lease or {}).get("spec", {}).get("leaseDurationSeconds")
        return float(declared) if declared else self.config.lease_duration

    def _observe(self, lease: Obj) -> None:
        self._lease = lease
        rec = _record(lease)
        if rec != self._seen:
            self._seen, self._seen_at = rec, self._clock()
            holder = str(rec[0] or "")
            if holder != self.leader_identity:
                self.leader_identity = holder
                self._log.info("leader.observed", holder=holder)
                if self._on_new_leader is not None:
                    self._on_new_leader(holder)

    async def _try_acquire_or_renew(self, budget: float | None = None) -> float | None:
        """One attempt; the monotonic time the winning write was sent, or None."""
        cfg = self.config
        try:
            async with asyncio.timeout(budget):
                if not (self.is_leader and self._lease is not None):
                    try:
                        self._observe(await self.api.get(LEASES, cfg.lease_name, cfg.namespace))
                    except NotFound:
                        return await self._create()
                assert self._lease is not None
                spec = self._lease.get("spec") or {}
                holder = spec.get("holderIdentity") or ""
                mine = holder == cfg.identity
                if holder and not mine and self._clock() - self._seen_at < self._duration():
                    return None
                now = _now_micro()
                new_spec = {
                    **spec,
                    "holderIdentity": cfg.identity,
                    "leaseDurationSeconds": math.ceil(cfg.lease_duration),
                    "renewTime": now,
                }
                if not mine:
                    new_spec["acquireTime"] = now
                    new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                sent = self._clock()
                stored = await self.api.replace(LEASES, {**self._lease, "spec": new_spec})
                self._observe(stored)
                return sent
        except (Conflict, AlreadyExists):
            self._lease = None  # someone else wrote: re-read next time
        except (ApiError, TimeoutError) as exc:
            self._log.info("lease.attempt_failed", error=repr(exc))
            self._lease = None
        return None

    async def _create(self) -> float:
        cfg = self.config
        now = _now_micro()
        body: Obj = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": cfg.lease_name, "namespace": cfg.namespace},
            "spec": {
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": math.ceil(cfg.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        sent = self._clock()
        self._observe(await self.api.create(LEASES, body, cfg.namespace))
        return sent

    # --- leading ----------------------------------------------------------------------
    async def _lead(self, work: Callable[[], Awaitable[None]], last_sent: float) -> bool:
        """Run `work` while renewing. True if work returned by itself, False if lost."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        task: asyncio.Task[None] = asyncio.ensure_future(work())

        def fence() -> None:
            if not task.done():
                self._log.warning("leader.renew_deadline_passed")
                self.is_leader = False
                task.cancel()

        watchdog = loop.call_later(last_sent + cfg.renew_deadline - self._clock(), fence)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=cfg.retry_period)
                if done:
                    if task.cancelled():
                        break  # fenced
                    task.result()  # re-raise the work's failure, if any
                    return True
                if not self.is_leader:
                    break
                remaining = last_sent + cfg.renew_deadline - self._clock()
                sent = await self._try_acquire_or_renew(budget=max(remaining, 0.001))
                if sent is not None and self.is_leader:
                    last_sent = sent
                    watchdog.cancel()
                    watchdog = loop.call_later(sent + cfg.renew_deadline - self._clock(), fence)
                elif self._lease is not None and self.leader_identity != cfg.identity:
                    fence()  # the Lease now names someone else
        finally:
            watchdog.cancel()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.is_leader = False
        self._lease = None
        self._log.info("leader.lost")
        return False

    async def _release(self) -> None:
        cfg = self.config
        lease = self._lease
        if lease is None:
            return
        spec = {**(lease.get("spec") or {}), "holderIdentity": ""}
        try:
            async with asyncio.timeout(max(cfg.retry_period, 1.0)):
                await self.api.replace(LEASES, {**lease, "spec": spec})
            self._log.info("leader.released")
        except (ApiError, TimeoutError) as exc:
            self._log.info("leader.release_failed", error=repr(exc))
