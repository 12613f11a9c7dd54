"""`SourceDenials`: a `FloodGuard` driven from the event loop, for the responder and the prober.

It counts refusals by source, logs each denial, re-installs the socket's kernel filter
(``refilter``) when a source is denied and again when the denial ends, and keeps one timer
for the next end. The caller says how its filter is built; the guard itself stays pure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from eipctl.core.flood import Denial, FloodGuard

from .sockets import canonical

log = structlog.get_logger(__name__)


class SourceDenials:
    def __init__(
        self,
        role: str,
        refilter: Callable[[], None],
        *,
        guard: FloodGuard | None = None,
        on_denial: Callable[[Denial], None] | None = None,
        **log_fields: Any,
    ) -> None:
        self._role = role
        self._refilter = refilter
        self._guard = guard or FloodGuard()
        self._on_denial = on_denial
        self._fields = log_fields
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def denied(self) -> frozenset[str]:
        """Sources whose datagrams the kernel drops now."""
        return self._guard.denied

    @property
    def denials(self) -> dict[str, frozenset[int]]:
        """Sources whose datagrams the kernel drops now, each but from these ports."""
        return self._guard.denials

    def accepted(self, host: str, at: float, port: int | None = None) -> None:
        """``host`` sent something valid at ``at`` (loop clock), from ``port``: trust it."""
        self._guard.accepted(canonical(host), at, port)

    def trusted(self, source: str, at: float, port: int) -> None:
        """`accepted`, from a ``source`` already canonical (a prober's target's address)."""
        self._guard.accepted(source, at, port)

    def refused(self, addr: tuple[Any, ...], weight: int, reason: str) -> Denial | None:
        """``weight`` refusals from ``addr``; the denial (already logged and in force in the
        kernel), if this one tipped its source over the limit."""
        loop = asyncio.get_running_loop()
        port = addr[1] if len(addr) > 1 and isinstance(addr[1], int) else None
        denial = self._guard.refused(canonical(str(addr[0])), loop.time(), weight, port)
        if denial is None:
            return None
        log.warning(
            "liveness.source.denied",
            role=self._role,
            source=denial.source,
            refused=denial.refused,
            last_reason=reason,
            seconds=self._guard.deny_for,
            allowed_ports=sorted(denial.allowed_ports),
            why="it sent more datagrams this socket refuses than the flood limit",
            **self._fields,
        )
        self._refilter()
        self._schedule()
        if self._on_denial is not None:
            self._on_denial(denial)
        return denial

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        when = self._guard.next_expiry()
        if when is None or self._closed:
            return
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(max(when, loop.time()), self._lift)

    def _lift(self) -> None:
        self._timer = None
        lifted = self._guard.expire(asyncio.get_running_loop().time())
        if lifted:
            log.info("liveness.source.lifted", role=self._role, sources=sorted(lifted))
            self._refilter()
        self._schedule()
