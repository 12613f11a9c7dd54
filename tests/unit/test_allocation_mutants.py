"""core/allocation.py: the book's bookkeeping edges that mutation testing found unpinned.

Each test names what it guards; all of them passed before (these are not bug fixes), but a
change of the guarded line passed every other unit test (docs/testing.md, "Mutation").
"""

from __future__ import annotations

import pytest
from test_allocation_support import book_with, ip, pool, svc

from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo


def test_a_new_book_serves_no_class_and_keeps_claims_of_deleted_pools() -> None:
    book = AllocationBook()
    assert book.purge_on_pool_delete is False
    assert book.serve_unclassed is False
    assert book.pools() == []
    assert book.pool("p") is None
    assert AllocationBook(serve_unclassed=True).serve_unclassed is True


def test_counts_of_an_unknown_pool_are_zero() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    assert book.counts("nope") == (0, 0)


def test_a_bad_pool_gets_no_allocator_even_with_claims_around() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", ("default/a",)))
    book.set_pools([pool("p", "192.0.2.0/30"), PoolInfo("bad", None, problem="bad cidr")])
    assert book.counts("bad") == (0, 0)
    assert book.reserve_lowest_free("bad", "default/b") is None
    assert book.reserve_lowest_free("nope", "default/b") is None


def test_a_claim_seen_again_with_fewer_services_is_no_longer_held_by_the_dropped_one() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", ("default/a", "default/b")))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", ("default/a",)))
    assert [c.ip for c in book.held_by("default/a")] == [ip("192.0.2.1")]
    assert book.held_by("default/b") == []


def test_forgetting_what_was_never_seen_is_harmless() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    book.claim_gone(ip("192.0.2.1"))
    assert book.service_gone("default/never") is False


def test_a_shared_reservation_that_ended_is_not_offered_to_the_key_later() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    one = ip("192.0.2.1")
    # ended by the claim appearing, then the claim going away
    book.reserve_pending(one, "default/a", sharing_key="k", pool="p")
    book.claim_seen(ClaimInfo(one, "p", ("default/a",), sharing_key="k"))
    book.claim_gone(one)
    book.reserve_pending(one, "default/b", sharing_key="", pool="p")
    assert book.pending_shared("k") == []
    # ended by settle without a claim (the create lost)
    two = ip("192.0.2.2")
    book.reserve_pending(two, "default/c", sharing_key="k", pool="p")
    book.settle(two, "default/c", None)
    book.reserve_pending(two, "default/d", sharing_key="", pool="p")
    assert book.pending_shared("k") == []


def test_pending_shared_lists_only_the_key_asked_for_v4_before_v6() -> None:
    book = book_with(pool("p4", "192.0.2.0/30"), pool("p6", "2001:db8::/126"))
    book.reserve_pending(ip("2001:db8::1"), "default/a", sharing_key="k", pool="p6")
    book.reserve_pending(ip("192.0.2.2"), "default/a", sharing_key="k", pool="p4")
    book.reserve_pending(ip("192.0.2.1"), "default/z", sharing_key="other", pool="p4")
    assert book.pending_shared("k") == [
        (ip("192.0.2.2"), "p4", "default/a"),
        (ip("2001:db8::1"), "p6", "default/a"),
    ]


def test_an_ip_recorded_on_a_service_without_a_claim_is_held_for_it_at_start() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    book.reserve_recorded("default/web", [ip("192.0.2.1")])
    assert book.pending_for(ip("192.0.2.1")) == "default/web"
    assert book.reserve_lowest_free("p", "default/other", sharing_key="") == ip("192.0.2.2")


def test_a_hand_set_ip_that_is_also_claimed_stays_taken_when_the_service_lets_go() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    one = ip("192.0.2.1")
    book.claim_seen(ClaimInfo(one, "p", ("default/a",)))
    book.service_seen(svc("hand", hand_set=(one,)))
    assert book.service_gone("default/hand") is True
    assert book.reserve_lowest_free("p", "default/b", sharing_key="") == ip("192.0.2.2")


@pytest.mark.parametrize(
    ("service", "why"),
    [
        (None, "gone"),
        (svc("web", load_balancer_class="other.io/lb", service_type="LoadBalancer"), "foreign"),
        (svc("web", annotations={}), "no request"),
        (svc("web", annotations={"external-ip": "not-an-ip"}), "bad annotation"),
    ],
)
def test_every_plan_names_its_service_and_a_foreign_one_keeps_its_claims(
    service: object, why: str
) -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", ("default/web",)))
    plan = book.plan("default/web", service)  # type: ignore[arg-type]
    assert plan.service == "default/web", why
    if why in ("foreign", "bad annotation"):
        assert plan.keep == (ip("192.0.2.1"),)
        assert plan.release == ()
    else:
        assert plan.release == (ip("192.0.2.1"),)


# ------------------------------------------------------------------ guard mutants (session 17)


def test_a_recorded_ip_that_a_claim_backs_is_not_reserved_again_at_start() -> None:
    """Reserved anyway, it would stay taken after the claim went, for a Service not holding it."""
    book = book_with(pool("p", "192.0.2.0/30"))
    one = ip("192.0.2.1")
    book.claim_seen(ClaimInfo(one, "p", ("default/a",)))
    book.reserve_recorded("default/b", [one])
    assert book.pending_for(one) is None
    book.claim_gone(one)
    assert book.reserve_lowest_free("p", "default/c", sharing_key="") == one


def test_the_first_service_to_record_an_ip_keeps_its_start_up_reservation() -> None:
    """Two Services recording one unclaimed IP: the second does not take it from the first."""
    book = book_with(pool("p", "192.0.2.0/30"))
    one = ip("192.0.2.1")
    book.reserve_recorded("default/a", [one])
    book.reserve_recorded("default/b", [one])
    assert book.pending_for(one) == "default/a"
    plan = book.plan("default/a", svc("a", recorded=(one,)))
    assert [a.ip for a in plan.acquire] == [one]


def test_an_unkeyed_reservation_is_in_flight_under_no_key() -> None:
    """Only keyed acquisitions are offered to others of their key (the planner's
    `_may_join_pending` relies on no key listing nothing)."""
    book = book_with(pool("p", "192.0.2.0/30"))
    book.reserve_pending(ip("192.0.2.1"), "default/a", sharing_key="", pool="p")
    assert book.reserve_lowest_free("p", "default/b") == ip("192.0.2.2")
    assert book.pending_shared("") == []


def test_a_pending_ip_also_set_by_hand_stays_taken_when_the_hand_setter_lets_go() -> None:
    book = book_with(pool("p", "192.0.2.0/30"))
    one = book.reserve_lowest_free("p", "default/a")
    assert one == ip("192.0.2.1")
    book.service_seen(svc("hand", hand_set=(one,)))
    assert book.service_gone("default/hand") is True
    assert book.pending_for(one) == "default/a"
    assert book.reserve_lowest_free("p", "default/b") == ip("192.0.2.2")
