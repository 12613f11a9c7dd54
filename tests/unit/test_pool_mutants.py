"""core/pool.py: errors name the pool, the field and the problem exactly; `is_used` at the
edges (docs/testing.md, "Mutation")."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.core.pool import Pool, PoolAllocator, PoolError


def allocator() -> PoolAllocator:
    return PoolAllocator(Pool.parse("p", "192.0.2.0/29"), ["192.0.2.2"])


@pytest.mark.parametrize("method", ["contains", "release", "is_used", "reserve"])
def test_a_value_that_is_no_ip_names_the_pool(method: str) -> None:
    target: Any = allocator().pool if method == "contains" else allocator()
    with pytest.raises(PoolError) as caught:
        getattr(target, method)(5)
    assert str(caught.value) == "pool 'p': ip: expected an IP address string, got 5"
    assert (caught.value.pool, caught.value.field) == ("p", "ip")


def test_is_used_for_the_other_family_and_above_every_used_address() -> None:
    pool = allocator()
    assert pool.is_used("192.0.2.2")
    assert not pool.is_used("192.0.2.6")  # above every used address
    assert not pool.is_used("192.0.2.1")
    assert not pool.is_used("2001:db8::2")


def test_reserving_an_address_the_pool_cannot_give_says_why() -> None:
    pool = allocator()
    for ip, why in [
        ("2001:db8::1", "2001:db8::1 is not IPv4"),
        ("198.51.100.1", "198.51.100.1 is outside the pool or excluded from it"),
    ]:
        with pytest.raises(PoolError) as caught:
            pool.reserve(ip)
        assert str(caught.value) == f"pool 'p': ip: {why}"


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        (["ab"], "pool 'p': spec.ranges[0]: expected [first, last], got 'ab'"),
        ([5], "pool 'p': spec.ranges[0]: expected [first, last], got 5"),
        (
            [["192.0.2.9", "192.0.2.3"]],
            "pool 'p': spec.ranges[0]: first 192.0.2.9 is above last 192.0.2.3",
        ),
    ],
)
def test_bad_ranges_are_named(ranges: Any, message: str) -> None:
    with pytest.raises(PoolError) as caught:
        Pool.parse("p", "192.0.2.0/28", ranges)
    assert str(caught.value) == message


def test_an_address_of_the_other_family_is_never_in_the_pool() -> None:
    """Guard operators: ``::c000:201`` has the integer value of 192.0.2.1, inside an IPv4
    pool's span; the family decides first. ``in`` answers as `contains`, and False for
    what is no address."""
    pool = Pool.parse("p", "192.0.2.0/24")
    assert pool.contains("192.0.2.1") and "192.0.2.1" in pool
    assert not pool.contains("::c000:201") and "::c000:201" not in pool
    assert "198.51.100.1" not in pool
    assert 3232235777 not in pool  # type: ignore[operator]
