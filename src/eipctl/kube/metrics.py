"""Prometheus metrics of the API machinery, on the process-wide registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from eipctl.metrics import REGISTRY

WRITER_WRITES = Counter(
    "eipctl_writer_writes",
    "Successful writes (update/create/delete/patch) sent by the serialized writer.",
    ["resource", "verb"],
    registry=REGISTRY,
)
WRITER_CONFLICTS = Counter(
    "eipctl_writer_conflicts",
    "409 Conflicts met by the serialized writer (each one re-read and re-applied).",
    ["resource"],
    registry=REGISTRY,
)
WRITER_RETRIES = Counter(
    "eipctl_writer_retries",
    "Writer attempts retried after a retryable error (5xx, 429, transport).",
    ["resource"],
    registry=REGISTRY,
)
WRITER_COALESCED = Counter(
    "eipctl_writer_coalesced",
    "Mutations folded into another pending write of the same object.",
    ["resource"],
    registry=REGISTRY,
)
WATCH_RESTARTS = Counter(
    "eipctl_watch_restarts",
    "Watch streams re-opened (dropped connection, timeout, error).",
    ["resource"],
    registry=REGISTRY,
)
WATCH_RELISTS = Counter(
    "eipctl_watch_relists",
    "Full relists after 410 Gone (or on start).",
    ["resource"],
    registry=REGISTRY,
)
LEADER = Gauge(
    "eipctl_leader",
    "1 while this replica holds its component's Lease and acts, else 0.",
    ["component"],
    registry=REGISTRY,
)
GC_PAUSE = Histogram(
    "eipctl_gc_pause_seconds",
    "Pauses of the cyclic garbage collector (the event loop stands still meanwhile).",
    ["generation"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=REGISTRY,
)
