"""Whether a Kubernetes Node may hold external IPs: planned maintenance, from the Node alone.

Values in, a verdict out (no clock, no API). The scheduler reads the core v1 Nodes itself
(an informer) and asks `exclusion` about each; `core.placement` then moves the claims off an
excluded node (make before break, like any move) and places nothing new there. Precedence,
when several apply, is the order below (the first one found is the one reported):

1. the label ``node.kubernetes.io/exclude-from-external-load-balancers`` (any value: the key
   is what Kubernetes, MetalLB and Cilium look at) -> ``NodeExcluded``;
2. eipctl's own taint ``eipctl.io/exclude-from-external-ips`` (any effect) -> ``NodeTainted``,
   for those who cordon for other reasons and still want to move the IPs off a node;
3. ``spec.unschedulable: true`` (cordon, the first step of ``kubectl drain``), only when the
   scheduler runs with ``--exclude-cordoned-nodes`` -> ``NodeCordoned``.

A node with no Node object (the Node cache does not hold it) is judged from its IpNode's
labels, which the controller copies from the Node: only rule 1 can apply then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = [
    "EXCLUDE_LABEL",
    "EXCLUDE_TAINT",
    "Exclusion",
    "NodeFacts",
    "exclusion",
    "facts_of",
    "reason_text",
]

EXCLUDE_LABEL: Final = "node.kubernetes.io/exclude-from-external-load-balancers"
"""The well-known Node label (Kubernetes' service controller, MetalLB, Cilium)."""
EXCLUDE_TAINT: Final = "eipctl.io/exclude-from-external-ips"
"""eipctl's own taint key: moves the node's IPs away whatever its effect."""


class Exclusion(StrEnum):
    """Why a node may hold no external IP (CamelCase: also condition and Event reasons)."""

    EXCLUDED = "NodeExcluded"
    TAINTED = "NodeTainted"
    CORDONED = "NodeCordoned"


@dataclass(frozen=True)
class NodeFacts:
    """What eligibility looks at on a Node."""

    labels: Mapping[str, str]
    unschedulable: bool = False
    taint_keys: frozenset[str] = frozenset()


def facts_of(node: Mapping[str, Any]) -> NodeFacts:
    """The facts of a core v1 Node object (tolerant: a malformed field counts as absent)."""
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    spec = node.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    taints = spec.get("taints")
    keys = frozenset(
        str(t["key"])
        for t in (taints if isinstance(taints, list) else [])
        if isinstance(t, Mapping) and isinstance(t.get("key"), str)
    )
    return NodeFacts(
        labels=dict(labels) if isinstance(labels, Mapping) else {},
        unschedulable=spec.get("unschedulable") is True,
        taint_keys=keys,
    )


def exclusion(facts: NodeFacts, *, cordoned_excludes: bool) -> Exclusion | None:
    """Why this node may hold no external IP, or None if it may."""
    if EXCLUDE_LABEL in facts.labels:
        return Exclusion.EXCLUDED
    if EXCLUDE_TAINT in facts.taint_keys:
        return Exclusion.TAINTED
    if cordoned_excludes and facts.unschedulable:
        return Exclusion.CORDONED
    return None


def reason_text(node: str, why: Exclusion) -> str:
    """Short words for Events and conditions: ``node-1 excluded``."""
    return {
        Exclusion.EXCLUDED: f"{node} excluded",
        Exclusion.TAINTED: f"{node} tainted {EXCLUDE_TAINT}",
        Exclusion.CORDONED: f"{node} cordoned",
    }[why]


def leaving_reason(node: Mapping[str, Any]) -> str | None:
    """On a controller's SIGTERM: why its node is leaving (being deleted, drained, or
    excluded), or None when the stop is a restart (a DaemonSet rolling update).

    `kubectl drain` cordons first, so a cordoned node counts as leaving whatever the
    scheduler's `--exclude-cordoned-nodes`: misjudging a restart on a node cordoned for
    another reason costs a move without a gap (the addresses outlive the process by one
    lifetime), while misjudging a drain as a restart costs the restart grace.
    """
    meta = node.get("metadata")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return "NodeDeleting"
    why = exclusion(facts_of(node), cordoned_excludes=True)
    return None if why is None else why.value
