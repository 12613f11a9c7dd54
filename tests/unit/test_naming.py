"""IpClaim names: a bijection between IPs and valid DNS-1123 names."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.naming import (
    DNS1123_SUBDOMAIN,
    claim_name_for,
    ip_for_claim_name,
    is_dns1123_subdomain,
    is_label_value,
    node_claim_name_for,
    parse_node_claim_name,
)


def is_claim_name(name: str) -> bool:
    """True if ``name`` is the claim name of some IP (it parses back to one)."""
    try:
        ip_for_claim_name(name)
    except ValueError:
        return False
    return True


MAPPED = ipaddress.ip_network("::ffff:0:0/96")

v4_addresses = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
# Groups biased towards 0 so that '::' lands at the start, middle and end often.
v6_groups = st.lists(
    st.sampled_from([0, 0, 0, 1, 0xFFFF]) | st.integers(0, 0xFFFF), min_size=8, max_size=8
)
v6_addresses = (
    (
        v6_groups.map(lambda g: sum(x << (16 * (7 - i)) for i, x in enumerate(g)))
        | st.integers(0, 2**128 - 1)
    )
    .map(ipaddress.IPv6Address)
    .filter(lambda a: a not in MAPPED)
)
addresses = v4_addresses | v6_addresses


@pytest.mark.parametrize(
    ("ip", "name"),
    [
        ("203.0.113.7", "203-0-113-7"),
        ("0.0.0.0", "0-0-0-0"),
        ("255.255.255.255", "255-255-255-255"),
        ("2001:db8::7", "2001-db8--7"),
        ("2001:DB8:0:0:0:0:0:7", "2001-db8--7"),
        ("::", "0--0"),
        ("::1", "0--1"),
        ("2001:db8::", "2001-db8--0"),
        ("1:0:0:1:0:0:0:1", "1-0-0-1--1"),
        ("1:0:2:3:4:5:6:7", "1-0-2-3-4-5-6-7"),
        ("2001:db8:1:2:3:4:5:6", "2001-db8-1-2-3-4-5-6"),
    ],
)
def test_known_names(ip: str, name: str) -> None:
    assert claim_name_for(ip) == name
    assert ip_for_claim_name(name) == ipaddress.ip_address(ip)


@given(addresses)
def test_round_trip_and_validity(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    name = claim_name_for(address)
    assert ip_for_claim_name(name) == address
    assert is_dns1123_subdomain(name)
    assert DNS1123_SUBDOMAIN.fullmatch(name)
    assert "." not in name  # keeps per-node names splittable
    assert claim_name_for(str(address)) == name


@given(addresses, addresses)
def test_injective(
    a: ipaddress.IPv4Address | ipaddress.IPv6Address,
    b: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    assert (claim_name_for(a) == claim_name_for(b)) == (a == b)


@given(st.text(alphabet="0123456789abcdefABCDEF-.:", max_size=45))
def test_only_canonical_names_parse(text: str) -> None:
    """Any accepted name is exactly the name of the IP it decodes to."""
    if is_claim_name(text):
        assert claim_name_for(ip_for_claim_name(text)) == text
    else:
        with pytest.raises(ValueError):
            ip_for_claim_name(text)


@pytest.mark.parametrize(
    "name",
    [
        "203-0-113-07",
        "2001-DB8--7",
        "2001-db8-0-0-0-0-0-7",
        "0-0-0-0-0-0-0-0",
        "--1",
        "1--",
        "::1",
        "203.0.113.7",
        "1-2-3",
        "0--0--1",
        "",
        "0--ffff-102-304",
        "0--ffff-cb00-7107",
    ],
)
def test_non_canonical_names_rejected(name: str) -> None:
    assert not is_claim_name(name)
    with pytest.raises(ValueError):
        ip_for_claim_name(name)


@pytest.mark.parametrize(
    "ip",
    ["::ffff:203.0.113.7", "::ffff:cb00:7107", "fe80::1%eth0", "300.1.1.1", "01.2.3.4", "garbage"],
)
def test_rejected_addresses(ip: str) -> None:
    with pytest.raises(ValueError):
        claim_name_for(ip)


def test_mapped_error_points_to_v4() -> None:
    with pytest.raises(ValueError, match=r"use 203\.0\.113\.7"):
        claim_name_for("::ffff:203.0.113.7")


node_names = st.from_regex(
    r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?){0,3}", fullmatch=True
)


@given(addresses, node_names)
def test_node_claim_names_round_trip(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, node: str
) -> None:
    name = node_claim_name_for(address, node)
    assert is_dns1123_subdomain(name)
    assert parse_node_claim_name(name) == (address, node)
    assert not is_claim_name(name)


def test_node_claim_name_limits() -> None:
    with pytest.raises(ValueError, match="too long"):
        node_claim_name_for("2001:db8::7", "n" * 245)
    with pytest.raises(ValueError, match="not a valid node name"):
        node_claim_name_for("203.0.113.7", "Node_1")
    with pytest.raises(ValueError):
        parse_node_claim_name("203-0-113-7")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("node-1", True),
        ("", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-a", False),
        ("a.b_c", True),
    ],
)
def test_label_values(value: str, ok: bool) -> None:
    assert is_label_value(value) is ok
