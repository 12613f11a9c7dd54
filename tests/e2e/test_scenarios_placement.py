"""Story: thirty Services on three nodes end up ten per node, and each answers from its node."""

from __future__ import annotations

from typing import Any

from eipctl.sandbox.testbed.checks import (
    create_services,
    ips_held_twice,
    per_node,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)


def test_thirty_services_spread_evenly_over_the_nodes(bed: Any) -> None:
    names = [f"spread-{i:02d}" for i in range(30)]
    create_services(bed, names)

    ips = wait_for_ips(bed, names, timeout=30)
    assert len(set(ips.values())) == 30, "every Service has its own IP"
    placed = wait_bound(bed, ips.values(), timeout=30)
    assert ips_held_twice(bed.kube.claims()) == []

    counts = per_node(placed)
    nodes = bed.live_nodes
    assert set(counts) == set(nodes)
    if len(nodes) == 3:
        assert sorted(counts.values()) == [10, 10, 10], counts
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    if bed.local:
        wait_answered_by(bed, placed, timeout=15)
