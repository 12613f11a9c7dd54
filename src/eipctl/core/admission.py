"""Which pools a Service's request was weighed against, and why each one refuses it.

The allocator's candidate rule (`core.allocation_planner`) says yes or no; this says *which*
condition said no, one per pool, in the order the rule tests them, so the allocator's
``NoPool`` / ``IPNotInPool`` Event and ``kubectl eipctl why`` name the real cause ("pool
a-team's namespaceSelector team=a does not match namespace shop's labels (none)") instead of
"no pool admits it". Both read these words, so they agree. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    LabelMatcher,
    PoolInfo,
    Request,
    ServiceInfo,
)
from eipctl.core.naming import POOL_FINALIZER
from eipctl.core.pool import IPAddress
from eipctl.core.selectors import LabelSelector

ADMITS = "Admits"
MISSING = "NotFound"
NOT_READY = "NotReady"
DELETING = "Deleting"
NOT_AUTO = "NoAutoAssign"
FAMILY = "Family"
NOT_IN_POOL = "NotInPool"
SERVICE_SELECTOR = "ServiceSelector"
NAMESPACE_SELECTOR = "NamespaceSelector"

NO_POOL_AT_ALL = "there is no IpClaimPool at all"


@dataclass(frozen=True)
class PoolVerdict:
    """One pool weighed for one slot of a request: ``kind`` is ADMITS or why not."""

    pool: str
    kind: str
    detail: str

    @property
    def admits(self) -> bool:
        return self.kind == ADMITS


def selector_text(selector: LabelMatcher | None) -> str:
    """``a=b, c In (x,y)``; ``{}`` for the empty selector."""
    if selector is None:
        return "(none)"
    if not isinstance(selector, LabelSelector):
        return repr(selector)
    parts = [f"{k}={v}" for k, v in sorted(selector.match_labels.items())]
    for r in selector.match_expressions:
        values = f" ({','.join(r.values)})" if r.values else ""
        parts.append(f"{r.key} {r.operator}{values}")
    return ", ".join(parts) or "{}"


def labels_text(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"


def weigh(
    pools: Sequence[PoolInfo],
    service: ServiceInfo,
    request: Request,
    *,
    namespace_labels: Mapping[str, str],
    family: int,
    literal: IPAddress | None = None,
) -> list[PoolVerdict]:
    """A verdict for each pool the request could draw from, for one ``family`` slot (or one
    literal IP): the named pools in annotation order (a missing one too), else every pool by
    name."""
    infos = {p.name: p for p in pools}
    names = list(request.pools) if request.pools else sorted(infos)
    verdicts = []
    for name in names:
        info = infos.get(name)
        if info is None:
            verdicts.append(PoolVerdict(name, MISSING, f"pool {name} does not exist"))
            continue
        verdicts.append(
            verdict(
                info,
                service,
                request,
                namespace_labels=namespace_labels,
                family=family,
                literal=literal,
            )
        )
    return verdicts


def verdict(
    info: PoolInfo,
    service: ServiceInfo,
    request: Request,
    *,
    namespace_labels: Mapping[str, str],
    family: int = ANY_FAMILY,
    literal: IPAddress | None = None,
) -> PoolVerdict:
    """Whether ``info`` admits ``service`` for one slot, and if not the first check that fails
    (in the order `core.allocation_planner` tests them)."""
    name = info.name
    if info.deleting:
        return PoolVerdict(
            name, DELETING, f"pool {name} is being deleted (finalizer {POOL_FINALIZER})"
        )
    if not info.ready or info.pool is None:
        return PoolVerdict(name, NOT_READY, f"pool {name} is not Ready: {info.problem}")
    if literal is None and not request.pools and not info.auto_assign:
        return PoolVerdict(
            name, NOT_AUTO, f"pool {name} has autoAssign: false (only a request naming it draws)"
        )
    version = info.pool.version
    if family not in (ANY_FAMILY, version):
        return PoolVerdict(
            name, FAMILY, f"pool {name} gives IPv{version}, the Service wants IPv{family}"
        )
    if literal is not None and not info.pool.contains(literal):
        return PoolVerdict(
            name, NOT_IN_POOL, f"pool {name} ({info.pool.network}) does not contain {literal}"
        )
    services = info.service_selector
    if services is not None and not services.matches(service.labels):
        return PoolVerdict(
            name,
            SERVICE_SELECTOR,
            f"pool {name}'s serviceSelector {selector_text(services)} does not match the "
            f"Service's labels ({labels_text(service.labels)})",
        )
    namespaces = info.namespace_selector
    if namespaces is not None and not namespaces.matches(namespace_labels):
        return PoolVerdict(
            name,
            NAMESPACE_SELECTOR,
            f"pool {name}'s namespaceSelector {selector_text(namespaces)} does not match "
            f"namespace {service.namespace}'s labels ({labels_text(namespace_labels)})",
        )
    return PoolVerdict(name, ADMITS, f"pool {name} admits it")


CAUSES = {
    MISSING: "the pool it names does not exist",
    NOT_READY: "no pool it may use is Ready",
    DELETING: "every pool it may use is being deleted",
    NOT_AUTO: "no pool has autoAssign: true (name one with external-ip-pool)",
    FAMILY: "no pool gives the IP family it wants",
    NOT_IN_POOL: "the IP it asks for is in no pool",
    SERVICE_SELECTOR: "every pool's serviceSelector excludes the Service's labels",
    NAMESPACE_SELECTOR: "every pool's namespaceSelector excludes its namespace",
}
"""The wording of a cause every refusing pool shares."""


def one_cause(verdicts: Sequence[PoolVerdict]) -> str:
    """The cause every refusing pool shares ("" when they differ or none refuses)."""
    kinds = {v.kind for v in verdicts if not v.admits}
    return kinds.pop() if len(kinds) == 1 else ""


def refusals(verdicts: Sequence[PoolVerdict]) -> str:
    """Each refusing pool's reason, for an Event: ``pool a is not Ready: ...; pool b ...``."""
    if not verdicts:
        return NO_POOL_AT_ALL
    return "; ".join(v.detail for v in verdicts if not v.admits)
