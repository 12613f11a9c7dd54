"""Placement policies: which IpNode holds each IpClaim. Values in, decisions out.

The scheduler process hands `plan` a snapshot (every claim with its current node and pool,
the live nodes, the nodes each pool's nodeSelector admits) and writes the decisions it
gets back. Nothing here reads a clock or an API; inputs are never mutated; the same input
always gives the same output.

Rules (docs/design.md, "Flows", "Place"):

- Each claim has one policy (`Policies.of`): its pool's (``spec.placement``), else the
  default (the scheduler's ``--policy``; also for unpooled claims and unknown pools). One
  pass decides claims of every policy together, in name order.
- A claim on a live node that its pool admits stays put, whatever the policy (no flapping).
  Only ``rebalance_moves > 0`` (the ``--rebalance`` flag, policy ``spread``) moves such
  claims, and then at most that many, and only claims whose policy is ``spread``.
- Load is counted across policies: every claim that stays on a node (or is stuck there)
  counts for that node, whatever its policy (one node, one link); a claim marked for every
  node sits on no node and counts for none (its per-node copies are not placement's).
- A claim that must go (unplaced, node dead, node gone, node no longer admitted by the pool,
  node excluded for maintenance: `core.eligibility`) gets a target among the live nodes its
  pool admits:
  ``spread``: the node with the fewest claims (all pools counted: one node, one link), ties
  broken round-robin in name order, continuing after ``cursor``;
  ``single``: the candidate that already holds the most claims (ties: lowest name), so every
  claim gathers on one node and, when it dies, on one other;
  ``all``: no node at all: the claim is marked for every eligible node (the scheduler
  process then keeps one per-node claim per eligible node).
- An excluded node (``Cluster.excluded``) is no candidate for any pool; a live one keeps
  its claims only while no other live node may take them (``no_live_node``). Its exclusion
  is the reason of the move (``NodeExcluded``, ``NodeTainted``, ``NodeCordoned``): a planned
  move, made before break by the controllers like every move.
- A claim that serves a Service with ``externalTrafficPolicy: Local`` (``local``: the nodes
  with its endpoints, `core.local_endpoints`) is placed only on a candidate with a ready
  endpoint. On a node without one it moves (``NoLocalEndpoint``, planned: the old node is
  live, so make before break) to a candidate with one; while no candidate has one it stays
  on a node whose endpoints are still serving as they terminate, and otherwise is unplaced
  (``unplace``: it keeps its IP, answered nowhere rather than dropped by a node).
- A node held down (``Cluster.held_down``: declared dead, live again only a moment ago) is a
  target only when no other candidate is left, so a flapping node does not collect claims
  only to drop them again; a claim already on it stays.
- No live candidate: the decision says so (``to_node == ""``, ``no_live_node``) and the claim
  is left where it is. A scheduler that lost its view of the nodes (no replies at all) sees
  every node dead; it must not strip every claim off its node because of that.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from eipctl.core.local_endpoints import EndpointNodes
from eipctl.core.spread import SpreadChoice, fewest

__all__ = [
    "ClaimPlacement",
    "Cluster",
    "Decision",
    "PlacementPlan",
    "Policies",
    "Policy",
    "Reason",
    "plan",
]


class Policy(StrEnum):
    SPREAD = "spread"
    SINGLE = "single"
    ALL = "all"


@dataclass(frozen=True)
class Policies:
    """The policy of each claim: its pool's, else ``default``."""

    default: Policy = Policy.SPREAD
    """The scheduler's ``--policy``: unpooled claims, pools with no placement of their own,
    pools the scheduler does not know."""
    by_pool: Mapping[str, Policy] = field(default_factory=dict)
    """Pool name -> the placement its ``spec.placement`` names (pools with ``""`` left out)."""

    @classmethod
    def of_any(cls, policy: Policy | str | Policies) -> Policies:
        """``policy`` as is, or one policy for every claim."""
        return policy if isinstance(policy, Policies) else cls(Policy(policy))

    def of(self, pool: str | None) -> Policy:
        """The policy of a claim of ``pool`` (None: unpooled)."""
        if pool is None:
            return self.default
        return self.by_pool.get(pool, self.default)


class Reason(StrEnum):
    """Why a claim gets a new placement (CamelCase: also the Event reason)."""

    UNPLACED = "Unplaced"
    NODE_DEAD = "NodeDead"
    NODE_GONE = "NodeGone"
    NODE_INELIGIBLE = "NodeIneligible"
    REBALANCE = "Rebalance"
    ALL_NODES = "AllNodes"
    NODE_EXCLUDED = "NodeExcluded"
    """The Node carries the label node.kubernetes.io/exclude-from-external-load-balancers."""
    NODE_TAINTED = "NodeTainted"
    """The Node carries eipctl's taint eipctl.io/exclude-from-external-ips."""
    NODE_CORDONED = "NodeCordoned"
    """The Node is cordoned (spec.unschedulable) and the scheduler honours cordons."""
    NO_LOCAL_ENDPOINT = "NoLocalEndpoint"
    """A Local Service's claim on a node without a ready endpoint of it (or unplaced, and
    no candidate has one)."""

    @property
    def planned(self) -> bool:
        """A maintenance move: the old node is live and lets go only once the new one binds."""
        return self in _PLANNED


_PLANNED = frozenset(
    {Reason.NODE_EXCLUDED, Reason.NODE_TAINTED, Reason.NODE_CORDONED, Reason.NO_LOCAL_ENDPOINT}
)


@dataclass(frozen=True)
class ClaimPlacement:
    """What placement needs to know of one IpClaim."""

    name: str
    pool: str | None = None
    """The claim's IpClaimPool; None: unpooled (every node may hold it)."""
    node: str = ""
    """``spec.nodeName``; empty: unplaced."""
    all_nodes: bool = False
    """Marked for policy ``all`` (held by every eligible node, ``node`` empty)."""
    local: EndpointNodes | None = None
    """Where its Local Service(s) have endpoints; None: no Local Service (any node does)."""


@dataclass(frozen=True)
class Cluster:
    """The nodes as the scheduler sees them now."""

    known: frozenset[str]
    """Every IpNode that exists."""
    live: frozenset[str]
    """IpNodes the scheduler judges live (a subset of ``known``)."""
    eligible: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Pool name -> the known nodes its nodeSelector admits, live or not. A pool missing
    here (no selector, or the pool is gone) admits every known node."""
    excluded: Mapping[str, Reason] = field(default_factory=dict)
    """Node -> why it may hold nothing (a planned-move reason: ``Reason.planned``)."""
    stale: frozenset[str] = frozenset()
    """Live nodes whose controllers cannot see the API (their replies say API_STALE): they
    keep what they hold, but take nothing new, which they could not learn of."""
    held_down: frozenset[str] = frozenset()
    """Live nodes that were dead a moment ago (a flapping node): a target only when no other
    candidate is left."""

    def selected(self, pool: str | None) -> frozenset[str]:
        """Known nodes the pool's nodeSelector admits (exclusions not applied)."""
        if pool is None:
            return self.known
        return self.eligible.get(pool, self.known)

    def admits(self, pool: str | None) -> frozenset[str]:
        """Known nodes that may hold a claim of ``pool``: selected, and not excluded."""
        selected = self.selected(pool)
        if not self.excluded:
            return selected
        return selected - self.excluded.keys()

    def candidates(self, pool: str | None) -> frozenset[str]:
        """Live nodes that may take a claim of ``pool`` (not stale)."""
        return (self.admits(pool) & self.live) - self.stale


@dataclass(frozen=True)
class Decision:
    """Move ``claim`` from ``from_node`` to ``to_node`` because of ``reason``.

    ``to_node`` is empty when the claim is marked for every node (``all_nodes``) or when no
    live node may hold it (``no_live_node``: leave the claim as it is and report).
    """

    claim: str
    from_node: str
    to_node: str
    reason: Reason
    all_nodes: bool = False
    unplace: bool = False
    """Take the claim off ``from_node`` with no new node (a Local Service with no endpoint
    anywhere): the claim keeps its IP and waits."""

    @property
    def no_live_node(self) -> bool:
        return not self.to_node and not self.all_nodes and not self.unplace


@dataclass(frozen=True)
class PlacementPlan:
    decisions: tuple[Decision, ...]
    cursor: str
    """Pass to the next `plan` call so round-robin continues where it stopped."""

    @property
    def moves(self) -> tuple[Decision, ...]:
        """Decisions that change a claim (those with a target or the all-nodes mark)."""
        return tuple(d for d in self.decisions if not d.no_live_node)


def why_move(claim: ClaimPlacement, cluster: Cluster, policy: Policy) -> Reason | None:
    """Why ``claim`` cannot stay as it is under ``policy``; None if it may stay."""
    if policy is Policy.ALL:
        return None if claim.all_nodes and not claim.node else Reason.ALL_NODES
    if not claim.node:
        return Reason.UNPLACED
    if claim.node not in cluster.known:
        return Reason.NODE_GONE
    if claim.node not in cluster.live:
        return Reason.NODE_DEAD
    if claim.node not in cluster.selected(claim.pool):
        return Reason.NODE_INELIGIBLE
    excluded = cluster.excluded.get(claim.node)
    if excluded is None and claim.local is not None and claim.node not in claim.local.ready:
        return Reason.NO_LOCAL_ENDPOINT
    return excluded


def candidates_for(claim: ClaimPlacement, cluster: Cluster) -> frozenset[str]:
    """Live nodes that may take ``claim``: its pool's candidates, and for a Local Service
    only those with a ready endpoint."""
    candidates = cluster.candidates(claim.pool)
    if claim.local is not None:
        candidates &= claim.local.ready
    if not cluster.held_down:
        return candidates
    return candidates - cluster.held_down or candidates


def _waits_where_it_answers(claim: ClaimPlacement, cluster: Cluster) -> bool:
    """A Local claim with no target stays on a live node still serving it (terminating
    endpoints): kube-proxy delivers there until they are gone."""
    return (
        claim.local is not None and claim.node in cluster.live and claim.local.answers(claim.node)
    )


def plan(
    claims: Sequence[ClaimPlacement],
    cluster: Cluster,
    policy: Policy | str | Policies,
    *,
    cursor: str = "",
    rebalance_moves: int = 0,
    base_load: Mapping[str, int] | None = None,
) -> PlacementPlan:
    """Decide every claim that must move; see the module docstring for the rules.

    ``policy``: one policy for every claim, or `Policies` (per pool, with a default).
    ``base_load``: the claims left out of ``claims``, counted by the node they stay on. A
    plan of some claims over the others' load decides for those claims what a plan of all
    would, when none of the others moves (a node's death: only its claims are planned).
    """
    policies = Policies.of_any(policy)
    ordered = sorted(claims, key=lambda c: c.name)
    load: Counter[str] = Counter(base_load or {})
    movers: list[tuple[ClaimPlacement, Policy, Reason]] = []
    for claim in ordered:
        claim_policy = policies.of(claim.pool)
        reason = why_move(claim, cluster, claim_policy)
        if reason is None:
            if claim.node:
                load[claim.node] += 1
        else:
            movers.append((claim, claim_policy, reason))
    candidates_of = _CandidatesMemo(cluster)
    for claim, claim_policy, _ in movers:
        if (
            claim_policy is not Policy.ALL
            and claim.node in cluster.live
            and not candidates_of(claim)
        ):
            load[claim.node] += 1  # stuck where it is (no live candidate): still a load
    decisions: list[Decision] = []
    choices: dict[frozenset[str], SpreadChoice] = {}  # one per candidate set (`core.spread`)
    for claim, claim_policy, reason in movers:
        if claim_policy is Policy.ALL:
            decisions.append(Decision(claim.name, claim.node, "", reason, all_nodes=True))
            continue
        candidates = candidates_of(claim)
        if not candidates:
            decisions.append(_without_target(claim, cluster, reason))
            continue
        if claim_policy is Policy.SPREAD:
            if claim.local is None:  # the common case: a few candidate sets for every claim
                choice = choices.get(candidates)
                if choice is None:
                    choice = choices[candidates] = SpreadChoice(candidates, load)
                target = choice.pick(load, cursor)
            else:
                target = fewest(candidates, load, cursor)
            cursor = target
        else:
            target = _most(candidates, load)
        before = load[target]
        load[target] += 1
        for choice in choices.values():
            choice.added(target, before)
        decisions.append(Decision(claim.name, claim.node, target, reason))
    if rebalance_moves > 0:
        moved = {d.claim for d in decisions}
        staying = [
            c
            for c in ordered
            if c.name not in moved
            and c.node in cluster.live
            and policies.of(c.pool) is Policy.SPREAD
        ]
        decisions += _rebalance(staying, cluster, load, rebalance_moves)
    return PlacementPlan(tuple(decisions), cursor)


def _without_target(claim: ClaimPlacement, cluster: Cluster, reason: Reason) -> Decision:
    """No live candidate. A Local claim whose Service has live candidates but no endpoint on
    any of them is taken off a node that drops its traffic (unless that node still serves
    it); everything else is left as it is and reported."""
    if claim.local is not None and cluster.candidates(claim.pool):
        if not claim.node or _waits_where_it_answers(claim, cluster):
            return Decision(claim.name, claim.node, "", Reason.NO_LOCAL_ENDPOINT)
        return Decision(claim.name, claim.node, "", Reason.NO_LOCAL_ENDPOINT, unplace=True)
    return Decision(claim.name, claim.node, "", reason)


class _CandidatesMemo:
    """`candidates_for` within one plan: a claim without Local Services gets its pool's
    set, computed once per pool (the same frozenset each time, so it keys `SpreadChoice`)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.by_pool: dict[str | None, frozenset[str]] = {}

    def __call__(self, claim: ClaimPlacement) -> frozenset[str]:
        if claim.local is not None:
            return candidates_for(claim, self.cluster)
        found = self.by_pool.get(claim.pool)
        if found is None:
            found = self.by_pool[claim.pool] = frozenset(candidates_for(claim, self.cluster))
        return found


def _most(candidates: Iterable[str], load: Mapping[str, int]) -> str:
    """The most-loaded candidate; among equals the lowest name."""
    return min(candidates, key=lambda n: (-load.get(n, 0), n))


def _rebalance(
    staying: Sequence[ClaimPlacement],
    cluster: Cluster,
    load: Counter[str],
    max_moves: int,
) -> list[Decision]:
    """Up to ``max_moves`` moves, each from a node to one holding at least two fewer claims.

    ``load`` is updated in place (it is the plan's own working copy). Every move lowers the
    sum of squared loads, so this never oscillates, and it stops early when no move helps.
    """
    by_node: dict[str, list[ClaimPlacement]] = {}
    for claim in staying:
        by_node.setdefault(claim.node, []).append(claim)
    for node in cluster.live:
        load.setdefault(node, 0)
    decisions: list[Decision] = []
    while len(decisions) < max_moves:
        move = _best_move(by_node, cluster, load)
        if move is None:
            break
        claim, target = move
        by_node[claim.node].remove(claim)
        load[claim.node] -= 1
        load[target] += 1
        decisions.append(Decision(claim.name, claim.node, target, Reason.REBALANCE))
    return decisions


def _best_move(
    by_node: Mapping[str, list[ClaimPlacement]],
    cluster: Cluster,
    load: Mapping[str, int],
) -> tuple[ClaimPlacement, str] | None:
    sources = sorted(by_node, key=lambda n: (-load.get(n, 0), n))
    for source in sources:
        for claim in by_node[source]:
            targets = [
                n for n in candidates_for(claim, cluster) if load.get(n, 0) <= load[source] - 2
            ]
            if targets:
                return claim, min(targets, key=lambda n: (load.get(n, 0), n))
    return None
