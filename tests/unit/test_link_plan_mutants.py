"""core/link_plan.py: the address order that mutation testing found unpinned, and (guard
operators) what makes a plan empty (docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress
import itertools

from eipctl.core.link_plan import (
    Address,
    Blocked,
    BlockReason,
    LinkPlan,
    PlacedClaim,
    ip_sort_key,
)


def test_ip_sort_key_puts_v4_first_then_numeric_order() -> None:
    ips = [ipaddress.ip_address(t) for t in ("2001:db8::1", "192.0.2.10", "192.0.2.9", "::1")]
    assert sorted(ips, key=ip_sort_key) == [ips[2], ips[1], ips[3], ips[0]]
    assert ip_sort_key(ips[1]) == (4, int(ips[1]))


def test_a_plan_is_empty_unless_it_adds_removes_or_reports_something() -> None:
    """`keep` (a renewal) and `merged` are no work to report; each of `add`, `remove` and
    `blocked` alone is."""
    address = Address("eth0", ipaddress.ip_address("192.0.2.1"), 32)
    claim = PlacedClaim("c", address)
    parts = {
        "add": (claim,),
        "remove": (address,),
        "blocked": (Blocked(claim, BlockReason.ADMIN_ADDRESS),),
    }
    for present in itertools.product((False, True), repeat=len(parts)):
        chosen = {
            name: value for (name, value), on in zip(parts.items(), present, strict=True) if on
        }
        plan = LinkPlan(keep=(claim,), merged=(claim,), **chosen)  # type: ignore[arg-type]
        assert plan.empty is (not chosen), chosen
