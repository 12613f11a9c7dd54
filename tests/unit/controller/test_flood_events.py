"""controller/flood_events.py: one LivenessFlood Event per node per FLOOD_EVENT_EVERY."""

from __future__ import annotations

from typing import Any

from eipctl.controller.flood_events import FLOOD_EVENT_EVERY, FloodEvents
from eipctl.core.flood import Denial


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def emit(self, involved: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((involved["metadata"]["name"], type_, reason, message))


def test_a_flood_is_one_warning_event_per_period_naming_the_source() -> None:
    recorder, now = Recorder(), [1000.0]
    flood = FloodEvents(recorder, "node-1", clock=lambda: now[0])  # type: ignore[arg-type]
    flood.report(Denial("198.51.100.66", 250, 1030.0))
    now[0] += FLOOD_EVENT_EVERY - 1
    flood.report(Denial("198.51.100.67", 300, 2000.0))
    assert len(recorder.events) == 1
    name, type_, reason, message = recorder.events[0]
    assert (name, type_, reason) == ("node-1", "Warning", "LivenessFlood")
    assert "198.51.100.66 sent 250 datagrams" in message and "node-1" in message
    now[0] += 1
    flood.report(Denial("198.51.100.67", 300, 2000.0))
    assert [e[3].split(" ")[0] for e in recorder.events] == ["198.51.100.66", "198.51.100.67"]
