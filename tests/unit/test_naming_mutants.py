"""core/naming.py: name length limits and the exact refusals (docs/testing.md, "Mutation")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.naming import (
    MAX_NAME_LENGTH,
    claim_name_for,
    ip_for_claim_name,
    is_dns1123_subdomain,
    natural_key,
    node_claim_name_for,
    parse_ip,
    parse_node_claim_name,
)


def test_names_of_exactly_the_maximum_length_are_valid() -> None:
    assert is_dns1123_subdomain("a" * MAX_NAME_LENGTH)
    assert not is_dns1123_subdomain("a" * (MAX_NAME_LENGTH + 1))
    prefix = claim_name_for("192.0.2.1") + "."
    node = "n" * (MAX_NAME_LENGTH - len(prefix))
    assert node_claim_name_for("192.0.2.1", node) == prefix + node
    with pytest.raises(ValueError, match="is too long for a per-node claim name"):
        node_claim_name_for("192.0.2.1", node + "n")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: parse_ip("fe80::1%eth0"),
            "fe80::1%eth0: a scoped IPv6 address cannot be an external IP",
        ),
        (lambda: ip_for_claim_name("web"), "'web' is not an IpClaim name"),
        (
            lambda: ip_for_claim_name("2001-db8-0-0-0-0-0-1"),
            "'2001-db8-0-0-0-0-0-1' is not an IpClaim name (the name of 2001:db8::1 is "
            "'2001-db8--1')",
        ),
        (lambda: parse_node_claim_name("192-0-2-1"), "'192-0-2-1' is not a per-node IpClaim name"),
        (
            lambda: parse_node_claim_name("192-0-2-1.Bad_Node"),
            "'192-0-2-1.Bad_Node' is not a per-node IpClaim name",
        ),
    ],
)
def test_refusals_say_what_is_wrong(call: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        call()  # type: ignore[operator]
    assert str(caught.value) == message


def test_claim_names_parse_back_only_when_canonical() -> None:
    assert str(ip_for_claim_name("192-0-2-1")) == "192.0.2.1"
    assert str(ip_for_claim_name("2001-db8--1")) == "2001:db8::1"
    with pytest.raises(ValueError):
        ip_for_claim_name("2001-db8-0-0-0-0-0-1")


@given(st.lists(st.integers(min_value=0, max_value=10_000), unique=True, min_size=2))
def test_natural_order_compares_digit_runs_as_numbers(numbers: list[int]) -> None:
    names = [f"node-{n}" for n in numbers]
    assert sorted(names, key=natural_key) == [f"node-{n}" for n in sorted(numbers)]


def test_natural_order_of_names_that_start_or_end_with_digits() -> None:
    names = ["b", "a10", "a2b", "a2", "10", "2x", "2", ""]
    assert sorted(names, key=natural_key) == ["", "2", "2x", "10", "a2", "a2b", "a10", "b"]
