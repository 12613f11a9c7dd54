"""Prometheus metrics of the allocator, on the process-wide registry.

Counters move only on the leader (a standby decides nothing); the pool gauges are published
by the leader and cleared when its term ends, so summing them over replicas counts each pool
once. ``eipctl_leader`` (``LEADER``) is defined in `eipctl.kube.metrics`, labelled by
component, and shared with the scheduler; ``COMPONENT`` is the allocator's label value.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from eipctl.core.pool import IPAddress
from eipctl.metrics import REGISTRY

ALLOCATIONS = Counter(
    "eipctl_allocations",
    "IPs given to Services (claim created or shared claim joined), by pool and family.",
    ["pool", "family"],
    registry=REGISTRY,
)
RELEASES = Counter(
    "eipctl_releases",
    "IPs taken back from Services, by pool and reason.",
    ["pool", "reason"],
    registry=REGISTRY,
)
ALLOCATION_FAILURES = Counter(
    "eipctl_allocation_failures",
    "Services that could not be given an IP (counted once per problem, like its Event).",
    ["reason"],
    registry=REGISTRY,
)
ALLOCATION_SECONDS = Histogram(
    "eipctl_allocation_duration_seconds",
    "From the allocator first seeing a Service that needs an IP to the write that gives it.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
POOL_ADDRESSES = Gauge(
    "eipctl_pool_addresses",
    "Addresses of a pool by state (size, used, free); floats, as IPv6 pools can be huge.",
    ["pool", "state"],
    registry=REGISTRY,
)

COMPONENT: Final = "allocator"

# Problem reasons (Event reasons, CamelCase) -> failure label values (snake_case).
FAILURE_REASONS: Final = {
    "NoPool": "no_pool",
    "PoolExhausted": "exhausted",
    "IPInUse": "ip_in_use",
    "IPNotInPool": "ip_not_in_pool",
    "InvalidAnnotation": "invalid_annotation",
    "PortClash": "port_clash",
    "SharingRefused": "sharing_refused",
    "ServiceWriteRefused": "write_refused",
}

# Release reasons.
RELEASE_SERVICE_DELETED: Final = "service_deleted"
RELEASE_ANNOTATION_REMOVED: Final = "annotation_removed"
RELEASE_NOT_LOAD_BALANCER: Final = "not_load_balancer"
"""A LoadBalancer served without the annotation (its class) changed to another type."""
RELEASE_NOT_SERVED: Final = "not_served"
"""A LoadBalancer that asks nothing of this allocator now (no class, no annotation, and
``--serve-unclassed-load-balancers`` off)."""
RELEASE_REQUEST_CHANGED: Final = "request_changed"
"""The literal IP changed, or ``external-ip-pool`` names a pool the IP is not from."""
RELEASE_POOL_PURGED: Final = "pool_purged"
RELEASE_ORPHANED: Final = "orphaned"
"""The claim's Services were all gone when the allocator looked (e.g. deleted while down)."""


def family(ip: IPAddress) -> str:
    """The ``family`` label value: ``ipv4`` or ``ipv6`` (as in the net metrics)."""
    return f"ipv{ip.version}"


def failure_reason(problem_reason: str) -> str:
    return FAILURE_REASONS.get(problem_reason, "other")


def set_pool_addresses(pool: str, size: int, free: int) -> None:
    """Publish a pool's counts; ``used`` is what its ranges have handed out or reserved."""
    POOL_ADDRESSES.labels(pool, "size").set(float(size))
    POOL_ADDRESSES.labels(pool, "used").set(float(size - free))
    POOL_ADDRESSES.labels(pool, "free").set(float(free))


def clear_pool_addresses(pool: str) -> None:
    for state in ("size", "used", "free"):
        try:
            POOL_ADDRESSES.remove(pool, state)
        except KeyError:
            continue


def clear_all_pool_addresses() -> None:
    """At the end of a term: only the leader publishes pool counts."""
    POOL_ADDRESSES.clear()
