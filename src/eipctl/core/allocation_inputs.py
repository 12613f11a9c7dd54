"""What the allocator decides from: the request in a Service's annotations, and its views of
Services, pools and claims.

Pure value types and parsing, no state: `parse_request` reads the annotations
(``external-ip: auto`` or a comma list of literal IPs, at most one per family;
``external-ip-pool: A[,B]``; ``external-ip-sharing-key: K``), `service_request` adds what a
LoadBalancer Service asks for without them (``spec.loadBalancerClass``,
``spec.loadBalancerIP``), and the ``*Info`` classes are the parts of Kubernetes objects the
decisions in `core.allocation_planner` look at (`allocator/views.py` fills them from the API's
dicts).
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
    LOAD_BALANCER_CLASS,
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


Port = tuple[str, int]
"""(protocol, port) of one entry of a Service's ``spec.ports``."""


@dataclass(frozen=True)
class ServiceInfo:
    """The parts of a Service the allocator reads; ``recorded`` = its allocated-ips list.

    ``hand_set`` are the IPs the Service uses that the allocator did not give it (entries of
    ``spec.externalIPs`` and ``status.loadBalancer.ingress`` not in ``recorded``): in use,
    whoever wrote them. ``ports``, ``local_traffic`` and ``selector`` decide whether two
    Services may share one IP; ``created`` (creationTimestamp) says which came first.
    """

    key: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ip_families: tuple[int, ...] = ()
    recorded: tuple[IPAddress, ...] = ()
    service_type: str = ""
    load_balancer_class: str = ""
    load_balancer_ip: str = ""
    ports: frozenset[Port] = frozenset()
    local_traffic: bool = False
    selector: tuple[tuple[str, str], ...] = ()
    created: str = ""
    hand_set: tuple[IPAddress, ...] = ()

    @property
    def load_balancer(self) -> bool:
        return self.service_type == "LoadBalancer"

    @property
    def foreign_class(self) -> bool:
        """A LoadBalancer of another implementation's class: never touched."""
        return self.load_balancer and self.load_balancer_class not in ("", LOAD_BALANCER_CLASS)


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
    pools = _pools(annotations)
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


def service_request(service: ServiceInfo, *, serve_unclassed: bool) -> Request | None:
    """What ``service`` asks for; None when it asks nothing of eipctl.

    The annotation wins; a LoadBalancer of eipctl's class (or without a class, when
    ``serve_unclassed``) asks for ``auto`` without it; ``spec.loadBalancerIP`` turns either
    ``auto`` into that literal IP. A Service of another class asks for nothing, annotated or
    not (`ServiceInfo.foreign_class`). Raises `RequestError` for a value it cannot act on.
    """
    if service.foreign_class:
        return None
    request = parse_request(service.annotations, service.ip_families)
    if request is None and service.load_balancer:
        ours = service.load_balancer_class == LOAD_BALANCER_CLASS
        if ours or (serve_unclassed and not service.load_balancer_class):
            request = Request(
                families=tuple(dict.fromkeys(service.ip_families)) or (ANY_FAMILY,),
                pools=_pools(service.annotations),
                sharing_key=service.annotations.get(ANNOTATION_SHARING_KEY, "").strip(),
            )
    wanted = service.load_balancer_ip.strip()
    if request is None or not request.auto or not wanted or not service.load_balancer:
        return request
    try:
        ip = parse_ip(wanted)
    except ValueError:
        raise RequestError(f"spec.loadBalancerIP={wanted!r} is not an IP address") from None
    return Request(
        ips=(ip,), families=(ip.version,), pools=request.pools, sharing_key=request.sharing_key
    )


def _pools(annotations: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(p.strip() for p in annotations.get(ANNOTATION_POOL, "").split(",") if p.strip())


def ip_order(ip: IPAddress) -> tuple[int, int]:
    """Sort key: IPv4 before IPv6, then numerically (the order plans and listings use)."""
    return ip.version, int(ip)
