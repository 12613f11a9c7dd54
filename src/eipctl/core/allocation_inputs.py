"""What the allocator decides from: the request in a Service's annotations, and its views of
Services, pools and claims.

Pure value types and parsing, no state: `parse_request` reads the annotations
(``external-ip: auto`` or a comma list of literal IPs, at most one per family;
``external-ip-pool: A[,B]``; ``external-ip-sharing-key: K``), and the ``*Info`` classes are the
parts of Kubernetes objects the decisions in `core.allocation_planner` look at
(`allocator/views.py` fills them from the API's dicts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from eipctl.core.naming import (
    ANNOTATION_EXTERNAL_IP,
    ANNOTATION_POOL,
    ANNOTATION_SHARING_KEY,
    AUTO,
    parse_ip,
)
from eipctl.core.pool import IPAddress, Pool

ANY_FAMILY = 0
"""A slot that any family may fill (Service without ``spec.ipFamilies``)."""


class LabelMatcher(Protocol):
    """A label selector (`core.resources` provides one); None in a pool means "everyone"."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...


class RequestError(ValueError):
    """The Service's annotations cannot be understood; the message says why, for an Event."""


@dataclass(frozen=True)
class Request:
    """What a Service asks for. ``ips`` empty means ``auto`` for ``families``."""

    ips: tuple[IPAddress, ...] = ()
    families: tuple[int, ...] = (ANY_FAMILY,)
    pools: tuple[str, ...] = ()
    sharing_key: str = ""

    @property
    def auto(self) -> bool:
        return not self.ips


@dataclass(frozen=True)
class ServiceInfo:
    """The parts of a Service the allocator reads; ``recorded`` = its allocated-ips list."""

    key: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ip_families: tuple[int, ...] = ()
    recorded: tuple[IPAddress, ...] = ()


@dataclass(frozen=True)
class PoolInfo:
    """An IpClaimPool as the allocator sees it; ``pool`` is None when the spec is bad."""

    name: str
    pool: Pool | None
    auto_assign: bool = True
    service_selector: LabelMatcher | None = None
    namespace_selector: LabelMatcher | None = None
    deleting: bool = False
    problem: str = ""
    """Why the pool is not Ready ("" when it is): bad spec, overlap with an older pool."""
    prefix_length: int | None = None

    @property
    def ready(self) -> bool:
        return self.pool is not None and not self.problem

    def admits(self, service: ServiceInfo, namespace_labels: Mapping[str, str]) -> bool:
        """Whether the selectors let ``service`` draw from this pool."""
        if self.service_selector is not None and not self.service_selector.matches(service.labels):
            return False
        return self.namespace_selector is None or self.namespace_selector.matches(namespace_labels)


@dataclass(frozen=True)
class ClaimInfo:
    """An IpClaim: ``owned`` when the allocator made it (else the scheduler, for hand-set IPs)."""

    ip: IPAddress
    pool: str
    services: tuple[str, ...] = ()
    owned: bool = True
    sharing_key: str = ""


def parse_request(annotations: Mapping[str, str], ip_families: Iterable[int]) -> Request | None:
    """The request in a Service's annotations; None when it asks for nothing.

    Raises `RequestError` for a value the allocator cannot act on.
    """
    raw = annotations.get(ANNOTATION_EXTERNAL_IP)
    if raw is None:
        return None
    value = raw.strip()
    pools = tuple(p.strip() for p in annotations.get(ANNOTATION_POOL, "").split(",") if p.strip())
    key = annotations.get(ANNOTATION_SHARING_KEY, "").strip()
    if value.lower() == AUTO:
        families = tuple(dict.fromkeys(ip_families)) or (ANY_FAMILY,)
        return Request(families=families, pools=pools, sharing_key=key)
    ips: list[IPAddress] = []
    for part in (p.strip() for p in value.split(",")):
        try:
            ip = parse_ip(part)
        except ValueError:
            raise RequestError(
                f"{ANNOTATION_EXTERNAL_IP}={raw!r}: expected 'auto' or IP addresses, "
                f"{part!r} is neither"
            ) from None
        if any(other.version == ip.version for other in ips):
            raise RequestError(f"{ANNOTATION_EXTERNAL_IP}={raw!r}: at most one IP per family")
        ips.append(ip)
    return Request(
        ips=tuple(ips), families=tuple(ip.version for ip in ips), pools=pools, sharing_key=key
    )


def ip_order(ip: IPAddress) -> tuple[int, int]:
    """Sort key: IPv4 before IPv6, then numerically (the order plans and listings use)."""
    return ip.version, int(ip)
