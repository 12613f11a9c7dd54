"""Throughput of core.pool on big pools; prints a table, asserts nothing about timing.

Run: python benchmarks/bench_pool.py [--seed N]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from functools import partial
from ipaddress import IPv4Address, IPv6Address

from eipctl.core.pool import IPAddress, Pool, PoolAllocator, find_overlaps

V6_BASE = int(IPv6Address("2001:db8::"))
Row = tuple[str, int, float]


def timed(name: str, ops: int, work: Callable[[], object]) -> Row:
    start = time.perf_counter()
    work()
    return name, ops, time.perf_counter() - start


def allocate_n(alloc: PoolAllocator, n: int) -> list[IPAddress]:
    got = []
    for _ in range(n):
        ip = alloc.allocate()
        if ip is None:
            break
        got.append(ip)
    return got


def churn(alloc: PoolAllocator, rng: random.Random, rounds: int) -> None:
    """Release a random used address, then allocate: the allocate refills that hole."""
    used = list(alloc.used_addresses())
    for _ in range(rounds):
        i = rng.randrange(len(used))
        alloc.release(used[i])
        ip = alloc.allocate()
        assert ip is not None
        used[i] = ip


def v4_full(rng: random.Random, scattered: bool) -> tuple[PoolAllocator, list[IPv4Address], float]:
    """A /16 with 99% of its addresses in use, scattered at random or packed at the bottom."""
    pool = Pool.parse("v4", "10.0.0.0/16")
    first, last = pool.span[0]
    everything = list(range(first, last + 1))
    keep = int(len(everything) * 0.99)
    chosen = rng.sample(everything, keep) if scattered else everything[:keep]
    used = [IPv4Address(n) for n in chosen]
    rng.shuffle(used)  # claims arrive from the API in no particular order
    start = time.perf_counter()
    alloc = PoolAllocator(pool, used)
    return alloc, used, time.perf_counter() - start


def v6_scattered(rng: random.Random, count: int) -> tuple[PoolAllocator, float]:
    """A /64 with ``count`` used addresses among its lowest 2**18, so allocations hit them."""
    pool = Pool.parse("v6", "2001:db8::/64")
    used = [IPv6Address(V6_BASE + 1 + n) for n in rng.sample(range(2**18), count)]
    start = time.perf_counter()
    alloc = PoolAllocator(pool, used)
    return alloc, time.perf_counter() - start


def v4_rows(rng: random.Random, scattered: bool) -> list[Row]:
    label = "scattered" if scattered else "packed low"
    alloc, used, build = v4_full(rng, scattered)
    free = alloc.free
    rows = [
        (f"v4 /16 99% {label}: rebuild from claims", len(used), build),
        timed(f"v4 /16 99% {label}: allocate to full", free, partial(allocate_n, alloc, free)),
    ]
    for ip in rng.sample(list(alloc.used_addresses()), free):
        alloc.release(ip)
    rows.append(
        timed(f"v4 /16 99% {label}: release+allocate", 10_000, partial(churn, alloc, rng, 10_000))
    )
    return rows


def run(seed: int) -> list[Row]:
    rng = random.Random(seed)
    rows = v4_rows(rng, scattered=True) + v4_rows(rng, scattered=False)

    empty = PoolAllocator(Pool.parse("v6", "2001:db8::/64"))
    rows.append(timed("v6 /64 empty: allocate", 10_000, lambda: allocate_n(empty, 10_000)))

    alloc6, build6 = v6_scattered(rng, 100_000)
    rows.append(("v6 /64 100k scattered used: rebuild from claims", 100_000, build6))
    rows.append(
        timed("v6 /64 100k scattered used: allocate", 10_000, lambda: allocate_n(alloc6, 10_000))
    )
    rows.append(
        timed("v6 /64 110k used: release+allocate", 10_000, lambda: churn(alloc6, rng, 10_000))
    )

    excludes = [str(IPv6Address(V6_BASE + rng.randrange(2**64))) for _ in range(1_000)]
    rows.append(
        timed(
            "v6 /64 parse with 1,000 excludes",
            1,
            lambda: Pool.parse("x", "2001:db8::/64", None, excludes),
        )
    )
    pools = [Pool.parse(f"p{i}", f"10.{i // 256}.{i % 256}.0/24") for i in range(200)]
    rows.append(
        timed("find_overlaps over 200 pools (pairs)", 200 * 199 // 2, lambda: find_overlaps(pools))
    )
    return rows


def print_table(rows: list[Row]) -> None:
    width = max(len(name) for name, _, _ in rows)
    print(f"{'scenario':<{width}}  {'ops':>8}  {'seconds':>8}  {'ops/s':>12}  {'us/op':>8}")
    for name, ops, seconds in rows:
        rate = ops / seconds if seconds else float("inf")
        print(f"{name:<{width}}  {ops:>8,}  {seconds:>8.4f}  {rate:>12,.0f}  {1e6 / rate:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=2026)
    print_table(run(parser.parse_args().seed))


if __name__ == "__main__":
    main()
