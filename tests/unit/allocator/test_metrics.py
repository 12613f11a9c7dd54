"""The allocator's metric helpers: label values and pool gauges, read back from REGISTRY."""

from __future__ import annotations

import re
from ipaddress import ip_address
from pathlib import Path

from eipctl.allocator import metrics, services
from eipctl.core import allocation, allocation_planner
from eipctl.metrics import REGISTRY


def gauge(pool: str, state: str) -> float | None:
    return REGISTRY.get_sample_value("eipctl_pool_addresses", {"pool": pool, "state": state})


def test_family_label_values() -> None:
    assert metrics.family(ip_address("192.0.2.1")) == "ipv4"
    assert metrics.family(ip_address("2001:db8::1")) == "ipv6"


def test_every_problem_the_planner_reports_has_a_failure_label() -> None:
    problems = set()
    for module in (allocation, allocation_planner, services):
        text = Path(module.__file__ or "").read_text(encoding="utf-8")
        problems |= set(re.findall(r'Problem\(\s*"(\w+)"', text))
        problems |= set(re.findall(r'failure_reason\(\s*"(\w+)"', text))
    assert problems == set(metrics.FAILURE_REASONS)
    assert metrics.failure_reason("PoolExhausted") == "exhausted"
    assert metrics.failure_reason("SomethingNew") == "other"


def test_pool_gauges_hold_huge_ipv6_pools_and_are_cleared() -> None:
    metrics.set_pool_addresses("v6-unit", 2**64, 2**64 - 3)
    assert gauge("v6-unit", "size") == float(2**64)
    assert gauge("v6-unit", "used") == 3.0
    assert gauge("v6-unit", "free") == float(2**64 - 3)
    metrics.set_pool_addresses("v4-unit", 254, 250)
    metrics.clear_pool_addresses("v6-unit")
    metrics.clear_pool_addresses("never-published")  # harmless
    assert gauge("v6-unit", "size") is None
    assert gauge("v4-unit", "used") == 4.0
    metrics.clear_all_pool_addresses()
    assert gauge("v4-unit", "used") is None
