"""core/link_plan.py: the address order that mutation testing found unpinned
(docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress

from eipctl.core.link_plan import ip_sort_key


def test_ip_sort_key_puts_v4_first_then_numeric_order() -> None:
    ips = [ipaddress.ip_address(t) for t in ("2001:db8::1", "192.0.2.10", "192.0.2.9", "::1")]
    assert sorted(ips, key=ip_sort_key) == [ips[2], ips[1], ips[3], ips[0]]
    assert ip_sort_key(ips[1]) == (4, int(ips[1]))
