"""EventRecorder: posts, dedups by bumping count, never raises."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from eipctl.kube.client import EVENTS
from eipctl.kube.errors import ServerError
from eipctl.kube.events import EventRecorder, reference

from .kube_fakes import FakeApi

CLAIM = {
    "apiVersion": "eipctl.io/v1alpha1",
    "kind": "IpClaim",
    "metadata": {"name": "203-0-113-7", "uid": "u1", "resourceVersion": "5"},
}


def events(api: FakeApi) -> list[dict]:
    return [o for (p, _), o in api.objects.items() if p == EVENTS.plural]


async def test_repeats_bump_count_and_distinct_messages_make_new_events() -> None:
    api = FakeApi()
    rec = EventRecorder(api, "eipctl-scheduler")
    for _ in range(3):
        await rec.record(CLAIM, "Normal", "Scheduled", "placed on n1")
    await rec.record(CLAIM, "Warning", "NoNode", "no live node")
    evs = sorted(events(api), key=lambda e: e["reason"])
    assert [(e["reason"], e["count"]) for e in evs] == [("NoNode", 1), ("Scheduled", 3)]
    ev = evs[1]
    assert ev["metadata"]["namespace"] == "default"  # cluster-scoped object
    assert ev["involvedObject"]["name"] == "203-0-113-7"
    assert ev["source"]["component"] == "eipctl-scheduler"


async def test_failures_are_swallowed_and_emit_is_fire_and_forget() -> None:
    api = FakeApi()
    rec = EventRecorder(api, "c")
    api.faults = [ServerError(500, "InternalError", "boom")]
    await rec.record(CLAIM, "Normal", "X", "m")  # does not raise
    rec.emit(CLAIM, "Normal", "X", "m")
    await rec.flush()
    assert [e["count"] for e in events(api)] == [1]


async def test_expired_event_is_recreated() -> None:
    api = FakeApi()
    rec = EventRecorder(api, "c")
    await rec.record(CLAIM, "Normal", "X", "m")
    (key,) = [k for (p, k) in api.objects if p == EVENTS.plural]
    api.remove(EVENTS, key)
    await rec.record(CLAIM, "Normal", "X", "m")
    assert [e["count"] for e in events(api)] == [1]


async def test_a_burst_is_posted_a_few_at_a_time_and_the_backlog_is_bounded() -> None:
    class SlowApi:
        def __init__(self) -> None:
            self.running = 0
            self.peak = 0
            self.created = 0

        async def create(self, ref: Any, obj: Any, namespace: str | None = None) -> Any:
            self.running += 1
            self.peak = max(self.peak, self.running)
            await asyncio.sleep(0.001)
            self.running -= 1
            self.created += 1
            return obj

        async def patch(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("no repeats in this test")

    api = SlowApi()
    recorder = EventRecorder(api, "test", max_in_flight=3, max_backlog=50)
    for i in range(80):
        svc = {"kind": "Service", "metadata": {"name": f"s{i}", "namespace": "default"}}
        recorder.emit(svc, "Normal", "Allocated", f"ip {i}")
    await recorder.flush()
    assert api.peak == 3
    assert api.created == 50
    assert recorder.dropped == 30


async def test_tell_logs_the_decision_and_posts_the_same_words_as_an_event() -> None:
    api = FakeApi()
    rec = EventRecorder(api, "eipctl-allocator")
    svc = reference("v1", "Service", {"metadata": {"name": "web", "namespace": "shop"}})
    with structlog.testing.capture_logs() as logs:
        rec.tell(svc, "Warning", "IPInUse", "198.51.100.1 is set by hand on shop/hand", ip="x")
        rec.tell(CLAIM, "Normal", "Placed", "on node-a")
        await rec.flush()
    lines = [entry for entry in logs if entry["event"] == "object.event"]
    assert lines == [
        {
            "event": "object.event",
            "log_level": "warning",
            "kind": "Service",
            "name": "web",
            "namespace": "shop",
            "reason": "IPInUse",
            "detail": "198.51.100.1 is set by hand on shop/hand",
            "ip": "x",
        },
        {
            "event": "object.event",
            "log_level": "info",
            "kind": "IpClaim",
            "name": "203-0-113-7",
            "namespace": None,
            "reason": "Placed",
            "detail": "on node-a",
        },
    ]
    posted = sorted(events(api), key=lambda e: e["reason"])
    assert [(e["type"], e["reason"], e["message"]) for e in posted] == [
        ("Warning", "IPInUse", "198.51.100.1 is set by hand on shop/hand"),
        ("Normal", "Placed", "on node-a"),
    ]
    assert posted[0]["involvedObject"]["kind"] == "Service"
    assert posted[0]["metadata"]["namespace"] == "shop"
