"""The scheduler's picture of pools and nodes, built from the informer caches.

A pool is read field by field and tolerantly: a pool whose cidr is broken still has a
nodeSelector worth honouring, and a pool whose nodeSelector is broken admits no node at all
(announcing its IPs on the wrong L2 segment would be worse than not announcing them). Its
``spec.placement`` is read the same way (the values `core.resources.IpClaimPoolSpec` takes):
one that cannot be read leaves the pool's claims to the scheduler's ``--policy``, as ``""``
does, without touching the rest of the pool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import structlog

from eipctl.core.eligibility import Exclusion, NodeFacts, exclusion, facts_of
from eipctl.core.fields import Obj, ResourceError, get_bool, get_int, get_str, name_of
from eipctl.core.naming import IPAddress
from eipctl.core.placement import Cluster, Policies, Policy, Reason
from eipctl.core.pool import Pool, PoolError
from eipctl.core.resources import POOL_PLACEMENTS
from eipctl.core.selectors import LabelSelector

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class PoolView:
    """What the scheduler needs of an IpClaimPool."""

    name: str
    pool: Pool | None
    """Address math; None when the cidr/ranges/exclude are invalid."""
    allow_manual: bool
    prefix_length: int | None
    node_selector: LabelSelector | None
    selector_broken: bool = False
    placement: Policy | None = None
    """``spec.placement``; None: ``""``, absent or unreadable (the scheduler's --policy)."""

    def admits_node(self, labels: Mapping[str, str]) -> bool:
        if self.selector_broken:
            return False
        return self.node_selector is None or self.node_selector.matches(labels)

    def prefix_for(self, ip: IPAddress) -> int:
        return self.prefix_length or ip.max_prefixlen


def pool_view(obj: Obj) -> PoolView:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    pool: Pool | None = None
    cidr = spec.get("cidr")
    if isinstance(cidr, str):
        with contextlib.suppress(PoolError, TypeError):
            pool = Pool.parse(name, cidr, spec.get("ranges"), spec.get("exclude"))
    try:
        allow_manual = get_bool(spec, "allowManual", "spec", default=False)
    except ResourceError:
        allow_manual = False
    try:
        prefix_length = get_int(spec, "prefixLength", "spec", minimum=1, maximum=128)
    except ResourceError:
        prefix_length = None
    selector: LabelSelector | None = None
    broken = False
    raw = spec.get("nodeSelector")
    if raw is not None:
        try:
            selector = LabelSelector.from_dict(raw, "spec.nodeSelector")
        except (ResourceError, AttributeError) as exc:
            broken = True
            log.warning("pool.node_selector_invalid", pool=name, error=str(exc))
    return PoolView(
        name, pool, allow_manual, prefix_length, selector, broken, _placement(name, spec)
    )


def _placement(name: str, spec: Mapping[str, object]) -> Policy | None:
    try:
        value = get_str(spec, "placement", "spec")
    except ResourceError as exc:
        log.warning("pool.placement_invalid", pool=name, error=str(exc))
        return None
    if value not in POOL_PLACEMENTS:
        log.warning("pool.placement_invalid", pool=name, error=f"unknown placement {value!r}")
        return None
    return Policy(value) if value else None


def policies_for(views: Mapping[str, PoolView], default: Policy) -> Policies:
    """Each pool's placement policy, ``default`` for the rest (`core.placement.Policies`)."""
    return Policies(
        default,
        {name: view.placement for name, view in views.items() if view.placement is not None},
    )


class PoolViews:
    """Pool views memoized by resourceVersion (pools change rarely, placement runs often)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, PoolView]] = {}

    def build(self, objs: Iterable[Obj]) -> dict[str, PoolView]:
        """The views of the pools whose addresses live on node links. Cloud pools
        (``spec.provider``) are `eipctl nodeips`'s alone, as for the allocator: a Service
        naming one of their addresses gets no claim from the scheduler."""
        views: dict[str, PoolView] = {}
        for obj in objs:
            if (obj.get("spec") or {}).get("provider"):
                continue
            meta = obj.get("metadata") or {}
            name, rv = str(meta.get("name") or ""), str(meta.get("resourceVersion") or "")
            memo = self._memo.get(name)
            if memo is None or memo[0] != rv:
                memo = (rv, pool_view(obj))
                self._memo[name] = memo
            views[name] = memo[1]
        for gone in set(self._memo) - set(views):
            del self._memo[gone]
        return views

    def manual_pool_for(self, views: Mapping[str, PoolView], ip: IPAddress) -> PoolView | None:
        """The allowManual pool holding ``ip`` (lowest name if pools overlap), or None."""
        for name in sorted(views):
            view = views[name]
            if view.allow_manual and view.pool is not None and view.pool.contains(ip):
                return view
        return None


EXCLUSION_REASONS: Mapping[Exclusion, Reason] = {
    Exclusion.EXCLUDED: Reason.NODE_EXCLUDED,
    Exclusion.TAINTED: Reason.NODE_TAINTED,
    Exclusion.CORDONED: Reason.NODE_CORDONED,
}


def exclusions(
    ipnodes: Iterable[Obj], kube_nodes: Iterable[Obj], *, cordoned_excludes: bool
) -> dict[str, Exclusion]:
    """IpNode name -> why it may hold nothing, for the excluded ones only.

    Judged on the core v1 Node of the same name when the cache has it (labels, taints,
    cordon: seen as soon as they change), else on the IpNode's labels (copied from the Node
    by its controller every --resync-interval: the exclusion label only)."""
    by_name = {name_of(n): n for n in kube_nodes}
    out: dict[str, Exclusion] = {}
    for ipnode in ipnodes:
        name = name_of(ipnode)
        node = by_name.get(name)
        facts = facts_of(node) if node is not None else NodeFacts(labels=_labels(ipnode))
        why = exclusion(facts, cordoned_excludes=cordoned_excludes)
        if why is not None:
            out[name] = why
    return out


def _labels(obj: Obj) -> Mapping[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def cluster_for(
    nodes: Iterable[Obj],
    pools: Mapping[str, PoolView],
    live: frozenset[str],
    excluded: Mapping[str, Exclusion] | None = None,
    *,
    stale: frozenset[str] = frozenset(),
    held_down: frozenset[str] = frozenset(),
) -> Cluster:
    """`core.placement.Cluster` from IpNode objects, pool views, the live node names, the
    excluded nodes (`exclusions`) and the live nodes that cannot see the API."""
    labels: dict[str, Mapping[str, str]] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        labels[str(meta.get("name") or "")] = meta.get("labels") or {}
    known = frozenset(labels)
    eligible = {
        name: frozenset(n for n, node_labels in labels.items() if view.admits_node(node_labels))
        for name, view in pools.items()
        if view.node_selector is not None or view.selector_broken
    }
    out = {n: EXCLUSION_REASONS[why] for n, why in (excluded or {}).items() if n in known}
    return Cluster(
        known=known,
        live=live & known,
        eligible=eligible,
        excluded=out,
        stale=stale & known,
        held_down=held_down & known,
    )
