"""`FloodEvents`: tells the IpNode's readers that its liveness responder is being flooded."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from eipctl.core.flood import Denial
from eipctl.core.naming import API_VERSION
from eipctl.kube.events import EventRecorder, reference

FLOOD_EVENT_EVERY: Final = 300.0
"""Seconds between two LivenessFlood Events of one node: each is an API write, and a flood
lasts; the log line and ``eipctl_liveness_packets_rejected_total`` count every denial."""


class FloodEvents:
    """A Warning Event ``LivenessFlood`` on the IpNode when the responder denies a source."""

    def __init__(
        self,
        events: EventRecorder,
        node: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        every: float = FLOOD_EVENT_EVERY,
    ) -> None:
        self._events = events
        self._node = node
        self._clock = clock
        self._every = every
        self._reported_at = float("-inf")

    def report(self, denial: Denial) -> None:
        now = self._clock()
        if now - self._reported_at < self._every:
            return
        self._reported_at = now
        self._events.emit(
            reference(API_VERSION, "IpNode", {"metadata": {"name": self._node}}),
            "Warning",
            "LivenessFlood",
            f"{denial.source} sent {denial.refused} datagrams within a second that the "
            f"liveness responder of {self._node} refused (wrong MAC, replayed, not for this "
            'node); the kernel drops its datagrams for a while (docs/liveness.md, "Under '
            f'attack"); more floods within {self._every:g}s are only logged and counted',
        )
