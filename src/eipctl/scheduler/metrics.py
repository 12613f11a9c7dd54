"""Prometheus metrics of the scheduler, on the process-wide registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from eipctl.metrics import REGISTRY

PLACEMENTS = Counter(
    "eipctl_scheduler_placements",
    "Claims placed or moved, by reason (Unplaced, NodeDead, NodeGone, NodeIneligible, ...).",
    ["reason"],
    registry=REGISTRY,
)
PLACEMENT_PASS_SECONDS = Histogram(
    "eipctl_scheduler_placement_pass_seconds",
    "Duration of one placement pass (decide and write).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
LIVE_NODES = Gauge(
    "eipctl_scheduler_live_nodes",
    "IpNodes whose heartbeat is changing, as this replica sees them.",
    registry=REGISTRY,
)
KNOWN_NODES = Gauge(
    "eipctl_scheduler_known_nodes", "IpNodes this replica knows of.", registry=REGISTRY
)
IS_LEADER = Gauge(
    "eipctl_scheduler_leader", "1 while this replica holds the scheduler Lease.", registry=REGISTRY
)
