"""controller/vouching.py: a writing leader's probe whose digest equals that of our claims
vouches for us; one that differs is noted once, until an equal one comes. Every extended
probe also says how many nodes its prober knows."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.controller.vouching import Vouching
from eipctl.core.fence import Fence, Justification
from eipctl.core.liveness_wire import Flag, placement_digest, probe_ext
from eipctl.core.naming import LABEL_NODE

NODE = "node-a"
WRITER = Flag.STANDING | Flag.WRITER


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Claims:
    """What `Vouching` reads of a `ClaimCache`: whether it is synced, and its objects."""

    def __init__(self, *claims: dict[str, Any]) -> None:
        self.has_synced = True
        self.items = list(claims)
        self.reads = 0

    def objects(self) -> list[dict[str, Any]]:
        self.reads += 1
        return list(self.items)


def claim(name: str, node: str | None = NODE) -> dict[str, Any]:
    labels = {} if node is None else {LABEL_NODE: node}
    return {"metadata": {"name": name, "labels": labels}}


class Bed:
    def __init__(self, *claims: dict[str, Any]) -> None:
        self.clock = Clock()
        self.claims = Claims(*claims)
        self.fence = Fence(fence_timeout=1.0, clock=self.clock, vouch_window=0.5)
        self.vouching = Vouching(NODE, self.claims, self.fence, self.clock)  # type: ignore[arg-type]

    def api_lapsed(self) -> None:
        """Move past the fence's fence timeout: only a vouch (or a quorum) justifies holding."""
        self.clock.now += 2.0


OURS = placement_digest(["10-0-0-1", "10-0-0-2"])
OTHER = placement_digest(["10-0-0-1"])
NODES = 3


def ext(digest: bytes, nodes: int = NODES) -> bytes:
    """A PROBE_EXT's ext: the prober's digest of our claims and its node count."""
    return probe_ext(digest, nodes)


def bed() -> Bed:
    return Bed(claim("10-0-0-1"), claim("10-0-0-2"), claim("10-0-0-9", "node-b"), claim("x", None))


def test_own_digest_is_that_of_the_claims_labelled_for_this_node() -> None:
    assert bed().vouching.own_digest() == OURS
    assert Bed().vouching.own_digest() == placement_digest([])


@pytest.mark.parametrize("flags", [WRITER, Flag.WRITER])
def test_an_equal_digest_from_a_writer_vouches(flags: Flag) -> None:
    b = bed()
    b.api_lapsed()
    assert b.fence.justification() is None
    b.vouching.on_probe(flags, ext(OURS))
    assert b.fence.vouched_recently()
    assert b.fence.justification() is Justification.VOUCHED
    assert b.fence.deadline() == b.clock.now + 0.5
    assert b.vouching.mismatch_since is None


@pytest.mark.parametrize(
    ("flags", "extended"),
    [
        (Flag.STANDING, True),  # a standby scheduler: it cannot write
        (Flag.NONE, True),  # no WRITER bit: vouches for nothing
        (Flag.STANDING | Flag.API_STALE, True),
        (WRITER, False),  # a plain probe of the writer: no digest to compare
    ],
)
def test_a_non_writer_or_a_plain_probe_does_nothing(flags: Flag, extended: bool) -> None:
    b = bed()
    b.api_lapsed()
    b.vouching.on_probe(flags, ext(OURS) if extended else None)
    assert not b.fence.vouched_recently()
    assert b.fence.justification() is None
    assert b.vouching.mismatch_since is None
    b.vouching.on_probe(flags, ext(OTHER) if extended else None)  # no mismatch either
    assert b.vouching.mismatch_since is None


def test_a_different_digest_is_noted_once_and_an_equal_one_clears_it() -> None:
    b = bed()
    b.api_lapsed()
    noticed = b.clock.now
    b.vouching.on_probe(WRITER, ext(OTHER))
    assert b.vouching.mismatch_since == noticed
    assert not b.fence.vouched_recently()
    b.clock.now += 0.3
    b.vouching.on_probe(WRITER, ext(OTHER))
    b.vouching.on_probe(WRITER, ext(placement_digest([])))
    assert b.vouching.mismatch_since == noticed  # since the first, not the latest
    b.vouching.on_probe(Flag.STANDING, ext(OURS))  # a standby's agreement clears nothing
    assert b.vouching.mismatch_since == noticed
    b.clock.now += 0.3
    b.vouching.on_probe(WRITER, ext(OURS))
    assert b.vouching.mismatch_since is None
    assert b.fence.vouched_recently()
    b.clock.now += 0.3
    b.vouching.on_probe(WRITER, ext(OTHER))
    assert b.vouching.mismatch_since == b.clock.now  # a new mismatch, from now


def test_no_vouch_while_the_cache_is_not_synced() -> None:
    b = bed()
    b.claims.has_synced = False
    b.api_lapsed()
    assert b.vouching.own_digest() is None
    b.vouching.on_probe(WRITER, ext(OURS))
    assert not b.fence.vouched_recently()
    assert b.fence.justification() is None
    b.claims.has_synced = True
    b.vouching.on_probe(WRITER, ext(OURS))
    assert b.fence.vouched_recently()


def test_a_digest_computed_before_a_relist_is_not_used_while_unsynced() -> None:
    b = bed()
    assert b.vouching.own_digest() == OURS  # cached
    b.claims.has_synced = False  # a relist began
    b.api_lapsed()
    b.vouching.on_probe(WRITER, ext(OURS))
    assert not b.fence.vouched_recently()


def test_claims_changed_makes_the_digest_recomputed() -> None:
    b = bed()
    assert b.vouching.own_digest() == OURS
    reads = b.claims.reads
    assert b.vouching.own_digest() == OURS
    assert b.claims.reads == reads  # a probe round costs no walk of the cache
    b.claims.items.append(claim("10-0-0-3"))
    b.vouching.claims_changed()
    grown = placement_digest(["10-0-0-1", "10-0-0-2", "10-0-0-3"])
    assert b.vouching.own_digest() == grown
    b.api_lapsed()
    b.vouching.on_probe(WRITER, ext(OURS))  # the writer has not seen the new claim yet
    assert not b.fence.vouched_recently()
    assert b.vouching.mismatch_since == b.clock.now
    b.vouching.on_probe(WRITER, ext(grown))
    assert b.fence.vouched_recently()
    assert b.vouching.mismatch_since is None


def test_a_claim_relabelled_away_leaves_our_digest() -> None:
    b = bed()
    assert b.vouching.own_digest() == OURS
    b.claims.items[1] = claim("10-0-0-2", "node-b")
    b.vouching.claims_changed()
    assert b.vouching.own_digest() == OTHER


def test_every_extended_probe_says_the_cluster_size_a_plain_one_nothing() -> None:
    b = bed()
    assert b.vouching.cluster_size is None
    b.vouching.on_probe(WRITER, None)
    assert b.vouching.cluster_size is None
    b.vouching.on_probe(Flag.STANDING, ext(placement_digest([]), 5))  # a standby's too
    assert b.vouching.cluster_size == 5
    b.vouching.on_probe(WRITER, ext(OURS, 4))
    assert b.vouching.cluster_size == 4  # the prober that probed last
    b.vouching.on_probe(WRITER, ext(OTHER, 0))  # zero: a prober that knows none says nothing
    assert b.vouching.cluster_size == 4
    b.claims.has_synced = False  # the count does not depend on our cache
    b.vouching.on_probe(Flag.STANDING, ext(OURS, 9))
    assert b.vouching.cluster_size == 9


def test_the_node_count_is_not_part_of_the_digest_compared() -> None:
    b = bed()
    b.api_lapsed()
    b.vouching.on_probe(WRITER, ext(OURS, 1000))
    assert b.fence.vouched_recently()
    assert b.vouching.mismatch_since is None


def test_a_probe_that_waited_in_the_queue_vouches_from_when_it_came() -> None:
    """Read after a freeze, a probe that arrived before it vouches only for the vouch window
    from its arrival (soak seed 1202), and a later mismatch dates from its own arrival."""
    b = bed()
    b.api_lapsed()
    b.vouching.on_probe(WRITER, ext(OURS), arrived=b.clock.now - 0.6)  # queued 0.6 s
    assert b.fence.justification() is None  # the window (0.5 s) ended while it waited
    b.vouching.on_probe(WRITER, ext(OURS), arrived=b.clock.now - 0.2)
    assert b.fence.justification() is Justification.VOUCHED
    assert b.fence.deadline() == pytest.approx(b.clock.now + 0.3)
    b.vouching.on_probe(WRITER, ext(OTHER), arrived=b.clock.now - 0.1)
    assert b.vouching.mismatch_since == pytest.approx(b.clock.now - 0.1)
    b.vouching.on_probe(WRITER, ext(OURS), arrived=b.clock.now - 0.3)  # older: no later
    assert b.fence.deadline() == pytest.approx(b.clock.now + 0.3)
