"""core/fields.py: every ResourceError names the bad field and says what is wrong, exactly;
the lenient reads. Pinned where mutation testing found them loose (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from eipctl.core import fields as f
from eipctl.core.fields import ResourceError

ERRORS: list[tuple[str, Callable[[], Any], str]] = [
    ("object", lambda: f.as_mapping([1], "spec"), "spec: expected an object, got list"),
    ("string", lambda: f.as_str(5, "spec.x"), "spec.x: expected a string, got int"),
    ("required", lambda: f.get_str({}, "x", "spec", required=True), "spec.x: required"),
    (
        "int type",
        lambda: f.get_int({"n": "1"}, "n", "spec"),
        "spec.n: expected an integer, got str",
    ),
    (
        "int bool",
        lambda: f.get_int({"n": True}, "n", "spec"),
        "spec.n: expected an integer, got bool",
    ),
    ("int low", lambda: f.get_int({"n": -1}, "n", "spec"), "spec.n: -1 is out of range 0"),
    (
        "int high",
        lambda: f.get_int({"n": 9}, "n", "spec", minimum=1, maximum=8),
        "spec.n: 9 is out of range 1..8",
    ),
    (
        "bool",
        lambda: f.get_bool({"b": 1}, "b", "spec", default=False),
        "spec.b: expected a boolean, got int",
    ),
    ("list", lambda: f.as_list("x", "spec.l"), "spec.l: expected a list, got str"),
    (
        "str list",
        lambda: f.get_str_list({"l": ["a", 2]}, "l", "spec"),
        "spec.l[1]: expected a string, got int",
    ),
    (
        "str list type",
        lambda: f.get_str_list({"l": "a"}, "l", "spec"),
        "spec.l: expected a list, got str",
    ),
    (
        "str map key",
        lambda: f.get_str_map({"m": {1: "a"}}, "m", "spec"),
        "spec.m: expected a string, got int",
    ),
    ("ip", lambda: f.check_ip("nope", "spec.ip"), "spec.ip: 'nope' is not an IP address"),
    (
        "ip zone",
        lambda: f.check_ip("fe80::1%eth0", "spec.ip"),
        "spec.ip: 'fe80::1%eth0' is not a plain IPv6 address (no zone, no dotted quad)",
    ),
    (
        "ip dotted",
        lambda: f.check_ip("::ffff:192.0.2.1", "spec.ip"),
        "spec.ip: '::ffff:192.0.2.1' is not a plain IPv6 address (no zone, no dotted quad)",
    ),
    (
        "cidr",
        lambda: f.check_network("192.0.2.0", "spec.cidr"),
        "spec.cidr: '192.0.2.0' is not a CIDR (ip/prefixLength)",
    ),
    (
        "cidr ip",
        lambda: f.check_network("nope/24", "spec.cidr"),
        "spec.cidr: 'nope/24': 'nope' is not an IP address",
    ),
    (
        "cidr two slashes",
        lambda: f.check_network("192.0.2.0/24/1", "spec.cidr"),
        "spec.cidr: '192.0.2.0/24/1': prefix length must be 0..32",
    ),
    (
        "cidr len",
        lambda: f.check_network("2001:db8::/129", "c"),
        "c: '2001:db8::/129': prefix length must be 0..128",
    ),
    ("time", lambda: f.parse_time("yesterday", "t"), "t: 'yesterday' is not an RFC 3339 timestamp"),
    ("time type", lambda: f.parse_time(5, "t"), "t: expected a string, got int"),
    (
        "time zone",
        lambda: f.parse_time("2026-01-01T00:00:00", "t"),
        "t: '2026-01-01T00:00:00' has no time zone",
    ),
]


@pytest.mark.parametrize(("case", "call", "message"), ERRORS, ids=[c for c, _, _ in ERRORS])
def test_errors_name_the_field_and_the_problem(
    case: str, call: Callable[[], Any], message: str
) -> None:
    with pytest.raises(ResourceError) as caught:
        call()
    assert str(caught.value) == message
    field, _, problem = message.partition(": ")
    assert (caught.value.field, caught.value.problem) == (field, problem)


def test_the_largest_prefix_and_an_ipv6_without_zone_are_fine() -> None:
    assert f.check_network("192.0.2.1/32", "c") == "192.0.2.1/32"
    assert f.check_network("2001:db8::1/128", "c") == "2001:db8::1/128"
    assert f.check_ip("2001:db8::1", "c") == "2001:db8::1"
    assert f.get_int({"n": 8}, "n", "spec", maximum=8) == 8


def test_times_become_utc_whole_seconds_and_naive_ones_are_refused() -> None:
    plus2 = timezone(timedelta(hours=2))
    assert f.normalize_time(datetime(2026, 1, 1, 2, 0, 0, 999, tzinfo=plus2)) == datetime(
        2026, 1, 1, tzinfo=UTC
    )
    assert f.normalize_time(datetime(2026, 1, 1, 2, tzinfo=plus2)).tzinfo is UTC
    with pytest.raises(
        ValueError, match=r"^naive datetime: use an aware one \(datetime.now\(UTC\)\)$"
    ):
        f.normalize_time(datetime(2026, 1, 1))


def test_lenient_reads_of_what_the_api_already_accepted() -> None:
    obj = {"metadata": {"name": "a", "labels": {"k": "v"}}}
    assert f.meta_of(obj) == {"name": "a", "labels": {"k": "v"}}
    assert f.name_of(obj) == "a"
    assert f.labels_of(obj) == {"k": "v"}
    for empty in ({}, {"metadata": None}, {"metadata": {"name": None, "labels": None}}):
        assert f.meta_of(empty) in ({}, {"name": None, "labels": None})
        assert f.name_of(empty) == ""
        assert f.labels_of(empty) == {}
