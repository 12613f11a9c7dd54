"""core/addresses.py: edges of the fence and of holder liveness that mutation testing found
unpinned (docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress

import pytest

from eipctl.core.addresses import Fence, HolderLiveness, Liveness, ip_sort_key


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ip_sort_key_puts_v4_first_then_numeric_order() -> None:
    ips = [ipaddress.ip_address(t) for t in ("2001:db8::1", "192.0.2.10", "192.0.2.9", "::1")]
    assert sorted(ips, key=ip_sort_key) == [ips[2], ips[1], ips[3], ips[0]]
    assert ip_sort_key(ips[1]) == (4, int(ips[1]))


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_a_fence_needs_a_positive_node_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match=r"^node_timeout must be positive$"):
        Fence(timeout, Clock())


def test_an_absent_ipnode_forgets_the_counter_so_its_return_is_first_sight() -> None:
    clock = Clock()
    liveness = HolderLiveness(1.0, clock)
    assert liveness.observe("n1", 5) is Liveness.LIVE
    clock.now = 10.0
    assert liveness.observe("n1", None) is Liveness.DEAD
    # back with the same counter: first sight again (may be live), not "unchanged for 10 s"
    assert liveness.observe("n1", 5) is Liveness.LIVE


def test_forget_drops_what_was_seen_of_a_node() -> None:
    clock = Clock()
    liveness = HolderLiveness(1.0, clock)
    liveness.observe("n1", 5)
    liveness.observe("n2", 7)
    clock.now = 10.0
    liveness.forget("n1")
    liveness.forget("never-seen")
    assert liveness.observe("n1", 5) is Liveness.LIVE
    assert liveness.observe("n2", 7) is Liveness.DEAD
