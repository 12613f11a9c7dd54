"""When Services may share one IP: the rule kube-proxy can actually serve.

Same non-empty ``external-ip-sharing-key`` is the request; it is granted only when the
Services' ports don't overlap (one (protocol, port) on one IP reaches one Service, so two
Services on TCP/80 of one IP means one of them is never reached) and, when either uses
``externalTrafficPolicy: Local``, both select the same Pods (traffic is only answered on nodes
with a local endpoint, so two Services with different endpoints on one IP cannot both be
answered on the node holding it). The same rule as MetalLB's, which users already know.

Pure: no state, no I/O. The key itself is compared by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable

from eipctl.core.allocation_inputs import ServiceInfo


def clash(a: ServiceInfo, b: ServiceInfo) -> str | None:
    """Why ``a`` and ``b`` cannot share one IP, for an Event; None when they can."""
    common = sorted(a.ports & b.ports)
    if common:
        used = ", ".join(f"{proto}/{port}" for proto, port in common)
        return f"{used} used by both {a.key} and {b.key}"
    if (a.local_traffic or b.local_traffic) and a.selector != b.selector:
        return (
            f"externalTrafficPolicy Local needs the same selector, and {a.key} and {b.key} "
            "select different Pods"
        )
    return None


def first_clash(service: ServiceInfo, holders: Iterable[ServiceInfo]) -> str | None:
    """The first reason ``service`` cannot join ``holders`` (others than itself), or None."""
    for holder in holders:
        if holder.key != service.key:
            reason = clash(service, holder)
            if reason is not None:
                return reason
    return None


def came_first(a: ServiceInfo, b: ServiceInfo) -> bool:
    """Whether ``a`` is older than ``b``: creationTimestamp, then name (a total order)."""
    return (a.created, a.key) < (b.created, b.key)
