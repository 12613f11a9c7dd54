"""Pool parsing, membership, lowest-free allocation and overlap, for IPv4 and IPv6.

The property tests compare against a brute-force model that enumerates small pools
(v4 /24../32, v6 /120../128) with plain sets and `ipaddress` membership.
"""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.pool import (
    IPAddress,
    IPNetwork,
    Overlap,
    Pool,
    PoolAllocator,
    PoolError,
    find_overlaps,
)

# ---------------------------------------------------------------- parsing tables


@pytest.mark.parametrize(
    ("cidr", "ranges", "exclude", "size", "first", "last"),
    [
        ("192.0.2.0/24", None, None, 254, "192.0.2.1", "192.0.2.254"),
        ("192.0.2.0/24", [], [], 254, "192.0.2.1", "192.0.2.254"),
        ("192.0.2.0/31", None, None, 2, "192.0.2.0", "192.0.2.1"),
        ("192.0.2.7/32", None, None, 1, "192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", None, None, 1, "192.0.2.7", "192.0.2.7"),
        ("192.0.2.0/30", None, None, 2, "192.0.2.1", "192.0.2.2"),
        ("2001:db8::/64", None, None, 2**64 - 1, "2001:db8::1", "2001:db8::ffff:ffff:ffff:ffff"),
        ("2001:db8::/127", None, None, 2, "2001:db8::", "2001:db8::1"),
        ("2001:db8::5/128", None, None, 1, "2001:db8::5", "2001:db8::5"),
        # explicit ranges are taken literally, overlapping ones merged
        ("192.0.2.0/24", [["192.0.2.0", "192.0.2.9"]], None, 10, "192.0.2.0", "192.0.2.9"),
        (
            "192.0.2.0/24",
            [["192.0.2.20", "192.0.2.29"], ["192.0.2.10", "192.0.2.24"]],
            None,
            20,
            "192.0.2.10",
            "192.0.2.29",
        ),
        ("192.0.2.0/24", None, ["192.0.2.1", "192.0.2.128/25"], 126, "192.0.2.2", "192.0.2.127"),
        # an exclude larger than the cidr clips to it
        ("192.0.2.0/28", None, ["192.0.2.0/24"], 0, None, None),
        ("2001:db8::/64", None, ["2001:db8::8000:0:0:0/65"], 2**63 - 1, "2001:db8::1", None),
    ],
)
def test_parse_good(
    cidr: str,
    ranges: list[list[str]] | None,
    exclude: list[str] | None,
    size: int,
    first: str | None,
    last: str | None,
) -> None:
    pool = Pool.parse("p", cidr, ranges, exclude)
    assert pool.size == size
    if first is not None:
        assert pool.ranges[0][0] == ipaddress.ip_address(first)
    if last is not None:
        assert pool.ranges[-1][1] == ipaddress.ip_address(last)
    if size == 0:
        assert pool.ranges == ()


@pytest.mark.parametrize(
    ("cidr", "ranges", "exclude", "field", "reason"),
    [
        ("192.0.2.0/33", None, None, "spec.cidr", "malformed CIDR"),
        ("not-a-cidr", None, None, "spec.cidr", "malformed CIDR"),
        ("", None, None, "spec.cidr", "malformed CIDR"),
        (None, None, None, "spec.cidr", "expected a CIDR string"),
        ("192.0.2.1/24", None, None, "spec.cidr", "host bits set (did you mean 192.0.2.0/24?)"),
        ("2001:db8::1/64", None, None, "spec.cidr", "host bits set"),
        ("192.0.2.0/24", [["192.0.2.9", "192.0.2.3"]], None, "spec.ranges[0]", "is above last"),
        (
            "192.0.2.0/24",
            [["192.0.2.1", "192.0.2.2"], ["192.0.2.250", "192.0.3.1"]],
            None,
            "spec.ranges[1]",
            "192.0.3.1 is outside cidr",
        ),
        ("192.0.2.0/24", [["2001:db8::1", "2001:db8::2"]], None, "spec.ranges[0]", "is IPv6"),
        ("192.0.2.0/24", [["192.0.2.1"]], None, "spec.ranges[0]", "expected [first, last]"),
        ("192.0.2.0/24", ["192.0.2.1-192.0.2.5"], None, "spec.ranges[0]", "expected [first"),
        ("192.0.2.0/24", [["192.0.2.x", "192.0.2.5"]], None, "spec.ranges[0]", "malformed IP"),
        ("192.0.2.0/24", "192.0.2.1", None, "spec.ranges", "expected a list"),
        ("192.0.2.0/24", None, "192.0.2.1", "spec.exclude", "expected a list"),
        ("192.0.2.0/24", None, ["192.0.2.1", "bogus"], "spec.exclude[1]", "malformed CIDR"),
        ("192.0.2.0/24", None, ["192.0.2.1/30"], "spec.exclude[0]", "host bits set"),
        ("192.0.2.0/24", None, ["198.51.100.0/24"], "spec.exclude[0]", "outside cidr"),
        ("2001:db8::/64", None, ["192.0.2.1"], "spec.exclude[0]", "is IPv4, cidr is IPv6"),
    ],
)
def test_parse_bad(
    cidr: str,
    ranges: list[list[str]] | None,
    exclude: list[str] | None,
    field: str,
    reason: str,
) -> None:
    with pytest.raises(PoolError) as caught:
        Pool.parse("bad-pool", cidr, ranges, exclude)
    assert caught.value.pool == "bad-pool"
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"pool 'bad-pool': {field}: ")


def test_contains_checks_family_range_and_exclusions() -> None:
    pool = Pool.parse("p", "192.0.2.0/24", [["192.0.2.10", "192.0.2.20"]], ["192.0.2.15"])
    assert pool.contains("192.0.2.10")
    assert pool.contains(IPv4Address("192.0.2.20"))
    assert "192.0.2.14" in pool
    assert not pool.contains("192.0.2.15")
    assert not pool.contains("192.0.2.9")
    assert not pool.contains("::ffff:192.0.2.10")
    assert 42 not in pool
    with pytest.raises(PoolError, match="malformed IP address"):
        pool.contains("192.0.2.300")


# ---------------------------------------------------------------- allocator examples


def test_allocator_examples() -> None:
    pool = Pool.parse("p", "192.0.2.0/29", exclude=["192.0.2.2"])
    alloc = PoolAllocator(pool, ["192.0.2.3"])
    assert (alloc.used, alloc.free) == (1, 4)
    assert alloc.allocate() == IPv4Address("192.0.2.1")
    assert alloc.allocate() == IPv4Address("192.0.2.4")
    assert alloc.reserve("192.0.2.6") is True
    assert alloc.reserve("192.0.2.6") is False
    assert alloc.allocate() == IPv4Address("192.0.2.5")
    assert alloc.allocate() is None
    assert alloc.release("192.0.2.4") is True
    assert alloc.release("192.0.2.4") is False
    assert alloc.release("2001:db8::1") is False
    assert not alloc.is_used("192.0.2.4")
    assert alloc.is_used(IPv4Address("192.0.2.5"))
    assert list(alloc.used_addresses()) == [
        IPv4Address(a) for a in ("192.0.2.1", "192.0.2.3", "192.0.2.5", "192.0.2.6")
    ]


def test_allocator_rebuild_tolerates_duplicates_and_refuses_strangers() -> None:
    pool = Pool.parse("p", "192.0.2.0/29", exclude=["192.0.2.2"])
    alloc = PoolAllocator(pool, ("192.0.2.5", IPv4Address("192.0.2.5"), "192.0.2.1"))
    assert (alloc.used, alloc.free) == (2, 3)
    assert alloc.allocate() == IPv4Address("192.0.2.3")
    with pytest.raises(PoolError, match=r"192\.0\.2\.2 is outside the pool or excluded"):
        PoolAllocator(pool, ["192.0.2.1", "192.0.2.2"])


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("192.0.2.2", "outside the pool or excluded"),
        ("192.0.2.7", "outside the pool or excluded"),  # broadcast
        ("198.51.100.1", "outside the pool or excluded"),
        ("2001:db8::1", "is not IPv4"),
        ("nonsense", "malformed IP address"),
    ],
)
def test_reserve_refuses_what_the_pool_cannot_hand_out(ip: str, reason: str) -> None:
    alloc = PoolAllocator(Pool.parse("p", "192.0.2.0/29", exclude=["192.0.2.2"]))
    with pytest.raises(PoolError, match=reason) as caught:
        alloc.reserve(ip)
    assert caught.value.field == "ip"
    assert alloc.used == 0


def test_huge_v6_pool_is_never_enumerated() -> None:
    pool = Pool.parse("big", "2001:db8::/48", exclude=["2001:db8:0:1::/64"])
    base = int(IPv6Address("2001:db8::"))
    used = [IPv6Address(base + 1 + n) for n in range(20_000)]
    alloc = PoolAllocator(pool, used)
    assert alloc.free == 2**80 - 1 - 2**64 - 20_000
    assert alloc.allocate() == IPv6Address(base + 20_001)
    assert alloc.reserve("2001:db8::ffff:ffff:ffff:ffff") is True
    assert alloc.allocate() == IPv6Address(base + 20_002)
    with pytest.raises(PoolError):
        alloc.reserve("2001:db8:0:1::5")


def test_find_overlaps_examples() -> None:
    a = Pool.parse("a", "192.0.2.0/24", [["192.0.2.1", "192.0.2.99"]])
    b = Pool.parse("b", "192.0.2.0/24", [["192.0.2.100", "192.0.2.200"]])
    c = Pool.parse("c", "192.0.2.128/25")
    d = Pool.parse("d", "2001:db8::/64")
    e = Pool.parse("e", "2001:db8::/120", exclude=["2001:db8::1"])
    assert find_overlaps([a, b, c, d, e]) == [
        Overlap("b", "c", IPv4Address("192.0.2.129")),
        Overlap("d", "e", IPv6Address("2001:db8::2")),
    ]
    assert find_overlaps([]) == []


# ---------------------------------------------------------------- properties


@dataclass
class Spec:
    """A generated pool spec and the brute-force set of addresses it should allow."""

    cidr: str
    ranges: list[list[str]] | None
    exclude: list[str]
    allowed: frozenset[int]
    network: IPNetwork


def model_allowed(
    network: IPNetwork, ranges: list[list[str]] | None, exclude: list[str]
) -> set[int]:
    first, last = int(network.network_address), int(network.broadcast_address)
    if ranges:
        candidates = {
            n
            for lo, hi in ranges
            for n in range(int(ipaddress.ip_address(lo)), int(ipaddress.ip_address(hi)) + 1)
        }
    else:
        candidates = set(range(first, last + 1))
        if network.num_addresses > 2:
            candidates.discard(first)
            if network.version == 4:
                candidates.discard(last)
    cut = [ipaddress.ip_network(e) for e in exclude]
    return {n for n in candidates if not any(to_addr(network, n) in c for c in cut)}


def to_addr(network: IPNetwork, n: int) -> IPAddress:
    return IPv4Address(n) if network.version == 4 else IPv6Address(n)


@st.composite
def pool_specs(draw: st.DrawFn, version: int | None = None, near: int | None = None) -> Spec:
    """A pool anywhere in the family, or within 256 addresses above ``near``."""
    version = version or draw(st.sampled_from([4, 6]))
    bits = 32 if version == 4 else 128
    prefix = draw(st.integers(bits - 8, bits))
    start = draw(st.integers(0, 2**bits - 1) if near is None else st.integers(near, near + 255))
    net_cls = ipaddress.IPv4Network if version == 4 else ipaddress.IPv6Network
    network: IPNetwork = net_cls((start, prefix), strict=False)
    lo, hi = int(network.network_address), int(network.broadcast_address)
    offsets = st.integers(lo, hi)
    ranges: list[list[str]] | None = None
    if draw(st.booleans()):
        pairs = draw(st.lists(st.tuples(offsets, offsets).map(sorted), min_size=1, max_size=3))
        ranges = [[str(to_addr(network, a)), str(to_addr(network, b))] for a, b in pairs]
    exclude = []
    for point, size_bits in draw(st.lists(st.tuples(offsets, st.integers(0, 4)), max_size=4)):
        sub = net_cls((point, bits - size_bits), strict=False)
        exclude.append(str(sub.network_address) if size_bits == 0 else str(sub))
    allowed = frozenset(model_allowed(network, ranges, exclude))
    return Spec(str(network), ranges, exclude, allowed, network)


def parse(spec: Spec, name: str = "p") -> Pool:
    return Pool.parse(name, spec.cidr, spec.ranges, spec.exclude)


@given(pool_specs(), st.integers(0, 2**128 - 1))
def test_parse_and_contains_agree_with_model(spec: Spec, probe: int) -> None:
    pool = parse(spec)
    assert pool.size == len(spec.allowed)
    lo = int(spec.network.network_address)
    for n in (probe % (2**spec.network.max_prefixlen), lo + probe % spec.network.num_addresses):
        assert pool.contains(to_addr(spec.network, n)) == (n in spec.allowed)


@given(pool_specs())
def test_inputs_untouched(spec: Spec) -> None:
    ranges, exclude = copy.deepcopy(spec.ranges), copy.deepcopy(spec.exclude)
    pool = parse(spec)
    used_in = [str(to_addr(spec.network, n)) for n in sorted(spec.allowed)[:3]]
    used_copy = list(used_in)
    pools = [pool, parse(spec, "q")]
    alloc = PoolAllocator(pool, used_in)
    alloc.allocate()
    find_overlaps(pools)
    assert (spec.ranges, spec.exclude, used_in) == (ranges, exclude, used_copy)
    assert [p.name for p in pools] == ["p", "q"]
    assert pool == parse(spec)


@given(pool_specs())
def test_exhausting_a_pool_yields_every_allowed_address_once_ascending(spec: Spec) -> None:
    alloc = PoolAllocator(parse(spec))
    got = []
    while (ip := alloc.allocate()) is not None:
        got.append(int(ip))
        assert alloc.used + alloc.free == alloc.pool.size
    assert got == sorted(spec.allowed)
    assert alloc.free == 0


operations = st.lists(
    st.tuples(st.sampled_from(["allocate", "release", "reserve"]), st.integers(0, 2**16)),
    max_size=60,
)


@given(pool_specs(), operations)
def test_operations_agree_with_set_model(spec: Spec, ops: list[tuple[str, int]]) -> None:
    """Never an excluded, used or out-of-range IP; always the lowest; counts add up."""
    alloc = PoolAllocator(parse(spec))
    used: set[int] = set()
    choices = sorted(spec.allowed)
    for op, pick in ops:
        if op == "allocate":
            free = spec.allowed - used
            got = alloc.allocate()
            assert got == (to_addr(spec.network, min(free)) if free else None)
            if got is not None:
                used.add(int(got))
        elif choices:
            n = choices[pick % len(choices)]
            ip = str(to_addr(spec.network, n))
            if op == "release":
                assert alloc.release(ip) == (n in used)
                used.discard(n)
            else:
                assert alloc.reserve(ip) == (n not in used)
                used.add(n)
        assert alloc.used == len(used)
        assert alloc.used + alloc.free == alloc.pool.size
    assert [int(ip) for ip in alloc.used_addresses()] == sorted(used)


@given(pool_specs(), st.data())
def test_allocate_release_allocate_is_stable(spec: Spec, data: st.DataObject) -> None:
    choices = sorted(spec.allowed)
    taken = data.draw(st.sets(st.sampled_from(choices), max_size=20)) if choices else set()
    alloc = PoolAllocator(parse(spec), [to_addr(spec.network, n) for n in taken])
    first = alloc.allocate()
    if first is not None:
        assert alloc.release(first)
    assert alloc.allocate() == first


@given(pool_specs(), st.data())
def test_reserved_addresses_are_never_allocated(spec: Spec, data: st.DataObject) -> None:
    choices = sorted(spec.allowed)
    reserved = data.draw(st.sets(st.sampled_from(choices), max_size=20)) if choices else set()
    alloc = PoolAllocator(parse(spec))
    for n in reserved:
        assert alloc.reserve(to_addr(spec.network, n))
    handed_out = []
    while (ip := alloc.allocate()) is not None:
        handed_out.append(int(ip))
    assert not reserved & set(handed_out)
    assert set(handed_out) | reserved == spec.allowed


@given(pool_specs(), st.sampled_from([4, 6]), st.data())
def test_outside_addresses_are_refused(spec: Spec, version: int, data: st.DataObject) -> None:
    bits = 32 if version == 4 else 128
    n = data.draw(st.integers(0, 2**bits - 1))
    alloc = PoolAllocator(parse(spec))
    ip = IPv4Address(n) if version == 4 else IPv6Address(n)
    if version == spec.network.version and n in spec.allowed:
        assert alloc.reserve(ip)
    else:
        with pytest.raises(PoolError):
            alloc.reserve(ip)
        assert alloc.used == 0


# Overlaps: pools drawn near one base so that they often collide.
nearby_pools = st.integers(0, 2).flatmap(
    lambda version_pick: st.lists(
        pool_specs(
            version=4 if version_pick < 2 else 6,
            near=int(
                IPv4Address("198.51.100.0") if version_pick < 2 else IPv6Address("2001:db8::")
            ),
        )
        | pool_specs(),
        min_size=0,
        max_size=5,
    )
)


@given(nearby_pools)
def test_find_overlaps_agrees_with_brute_force(specs: list[Spec]) -> None:
    pools = [parse(spec, f"pool-{i}") for i, spec in enumerate(specs)]
    expected = []
    for i, a in enumerate(specs):
        for j in range(i + 1, len(specs)):
            b = specs[j]
            common = a.allowed & b.allowed if a.network.version == b.network.version else set()
            if common:
                expected.append(Overlap(f"pool-{i}", f"pool-{j}", to_addr(a.network, min(common))))
    assert find_overlaps(pools) == expected
