"""Prometheus metrics of the scheduler, on the process-wide registry."""

from __future__ import annotations

import contextlib
from collections import Counter as Counter_
from collections.abc import Iterable
from typing import Final

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
    "IpNodes this replica judges live (they answer its liveness probes).",
    registry=REGISTRY,
)
KNOWN_NODES = Gauge(
    "eipctl_scheduler_known_nodes", "IpNodes this replica knows of.", registry=REGISTRY
)
LIVENESS_STALLED = Gauge(
    "eipctl_scheduler_liveness_stalled",
    "1 while every node has gone silent at once for this replica (its own network, or UDP "
    "blocked): nobody is declared dead meanwhile.",
    registry=REGISTRY,
)
CLAIMS = Gauge(
    "eipctl_claims",
    "IpClaims by status.phase (Pending for none), from the leader's cache at its last pass.",
    ["phase"],
    registry=REGISTRY,
)
NODE_SILENCE = Gauge(
    "eipctl_node_silence_seconds",
    "Seconds since this replica last heard an IpNode (a liveness reply), on its own clock.",
    ["node"],
    registry=REGISTRY,
)
FAILOVER_SECONDS = Histogram(
    "eipctl_failover_duration_seconds",
    "From the scheduler declaring a node dead to the placement write moving one of its claims.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
PLANNED_MOVES = Counter(
    "eipctl_scheduler_planned_moves",
    "Claims moved off a live node for maintenance, by reason (NodeExcluded, NodeTainted, "
    "NodeCordoned).",
    ["reason"],
    registry=REGISTRY,
)
PLANNED_MOVE_SECONDS = Histogram(
    "eipctl_scheduler_planned_move_seconds",
    "From the write of a planned move to the new node reporting the claim Bound; the old node "
    "holds the address meanwhile for at most its --address-lifetime, so the gap is at most "
    "the excess over that lifetime (0 below it).",
    ["reason"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
EXCLUDED_NODES = Gauge(
    "eipctl_scheduler_excluded_nodes",
    "IpNodes excluded from holding external IPs (label, taint or cordon), from the leader's "
    "last pass.",
    ["reason"],
    registry=REGISTRY,
)

COMPONENT: Final = "scheduler"
"""The ``component`` label of the shared ``eipctl_leader`` gauge (`eipctl.kube.metrics.LEADER`)."""

_phases_published: set[str] = set()


def set_claim_phases(phases: Iterable[str]) -> None:
    """Publish claim counts by phase (one per claim); phases seen before but absent now go
    to 0."""
    counts = Counter_(phases)
    for phase in _phases_published - set(counts):
        CLAIMS.labels(phase).set(0)
    for phase, n in counts.items():
        CLAIMS.labels(phase).set(n)
        _phases_published.add(phase)


def clear_claim_phases() -> None:
    """At the end of a term: only the leader publishes claim counts."""
    CLAIMS.clear()
    _phases_published.clear()


def forget_node(node: str) -> None:
    """The IpNode was deleted: drop its silence series."""
    with contextlib.suppress(KeyError):
        NODE_SILENCE.remove(node)
