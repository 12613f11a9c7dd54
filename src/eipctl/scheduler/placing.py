"""The placement pass: snapshot the caches, ask `core.placement` for decisions, write them.

Placement is global (spread counts every claim on every node), so it runs as one level-based
pass over all claims rather than per claim (the same pass keeps policy ``all``'s per-node
claims); the work queue runs it under one key, so two passes never overlap and changes
during a pass trigger exactly one more.

A pass decides and starts the writes, but does not wait for them: a node death during a
batch of 1,000 placements is handled at once, not after the batch. `claim_writes` keeps
what is in flight and what our writes stored (a claim being written counts as where the
write puts it; a stale cache never makes the scheduler place a claim twice); the writes are
compare-and-set besides (see `claims.place`). A claim no live node may take is reported
once (`NoLiveNode`), not written again by every pass while it waits.

Each claim's policy is its pool's ``spec.placement``, else ``--policy`` (`view.policies_for`).
A pool that changes policy at runtime is converged make before break:

- to ``all``: the per-node claims are created first; a claim on a live node its pool admits
  is marked (which takes it off that node) only once its copy for that node is in the
  cache, so that node's controller sees the copy before the claim leaves and keeps the
  address (the copy takes over the address already on the link: no gap); a claim on a live
  node the pool does not admit (any more) waits for a copy on another live node;
- from ``all``: the claim is placed on one node first; its per-node claims are deleted only
  once that placement is written (and while it stays unwritten, e.g. no live node may hold
  it, they stay on the nodes the pool admits). The controllers that lose a copy then find
  the claim placed elsewhere and hold the address until it is Bound there (their hand-over).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

import structlog

from eipctl.core.claim_status import (
    REASON_NO_LIVE_NODE,
    REASON_NO_LOCAL_ENDPOINT,
    no_live_node_status,
    scheduled_status,
)
from eipctl.core.claims import (
    is_all_nodes,
    node_of,
    reference,
)
from eipctl.core.eligibility import Exclusion
from eipctl.core.fields import Obj, name_of
from eipctl.core.liveness import Liveness
from eipctl.core.placement import (
    ClaimPlacement,
    Cluster,
    Decision,
    Policies,
    Policy,
    Reason,
    plan,
)
from eipctl.kube.client import IPCLAIMS
from eipctl.kube.errors import NotFound
from eipctl.kube.events import Tells
from eipctl.kube.slices import Timeslice
from eipctl.kube.workqueue import DONE, Result
from eipctl.kube.writer import SerializedWriter
from eipctl.scheduler.claim_facts import ClaimFacts, ClaimFactsMemo
from eipctl.scheduler.claim_messages import (
    claim_event,
    no_live_node_message,
    placed_message,
    unplaceable_reason,
)
from eipctl.scheduler.claim_writes import Cache, ClaimWrites
from eipctl.scheduler.claims import place
from eipctl.scheduler.claims_by_node import NODE_INDEX, ClaimsByNode
from eipctl.scheduler.local_traffic import LocalTraffic
from eipctl.scheduler.metrics import (
    EXCLUDED_NODES,
    FAILOVER_SECONDS,
    PLACEMENT_PASS_SECONDS,
    PLACEMENTS,
    set_claim_phases,
)
from eipctl.scheduler.pass_claims import gather
from eipctl.scheduler.per_node import copy_missing
from eipctl.scheduler.per_node_writes import PerNodeCopies
from eipctl.scheduler.planned_moves import PlannedMoves
from eipctl.scheduler.view import PoolViews, cluster_for, exclusions, policies_for

log = structlog.get_logger(__name__)


class ServiceNotifier(Protocol):
    """Tells the Services a claim lists where its IP went (`service_events.ServiceEvents`)."""

    def placed(self, claim: Obj, d: Decision) -> tuple[str, ...]: ...
    def unplaceable(self, claim: Obj, d: Decision) -> tuple[str, ...]: ...


FAILOVER_MOST = 1_000
"""`Placer.failover` plans at most this many claims (it runs ahead of the pacing and in one
piece, ~4 us a claim); more on dead nodes at once is a storm (many nodes judged dead
together), left to the pass, which is paced and gives the loop back every few ms."""


class _NoNodes:
    def objects(self) -> list[Obj]:
        return []


class Placer:
    """Runs placement passes for one leadership term."""

    def __init__(
        self,
        *,
        claims: Cache,
        nodes: Cache,
        pools: Cache,
        liveness: Liveness,
        writer: SerializedWriter,
        recorder: Tells,
        services: ServiceNotifier,
        policy: Policy | str,
        clock: Callable[[], float],
        kick: Callable[[float], None],
        dead_since: dict[str, float] | None = None,
        kube_nodes: Cache | None = None,
        exclude_cordoned: bool = False,
        local: LocalTraffic | None = None,
        returned_at: Mapping[str, float] | None = None,
        hold_down: float = 0.0,
        facts: ClaimFactsMemo | None = None,
        by_node: ClaimsByNode | None = None,
    ) -> None:
        self.returned_at: Mapping[str, float] = returned_at if returned_at is not None else {}
        """node -> when it was live again after being declared dead (`NodeWatch`)."""
        self.hold_down = hold_down
        """--node-hold-down: so long after its return a node takes claims only as a last
        resort."""
        self.claims = claims
        self.by_node = by_node
        """The claim cache's node index (`claims_by_node`): None, no `failover` of its own."""
        self.local = local
        """Where Local Services' endpoints are (None: every claim is placed as Cluster)."""
        self.kube_nodes: Cache = kube_nodes if kube_nodes is not None else _NoNodes()
        """The core v1 Nodes (labels, taints, cordon: `core.eligibility`)."""
        self.exclude_cordoned = exclude_cordoned
        self.excluded: dict[str, Exclusion] = {}
        """IpNode -> why it may hold nothing, as of the last pass."""
        self.nodes = nodes
        self.pools = pools
        self.liveness = liveness
        self.writer = writer
        self.recorder = recorder
        self.services = services
        self.policy = Policy(policy)
        """The default policy (--policy): claims whose pool names none, or of no pool."""
        self.policies = Policies(self.policy)
        """Every claim's policy, as of the last pass."""
        self.clock = clock
        self.kick = kick
        """Ask for another pass after a delay (the term's queue)."""
        self.dead_since = dead_since if dead_since is not None else {}
        """node -> when it was declared dead (shared with the liveness watcher)."""
        self.cursor = ""
        self.passes = 0
        """Completed passes (tests and debugging)."""
        self.failovers = 0
        """Deaths whose claims `failover` moved ahead of a pass (tests and debugging)."""
        self.pass_seconds = 0.0
        """How long the last pass worked (on ``clock``), without the loop's turns between
        its slices: `pacing.pace_after`."""
        self.longest_hold = 0.0
        """The longest the last pass held the loop without a break (tests, benchmarks)."""
        self._passing = asyncio.Lock()
        """Passes never overlap (a rebalance pass and a placement pass are two keys)."""
        self.pass_ended = 0.0
        """When (on ``clock``) the last pass ended: `pacing.rest_after`."""
        self._pool_views = PoolViews()
        self._facts = facts if facts is not None else ClaimFactsMemo()
        """Each claim read once per version (`claim_facts`); the process's, so a new term's
        first pass reads only what changed since the last term's last."""
        self.writes = ClaimWrites(claims, kick)
        self.planned = PlannedMoves(clock, kick)
        self.copies = PerNodeCopies(
            self.writes, writer, recorder, local.of if local is not None else None
        )

    def is_echo(self, obj: Obj) -> bool:
        """True if ``obj`` is what our own write stored (no new pass needed for it)."""
        return self.writes.is_echo(obj)

    @property
    def in_flight(self) -> int:
        return len(self.writes)

    async def close(self) -> None:
        """End of the term: stop the writes still in flight."""
        await self.writes.close()

    async def reconcile(self, rebalance_moves: int = 0) -> Result:
        """One pass: decide, start the writes of every decision and repair; returns DONE.

        The pass gives the loop back every few milliseconds of its work (`Timeslice`), so
        the liveness replies and the Lease's renewal never wait on it for long; it decides
        on what it read at its start (`pass_claims`), and passes never overlap.
        """
        async with self._passing:
            return await self._pass(rebalance_moves)

    async def _pass(self, rebalance_moves: int) -> Result:
        started = self.clock()
        budget = Timeslice(clock=self.clock)
        claims = await gather(self.writes, self._facts, budget)
        objs, facts, by_name = claims.objs, claims.facts, claims.by_name
        set_claim_phases(claims.phases)
        cluster = self._snapshot(started)
        views = []
        for obj, fact in zip(objs, facts, strict=True):
            await budget.spent()
            views.append(self._view(obj, fact))
        result = plan(
            views, cluster, self.policies, cursor=self.cursor, rebalance_moves=rebalance_moves
        )
        self.cursor = result.cursor
        room = self.planned.room(started, self.writes.pending)
        held: list[str] = []
        for d in result.decisions:
            await budget.spent()  # each decision starts a write: 10,000 at a term's start
            if d.reason.planned and d.to_node and d.claim not in self.writes.pending:
                if room <= 0:
                    held.append(d.claim)
                    continue
                room -= 1
            self._start(d, by_name[d.claim], claims.per_node, cluster, started)
        if held:
            self.planned.held(len(held))
        decided = {d.claim for d in result.decisions}
        for obj, fact in zip(objs, facts, strict=True):
            await budget.spent()
            name = fact.name
            if name not in decided and name not in self.writes.pending and not fact.consistent:
                self.writes.start(name, None, self._repair(obj))
        self.copies.sync(objs, [f.view for f in facts], claims.per_node, cluster, self.policies)
        self.pass_seconds = budget.done()
        self.pass_ended = self.clock()
        self.longest_hold = budget.longest
        PLACEMENT_PASS_SECONDS.observe(self.pass_ended - started)
        self.passes += 1
        return DONE

    async def failover(self) -> bool:
        """Move the claims of the nodes found dead, planned alone over the others' load
        (`plan`'s ``base_load``, from `claims_by_node`), before the pass that walks every
        claim: at 10,000 claims that walk was most of the time from a death to its first
        write (docs/scale.md). True if it decided anything.

        It decides what that pass would (a hypothesis test of `plan`) as long as nothing
        else moves: so it leaves everything to that pass while any write of ours is in
        flight or not yet in the cache (the cache's counts would be off by those claims:
        a death during a batch of placements would spread unevenly), and leaves it the
        claims of policy ``all``, those with nowhere to go (reported once, by it), and
        every claim when more than `FAILOVER_MOST` are on dead nodes. The pass that
        follows sees these writes in flight.
        """
        async with self._passing:
            started = self.clock()
            dead = self.dead_holding(started)
            if self.by_node is None or not dead or not self.writes.settled(self.by_node.get):
                return False
            overlay, reading = self.writes.overlay(), self._facts.reading()  # neither `done`
            if sum(self.by_node.index_count(NODE_INDEX, n) for n in dead) > FAILOVER_MOST:
                return False  # a storm: the paced pass's
            objs = [
                overlay.current(cached)
                for node in dead
                for cached in self.by_node.by_index(NODE_INDEX, node)
            ]
            cluster = self._snapshot(started)
            views = [self._view(obj, reading.of(obj)) for obj in objs]
            load = {n: self.by_node.index_count(NODE_INDEX, n) for n in cluster.live}
            result = plan(views, cluster, self.policies, cursor=self.cursor, base_load=load)
            self.cursor = result.cursor
            by_name = {name_of(obj): obj for obj in objs}
            decided = [  # a claim with nowhere to go is the pass's to report, once
                d
                for d in result.decisions
                if d.to_node and not d.all_nodes and not d.reason.planned
            ]
            for d in decided:
                self._start(d, by_name[d.claim], {}, cluster, started)
            if decided:
                self.failovers += 1
                log.info("placement.failover", nodes=dead, claims=len(decided))
            return bool(decided)

    def dead_holding(self, now: float) -> list[str]:
        """The nodes found dead that still hold claims of placement's (`failover`'s work).
        Asked on every placement request: it looks at the dead nodes only, not at all."""
        if self.by_node is None:
            return []
        is_live, count = self.liveness.is_live, self.by_node.index_count
        return [n for n in self.dead_since if not is_live(n, now) and count(NODE_INDEX, n)]

    def _snapshot(self, started: float) -> Cluster:
        """The nodes as a pass sees them (and each claim's policy, `policies`)."""
        ipnodes = self.nodes.objects()
        self.excluded = exclusions(
            ipnodes, self.kube_nodes.objects(), cordoned_excludes=self.exclude_cordoned
        )
        for why in Exclusion:
            EXCLUDED_NODES.labels(why.value).set(sum(1 for e in self.excluded.values() if e is why))
        pool_views = self._pool_views.build(self.pools.objects())
        self.policies = policies_for(pool_views, self.policy)
        return cluster_for(
            ipnodes,
            pool_views,
            self.liveness.live(started),
            self.excluded,
            stale=self.liveness.api_stale(),
            held_down=frozenset(
                n for n, at in self.returned_at.items() if started - at < self.hold_down
            ),
        )

    def _view(self, obj: Obj, fact: ClaimFacts) -> ClaimPlacement:
        """A claim as placement sees it: its Local Services' nodes, and where our write in
        flight puts it."""
        view = fact.view
        if self.local is not None:
            local = self.local.of(obj, fact.services)
            if local is not None:
                view = replace(view, local=local)
        pending = self.writes.pending.get(view.name)
        if pending is not None and not pending.no_live_node:
            view = replace(view, node=pending.to_node, all_nodes=pending.all_nodes)
        return view

    def _start(
        self, d: Decision, obj: Obj, per_node: dict[str, Obj], cluster: Cluster, started: float
    ) -> None:
        """Start the write of one decision (or say why none)."""
        if d.reason is Reason.NODE_DEAD and d.from_node:
            # this pass found it dead before the liveness watcher said so
            self.dead_since.setdefault(d.from_node, started)
        if d.claim in self.writes.pending:
            self.writes.defer(d.claim, d)  # decide again once its write is done
        elif d.no_live_node and self._reported(d, obj):
            return  # said already: no write, and no pass woken by one
        elif copy_missing(d, obj, per_node, cluster):
            # marked once its node's copy is in the cache: that copy's arrival runs the
            # pass that marks it (see the module docstring)
            log.info("placement.all_nodes.waiting_for_copy", claim=d.claim, node=d.from_node)
        else:
            self.writes.start(d.claim, d, self._apply(d, obj))

    async def _apply(self, d: Decision, obj: Obj) -> None:
        if d.no_live_node:
            await self._report_no_live_node(d, obj)
            return
        try:
            stored = await self.writer.update(
                IPCLAIMS, d.claim, place(d.from_node, d.to_node, all_nodes=d.all_nodes)
            )
        except NotFound:
            return
        self.writes.remember(stored)
        if node_of(stored) != d.to_node or is_all_nodes(stored) != d.all_nodes:
            log.info(
                "placement.skipped",
                claim=d.claim,
                expected_node=d.from_node,
                found_node=node_of(stored),
                why="claim changed since the decision; the next pass decides again",
            )
            return
        if d.reason.planned and d.to_node:
            self.planned.written(d, stored)
        since = self.dead_since.get(d.from_node) if d.reason is Reason.NODE_DEAD else None
        if since is not None:  # the move is written: that claim has failed over
            FAILOVER_SECONDS.observe(max(0.0, self.clock() - since))
        message = placed_message(
            d, self.liveness.timeout, left_all=is_all_nodes(obj) and not d.all_nodes
        )
        unplaced = REASON_NO_LOCAL_ENDPOINT if d.unplace else REASON_NO_LIVE_NODE
        try:
            stored = await self.writer.update_status(
                IPCLAIMS, d.claim, scheduled_status(message, unplaced_reason=unplaced)
            )
        except NotFound:
            return
        self.writes.remember(stored)
        PLACEMENTS.labels(d.reason.value).inc()
        told = self.services.placed(stored, d)
        type_, reason = claim_event(d)
        self.recorder.tell(
            reference(stored),
            type_,
            reason,
            message,
            ip=(stored.get("spec") or {}).get("ip"),
            from_node=d.from_node or None,
            to_node=d.to_node or None,
            all_nodes=d.all_nodes or None,
            services=list(told) or None,
        )

    def observe_claim(self, obj: Obj | None, name: str = "") -> None:
        """A claim as the informer (or our write) has it (`PlannedMoves.observe`)."""
        self.planned.observe(obj, name)

    def _reported(self, d: Decision, obj: Obj) -> bool:
        """True if the claim already says what `_report_no_live_node` would write. A claim
        waiting for a node is decided again by every pass; without this each pass started a
        write task whose end woke the next pass (two waiting claims kept that going)."""
        status = copy.deepcopy(obj.get("status") or {})
        probe = {"status": status}
        no_live_node_status(no_live_node_message(d), reason=unplaceable_reason(d))(probe)
        return probe["status"] == (obj.get("status") or {})

    async def _report_no_live_node(self, d: Decision, obj: Obj) -> None:
        message = no_live_node_message(d)
        try:
            stored = await self.writer.update_status(
                IPCLAIMS, d.claim, no_live_node_status(message, reason=unplaceable_reason(d))
            )
        except NotFound:
            return
        if stored.get("status") == obj.get("status"):
            return  # already reported
        self.writes.remember(stored)
        told = self.services.unplaceable(stored, d)
        self.recorder.tell(
            reference(stored),
            "Warning",
            unplaceable_reason(d),
            message,
            node=d.from_node or None,
            services=list(told) or None,
        )

    async def _repair(self, obj: Obj) -> None:
        """Make labels and phase agree with a placement that stays (no move)."""
        name, node = name_of(obj), node_of(obj)
        try:
            stored = await self.writer.update(
                IPCLAIMS, name, place(node, node, all_nodes=is_all_nodes(obj) and not node)
            )
            self.writes.remember(stored)
            if node_of(stored) == node:
                text = f"on {node}" if node else "policy all"
                stored = await self.writer.update_status(IPCLAIMS, name, scheduled_status(text))
                self.writes.remember(stored)
        except NotFound:
            return
        log.info("claim.repaired", claim=name, node=node or None)
