"""`why SERVICE`: the reason a Service has no working external IP, in one paragraph. Pure.

Two halves, as eipctl works: the allocator gives the Service an IP (else the reason is the
allocator's: its rules are re-run here on a throwaway `AllocationBook` built from the
snapshot, so the cause is the one the allocator itself reaches, named with the same reason it
posts as an Event), then the scheduler places the IP's claim on a live node and that node's
controller reports it Bound (else the reason is on the claim: its ``Scheduled`` and
``Conflict`` conditions, which the scheduler and controller wrote). What the controller
recorded is preferred; the re-derivation adds what it does not say: which pools were weighed
and why each refused, which nodes and why none may hold the IP, where a Local Service's
endpoints are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from eipctl.allocator.views import claim_info, pool_infos, service_info, used_ips
from eipctl.core.admission import CAUSES, DELETING, PoolVerdict, one_cause, weigh
from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    Request,
    RequestError,
    ServiceInfo,
    service_request,
)
from eipctl.core.claim_status import (
    CONDITION_CONFLICT,
    CONDITION_SCHEDULED,
    REASON_NO_LIVE_NODE,
    REASON_NO_LOCAL_ENDPOINT,
)
from eipctl.core.claims import bound_node_of, node_of, phase_of
from eipctl.core.conditions import find_condition, readable_conditions
from eipctl.core.fields import Obj, meta_of
from eipctl.core.naming import LOAD_BALANCER_CLASS, claim_name_for
from eipctl.core.pool import IPAddress
from eipctl.plugin.nodes import why_not_here
from eipctl.plugin.placement import endpoints_text
from eipctl.plugin.pools import WAYS_OUT, deleting_pools
from eipctl.plugin.snapshot import ALLOCATOR, SCHEDULER, Snapshot, event_time, source_of

HAS_IP = "HasIP"


@dataclass(frozen=True)
class Explanation:
    """Why ``service`` has (``cause`` HAS_IP) or has not an IP; ``reason`` is the paragraph."""

    service: str
    cause: str
    reason: str
    ips: tuple[str, ...] = ()
    pools: tuple[PoolVerdict, ...] = ()
    details: tuple[str, ...] = ()
    recorded: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def has_ip(self) -> bool:
        return self.cause == HAS_IP

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "hasIP": self.has_ip,
            "cause": self.cause,
            "reason": self.reason,
            "ips": list(self.ips),
            "poolsConsidered": [
                {"pool": v.pool, "admits": v.admits, "why": v.kind, "detail": v.detail}
                for v in self.pools
            ],
            "details": list(self.details),
            "recordedEvent": self.recorded or None,
            "notes": list(self.notes),
        }


def explain(snapshot: Snapshot, namespace: str, name: str, now: datetime) -> Explanation | None:
    """Why Service ``namespace/name`` has no working IP; None when there is no such Service."""
    obj = snapshot.service(namespace, name)
    if obj is None:
        return None
    key = f"{namespace}/{name}"
    info = service_info(obj)
    ips = used_ips(obj)
    recorded = _recorded(snapshot, namespace, name)
    notes = tuple(p.text for p in deleting_pools(snapshot) if set(map(str, ips)) & set(p.ips))
    base = Explanation(key, "", "", tuple(map(str, ips)), recorded=recorded, notes=notes)
    if ips:
        return _placement(snapshot, base, obj, ips, now)
    return _allocation(snapshot, base, info)


def _recorded(snapshot: Snapshot, namespace: str, name: str) -> str:
    """The last Warning eipctl posted on the Service, unless an IP came after it."""
    events = [
        e
        for e in snapshot.events_about("Service", name, namespace)
        if source_of(e) in (ALLOCATOR, SCHEDULER)
    ]
    if not events or events[-1].get("type") != "Warning":
        return ""
    last = events[-1]
    when = event_time(last)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else "?"
    return f"{last.get('reason')} ({source_of(last)}, {stamp}): {last.get('message', '')}"


# --- the allocator's half ------------------------------------------------------------------
def _allocation(snapshot: Snapshot, base: Explanation, info: ServiceInfo) -> Explanation:
    if info.foreign_class:
        return _with(
            base,
            "ForeignClass",
            f"it is a LoadBalancer of class {info.load_balancer_class}: another implementation's "
            f"Service, which eipctl never touches (eipctl's class is {LOAD_BALANCER_CLASS})",
        )
    served = bool(base.recorded) or any(
        source_of(e) == ALLOCATOR
        for e in snapshot.events_about("Service", info.key.partition("/")[2], info.namespace)
    )
    try:
        request = service_request(info, serve_unclassed=served)
    except RequestError as exc:
        return _with(base, "InvalidAnnotation", f"its request cannot be read: {exc}")
    if request is None and info.load_balancer and not info.load_balancer_class:
        return _with(
            base,
            "Unclassed",
            "it is a type: LoadBalancer Service with no spec.loadBalancerClass and no "
            "external-ip annotation; eipctl serves such Services only when the allocator runs "
            "with --serve-unclassed-load-balancers, and no allocator Event on it shows that "
            f"it does. Set spec.loadBalancerClass: {LOAD_BALANCER_CLASS} (on a new Service: "
            "the field is immutable) or annotate it external-ip: auto",
        )
    if request is None:
        return _with(
            base,
            "NotAsked",
            "it asks eipctl for nothing: no external-ip annotation, and it is not a "
            f"LoadBalancer of class {LOAD_BALANCER_CLASS}",
        )
    book = _book(snapshot, served)
    ns_labels = snapshot.namespace_labels.get(info.namespace, {})
    plan = book.plan(info.key, info, ns_labels)
    verdicts = _verdicts(snapshot, info, request, ns_labels)
    if plan.problems and not plan.acquire:
        first, *more = plan.problems
        text = _problem_text(first.reason, first.message, verdicts)
        text += "".join(f"; and {p.reason}: {p.message}" for p in more)
        return _with(base, first.reason, text, verdicts)
    if plan.deferred:
        return _with(base, "Waiting", f"it waits: {plan.deferred}", verdicts)
    if plan.acquire:
        acquire = plan.acquire[0]
        return _with(
            base,
            "NotYetAllocated",
            f"nothing stops it: the allocator would give it {acquire.ip} from pool "
            f"{acquire.pool}, "
            "but has not (yet). If this lasts, no allocator leads: kubectl -n eipctl-system get "
            "lease eipctl-allocator, and the allocator's logs",
            verdicts,
        )
    return _with(base, "NoIP", "it holds no IP and the allocator would do nothing", verdicts)


def _book(snapshot: Snapshot, serve_unclassed: bool) -> AllocationBook:
    book = AllocationBook(serve_unclassed=serve_unclassed)
    book.set_pools(pool_infos(snapshot.pools))
    for obj in snapshot.claims:
        claim = claim_info(obj)
        if claim is not None:
            book.claim_seen(claim)
    for obj in snapshot.services:
        if not meta_of(obj).get("deletionTimestamp"):
            book.service_seen(service_info(obj))
    return book


def _verdicts(
    snapshot: Snapshot, info: ServiceInfo, request: Request, ns_labels: Mapping[str, str]
) -> tuple[PoolVerdict, ...]:
    pools = pool_infos(snapshot.pools)
    if request.ips:
        out: list[PoolVerdict] = []
        for ip in request.ips:
            out += weigh(
                pools,
                info,
                request,
                namespace_labels=ns_labels,
                family=ip.version,
                literal=ip,
            )
        return tuple(out)
    family = request.families[0] if request.families else ANY_FAMILY
    return tuple(weigh(pools, info, request, namespace_labels=ns_labels, family=family))


def _problem_text(reason: str, message: str, verdicts: tuple[PoolVerdict, ...]) -> str:
    admitting = [v.pool for v in verdicts if v.admits]
    if reason in ("NoPool", "IPNotInPool"):
        # the allocator's message already names each pool's refusal (`core.admission`)
        if not verdicts:
            return f"{message}: create one"
        cause = one_cause(verdicts)
        lead = message
        if cause == DELETING:
            return f"{lead}. {WAYS_OUT.capitalize()}; or create another pool"
        if cause:
            return f"{lead}. The one cause: {CAUSES[cause]}"
        return lead
    if reason == "PoolExhausted":
        return (
            f"{message}: every address of {', '.join(admitting) or 'its pools'} is taken. "
            "Free one (release a Service's IP) or widen the pool (spec.cidr / spec.ranges)"
        )
    return message


# --- the scheduler's and the controller's half ------------------------------------------------
def _placement(
    snapshot: Snapshot, base: Explanation, obj: Obj, ips: tuple[IPAddress, ...], now: datetime
) -> Explanation:
    claims = [(ip, snapshot.claim(claim_name_for(ip))) for ip in ips]
    bound = [
        f"{ip} on {bound_node_of(c)}"
        for ip, c in claims
        if c is not None and phase_of(c) == "Bound" and bound_node_of(c)
    ]
    if bound:
        text = f"it has its IP: {', '.join(bound)} (Bound)"
        if base.notes:
            text += ". " + " ".join(base.notes)
        return _with(base, HAS_IP, text)
    ip, claim = claims[0]
    if claim is None:
        return _with(
            base,
            "ExternalIPRefused",
            f"{ip} is set by hand on the Service and has no IpClaim: eipctl announces a hand-set "
            "IP only inside a pool with allowManual: true (CVE-2020-8554); add it to such a pool",
        )
    conditions = readable_conditions((claim.get("status") or {}).get("conditions"))
    conflict = find_condition(conditions, CONDITION_CONFLICT)
    scheduled = find_condition(conditions, CONDITION_SCHEDULED)
    if conflict is not None and conflict.is_true:
        return _with(
            base,
            conflict.reason or "Conflict",
            f"{ip} is placed on {node_of(claim)}, whose controller does not add it: "
            f"{conflict.message}",
        )
    if scheduled is not None and not scheduled.is_true:
        if scheduled.reason == REASON_NO_LOCAL_ENDPOINT:
            where = endpoints_text(snapshot, obj, ip, now)
            return _with(
                base,
                REASON_NO_LOCAL_ENDPOINT,
                f"{ip} waits unplaced: externalTrafficPolicy is Local and no live node runs a "
                f"ready endpoint of it ({scheduled.message}). {where}",
                details=(where,),
            )
        nodes = why_not_here(snapshot, claim, now)
        return _with(
            base,
            scheduled.reason or REASON_NO_LIVE_NODE,
            f"{ip} waits unplaced: no live node may hold it ({scheduled.message}). Nodes: "
            + "; ".join(nodes),
            details=tuple(nodes),
        )
    node = node_of(claim)
    if node:
        state = [n for n in why_not_here(snapshot, claim, now) if n.startswith(f"{node}:")]
        return _with(
            base,
            "NotBound",
            f"{ip} is placed on {node} ({phase_of(claim)}), whose controller has not reported "
            f"it on its link yet. {'; '.join(state) or f'{node} has no IpNode'}",
        )
    return _with(
        base,
        "NotPlaced",
        f"{ip} has a claim no scheduler has placed yet: if this lasts, no scheduler leads "
        "(kubectl -n eipctl-system get lease eipctl-scheduler)",
    )


def _with(
    base: Explanation,
    cause: str,
    reason: str,
    pools: tuple[PoolVerdict, ...] = (),
    details: tuple[str, ...] = (),
) -> Explanation:
    return Explanation(
        base.service, cause, reason, base.ips, pools, details, base.recorded, base.notes
    )
