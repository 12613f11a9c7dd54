"""Helpers for the allocation tests: pools, Services and books in one line each.

Holds no tests (named to sit with the tests that import it).
"""

from __future__ import annotations

from ipaddress import ip_address

from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo, ServiceInfo
from eipctl.core.allocation_plan import Acquire
from eipctl.core.pool import Pool


def ip(text: str):  # type: ignore[no-untyped-def]
    return ip_address(text)


def pool(name: str, cidr: str, **kw: object) -> PoolInfo:
    ranges = kw.pop("ranges", None)
    return PoolInfo(name=name, pool=Pool.parse(name, cidr, ranges), **kw)  # type: ignore[arg-type]


def svc(name: str = "web", annotations: dict[str, str] | None = None, **kw: object) -> ServiceInfo:
    return ServiceInfo(
        key=f"default/{name}",
        namespace="default",
        annotations={"external-ip": "auto"} if annotations is None else annotations,
        **kw,  # type: ignore[arg-type]
    )


def book_with(*pools: PoolInfo, purge: bool = False) -> AllocationBook:
    book = AllocationBook(purge_on_pool_delete=purge)
    book.set_pools(pools)
    return book


def settle_all(book: AllocationBook, plan_key: str, acquires: tuple[Acquire, ...]) -> None:
    """What the process does after the creates succeed."""
    for acq in acquires:
        old = book.claim(acq.ip)
        services = (*old.services, plan_key) if old else (plan_key,)
        book.settle(acq.ip, plan_key, ClaimInfo(acq.ip, acq.pool, services))
