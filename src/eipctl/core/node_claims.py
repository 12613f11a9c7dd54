"""Node IPs: which Node needs an IpClaim of its own, which claim it reuses, Node edits.

Pure decisions for `eipctl nodeips` (docs/node-ips.md). Values in, values out: no clock,
no API. The process reads Nodes, node claims and Pods into the small views below and acts
on what these functions return.

Vocabulary:

- a *node claim* is an IpClaim with label ``eipctl.io/origin: node`` and ``spec.nodeBound``;
  it belongs to the Node named in ``spec.nodeName`` (empty: an *orphan*, kept for reuse);
- a Node's *slot* is its annotation ``eipctl.io/external-ip-claim``: the name of the one
  claim that is its IP. The slot is written (compare-and-set on the Node's resourceVersion)
  before a claim is bound to the Node, which is what makes a second claim impossible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from eipctl.core.naming import LABEL_AUTO_ASSIGN, LABEL_EXTERNAL_IP, LABEL_NODE_POOL, IPAddress
from eipctl.core.pool import Pool, PoolAllocator

TRUE_VALUES: Final = frozenset({"true", "True", "TRUE"})


@dataclass(frozen=True)
class NodeView:
    """What the decisions need of a core v1 Node."""

    name: str
    labels: Mapping[str, str]
    unschedulable: bool = False
    slot: str = ""
    tainted: bool = False
    """Carries the startup taint ``eipctl.io/external-ip-not-attached``."""
    provider_id: str = ""

    @property
    def auto_assign(self) -> bool:
        return self.labels.get(LABEL_AUTO_ASSIGN, "") in TRUE_VALUES

    @property
    def external_ip_label(self) -> str:
        return self.labels.get(LABEL_EXTERNAL_IP, "")


@dataclass(frozen=True)
class NodeClaim:
    """What the decisions need of a node claim."""

    name: str
    ip: IPAddress
    pool: str
    node: str = ""
    """``spec.nodeName``; empty: orphan."""
    phase: str = "Pending"
    bound_node: str = ""
    provider: str = ""

    @property
    def live_on(self) -> str:
        """The node the IP is live on: Bound there, and still placed there; else ""."""
        if self.phase == "Bound" and self.node and self.bound_node == self.node:
            return self.node
        return ""


@dataclass(frozen=True)
class PodView:
    """A Pod carrying ``eipctl.io/external-ip``."""

    ip: str
    node: str = ""
    """``spec.nodeName`` ("" while pending)."""
    finished: bool = False
    """Phase Succeeded or Failed: it pins nothing any more."""


class Release(StrEnum):
    """What becomes of a node claim whose Node no longer needs it."""

    KEEP = "keep"
    ORPHAN = "orphan"
    """``--prevent-deallocation``: unbind, keep the address for reuse."""
    DELETE = "delete"


def may_acquire(node: NodeView) -> bool:
    """A Node that may be given a (new or reused) IP now: labelled and not cordoned."""
    return node.auto_assign and not node.unschedulable


def desired_pool(node: NodeView, default_pool: str) -> str:
    """The pool a Node's IP comes from: its ``eipctl.io/external-ip-pool`` label, or the default."""
    return node.labels.get(LABEL_NODE_POOL, "").strip() or default_pool


def pinned(claim: NodeClaim, pods: Iterable[PodView]) -> bool:
    """Some unfinished Pod on the claim's node carries ``eipctl.io/external-ip=<its IP>``."""
    ip = str(claim.ip)
    return any(p.ip == ip and p.node == claim.node and not p.finished for p in pods)


def reusable(
    claim: NodeClaim,
    nodes: Mapping[str, NodeView],
    pods: Iterable[PodView],
) -> bool:
    """An orphan: no node, its node gone or no longer asking, or cordoned with nothing pinned."""
    if not claim.node:
        return True
    node = nodes.get(claim.node)
    if node is None or not node.auto_assign:
        return True
    return node.unschedulable and not pinned(claim, pods)


def reference_counts(pods: Iterable[PodView]) -> dict[str, int]:
    """IP -> how many unfinished Pods carry ``eipctl.io/external-ip=<IP>``."""
    counts: dict[str, int] = {}
    for pod in pods:
        if not pod.finished:
            counts[pod.ip] = counts.get(pod.ip, 0) + 1
    return counts


def _ip_order(ip: IPAddress) -> tuple[int, int]:
    return (ip.version, int(ip))


def rank_reuse(
    pool: str,
    claims: Iterable[NodeClaim],
    nodes: Mapping[str, NodeView],
    pods: Iterable[PodView],
    *,
    exclude: Iterable[str] = (),
) -> list[NodeClaim]:
    """Reusable claims of ``pool``, best first: most referenced by Pods, ties lowest IP.

    ``exclude``: claim names already being taken by another Node in this process.
    """
    pod_list = list(pods)
    counts = reference_counts(pod_list)
    skip = set(exclude)
    candidates = [
        c for c in claims if c.pool == pool and c.name not in skip and reusable(c, nodes, pod_list)
    ]
    return sorted(candidates, key=lambda c: (-counts.get(str(c.ip), 0), _ip_order(c.ip)))


def release_decision(
    claim: NodeClaim,
    node: NodeView | None,
    default_pool: str,
    *,
    prevent_deallocation: bool,
) -> Release:
    """Keep a claim its Node still wants; else orphan (prevent-deallocation) or delete it.

    A Node wants its claim while it is labelled auto-assign (cordoned or not) and the claim
    is of the pool the Node asks for now.
    """
    if node is not None and node.auto_assign and claim.pool == desired_pool(node, default_pool):
        return Release.KEEP
    return Release.ORPHAN if prevent_deallocation else Release.DELETE


def choose_own(node: NodeView, claims: Iterable[NodeClaim], default_pool: str) -> NodeClaim | None:
    """Of the claims bound to ``node``, the one that is its IP; None if none qualifies.

    The slot's claim when it is bound here; with an empty slot, the lowest-named claim of
    the wanted pool (adopted: the slot is written for it). Every other claim bound to the
    node is a stray and gets released.
    """
    pool = desired_pool(node, default_pool)
    mine = sorted((c for c in claims if c.node == node.name and c.pool == pool), key=_name)
    if node.slot:
        return next((c for c in mine if c.name == node.slot), None)
    return mine[0] if mine else None


def _name(claim: NodeClaim) -> str:
    return claim.name


@dataclass(frozen=True)
class NodeEdit:
    """Label and taint changes for a Node (None: leave as it is)."""

    external_ip: str | None = None
    """New value of ``eipctl.io/external-ip``; "" removes the label."""
    remove_taint: bool = False

    @property
    def empty(self) -> bool:
        return self.external_ip is None and not self.remove_taint


def node_edit(node: NodeView, own: NodeClaim | None) -> NodeEdit:
    """Label the Node with its IP once live there; drop the label when it is not; lift the taint.

    The taint is only ever removed (it is a startup taint: never put back).
    """
    live = own is not None and own.live_on == node.name
    want = str(own.ip) if live and own is not None else ""
    label = None if node.external_ip_label == want else want
    return NodeEdit(external_ip=label, remove_taint=live and node.tainted)


def new_ip(pool: Pool, used: Iterable[IPAddress]) -> IPAddress | None:
    """The lowest address of ``pool`` not in ``used`` (addresses outside it are ignored)."""
    return PoolAllocator(pool, [ip for ip in used if pool.contains(ip)]).allocate()
