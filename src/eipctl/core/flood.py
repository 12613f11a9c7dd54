"""`FloodGuard`: which sources a liveness responder drops in the kernel, and for how long.

The socket filter (`core.liveness_filter`) drops what is malformed without reading it. What it
cannot judge is a well-formed datagram with a wrong MAC or a replayed seq: that needs the key
and the responder's memory, in Python, at a few microseconds each. A sender that makes many
such refusals a second is flooding; its address goes on the filter's deny list for a while,
and from then on it costs nothing. Sources that sent something valid recently (the schedulers,
the peers) are trusted, by address and by the ports their valid datagrams came from: a
forged flood "from" a scheduler's address must not silence the scheduler, so such a source
is denied *except from its trusted ports* (a scheduler's prober socket, a peer's responder):
the kernel then drops the forger's datagrams, which do not come from those ports unless it
learnt them (it sees probes: a node's root, which holds the cluster key anyway). So the
guard bounds what a flood costs from an address of its own and from a forged one; what it
cannot bound is a forger that knows a trusted port (docs/liveness.md, "Under attack").

Pure: times are given, no clock is read. Memory is bounded: at most `MAX_TRACKED` sources are
counted per window and trusted at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eipctl.core.liveness_filter import MAX_ALLOWED_PORTS, MAX_DENIED

__all__ = ["MAX_PORTS", "MAX_TRACKED", "Denial", "FloodGuard"]

MAX_TRACKED: Final = 4096
MAX_PORTS: Final = MAX_ALLOWED_PORTS
"""Trusted ports kept per source (the newest): a scheduler replica probes from one port per
address family, a peer queries from its responder's; a restart adds one."""


@dataclass(frozen=True, slots=True)
class Denial:
    """A source put on the deny list: how many refusals it made in the window that did it,
    and the ports it is still admitted from (its trusted ones; empty: none)."""

    source: str
    refused: int
    until: float
    allowed_ports: frozenset[int] = frozenset()


class FloodGuard:
    """Counts refusals per source per ``window`` and denies a source that passes ``limit``.

    ``limit`` refusals within one ``window`` (seconds) deny the source for ``deny_for``
    seconds, unless it sent a valid datagram within ``trusted_for``. At most `MAX_DENIED`
    sources are denied at once; a new denial then replaces the one that ends first.
    """

    def __init__(
        self,
        *,
        limit: int = 200,
        window: float = 1.0,
        deny_for: float = 30.0,
        trusted_for: float = 60.0,
    ) -> None:
        if limit < 1 or window <= 0 or deny_for <= 0 or trusted_for < 0:
            raise ValueError("limit, window and deny_for must be positive, trusted_for >= 0")
        self.limit = limit
        self.window = window
        self.deny_for = deny_for
        self.trusted_for = trusted_for
        self._window_start = float("-inf")
        self._counts: dict[str, int] = {}
        self._trusted: dict[str, float] = {}  # source -> when it last sent a valid datagram
        self._ports: dict[str, dict[int, float]] = {}  # source -> {port: when, from there}
        self._denied: dict[str, Denial] = {}

    @property
    def denied(self) -> frozenset[str]:
        """The sources denied now (as of the last call that was given a time)."""
        return frozenset(self._denied)

    @property
    def denials(self) -> dict[str, frozenset[int]]:
        """The sources denied now, each with the ports it is still admitted from."""
        return {source: d.allowed_ports for source, d in self._denied.items()}

    def accepted(self, source: str, now: float, port: int | None = None) -> None:
        """``source`` sent a valid datagram (from ``port``): trust it for ``trusted_for``."""
        if source not in self._trusted and len(self._trusted) >= MAX_TRACKED:
            self._prune_trusted(now)
            if len(self._trusted) >= MAX_TRACKED:
                return
        self._trusted[source] = now
        if port is not None:
            ports = self._ports.get(source)
            if ports is None:  # not setdefault: a prober calls this 10,000 times a second
                ports = self._ports[source] = {}
            ports[port] = now
            if len(ports) > MAX_PORTS:
                del ports[min(ports, key=ports.__getitem__)]

    def refused(
        self, source: str, now: float, weight: int = 1, port: int | None = None
    ) -> Denial | None:
        """``weight`` refusals from ``source`` (a sampled one stands for many; ``port``: its
        source port, None if unknown); the denial, if this one tipped the source over the
        limit. A trusted source is denied only when the refusal came from a port it is not
        trusted from, and then except from its trusted ports."""
        if now - self._window_start >= self.window:
            self._window_start, self._counts = now, {}
        if source in self._denied:
            return None
        if source not in self._counts and len(self._counts) >= MAX_TRACKED:
            return None  # so many sources at once: forged; the guard cannot tell them apart
        count = self._counts.get(source, 0) + weight
        self._counts[source] = count
        if count < self.limit:
            return None
        allowed: frozenset[int] = frozenset()
        if self._is_trusted(source, now):
            allowed = self._trusted_ports(source, now)
            if port is None or port in allowed or not allowed:
                return None  # it may be the trusted sender itself: never silence it
        if len(self._denied) >= MAX_DENIED:
            del self._denied[min(self._denied, key=lambda s: self._denied[s].until)]
        denial = Denial(source, count, now + self.deny_for, allowed)
        self._denied[source] = denial
        del self._counts[source]
        return denial

    def expire(self, now: float) -> list[str]:
        """Lift the denials that have ended; the sources lifted."""
        ended = [source for source, d in self._denied.items() if d.until <= now]
        for source in ended:
            del self._denied[source]
        return ended

    def next_expiry(self) -> float | None:
        """When the first denial ends (None: none is in force)."""
        return min((d.until for d in self._denied.values()), default=None)

    def _trusted_ports(self, source: str, now: float) -> frozenset[int]:
        ports = self._ports.get(source, {})
        return frozenset(p for p, at in ports.items() if now - at <= self.trusted_for)

    def _is_trusted(self, source: str, now: float) -> bool:
        last = self._trusted.get(source)
        return last is not None and now - last <= self.trusted_for

    def _prune_trusted(self, now: float) -> None:
        for source in [s for s, t in self._trusted.items() if now - t > self.trusted_for]:
            del self._trusted[source]
            self._ports.pop(source, None)
