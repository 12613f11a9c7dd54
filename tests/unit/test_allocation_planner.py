"""The allocator's rules, through `AllocationBook.plan`: pool order, families, keep / release
and marks, sharing. One table or story per rule of docs/allocator.md.
"""

from __future__ import annotations

import pytest
from test_allocation_support import book_with, ip, pool, settle_all, svc

from eipctl.core.allocation_inputs import ANY_FAMILY, ClaimInfo, PoolInfo, Request, ServiceInfo
from eipctl.core.allocation_plan import Acquire
from eipctl.core.selectors import LabelSelector

# ------------------------------------------------------------------ pool choice


def test_auto_takes_lowest_free_of_first_pool_by_name() -> None:
    book = book_with(pool("b-pool", "192.0.2.0/30"), pool("a-pool", "198.51.100.0/30"))
    plan = book.plan("default/web", svc())
    assert plan.acquire == (Acquire(ip("198.51.100.1"), "a-pool"),)
    assert plan.desired == (ip("198.51.100.1"),)


def test_auto_skips_pools_without_autoassign_not_ready_deleting_or_not_admitting() -> None:
    book = book_with(
        pool("a", "192.0.2.0/30", auto_assign=False),
        pool("b", "192.0.2.4/30", problem="overlaps pool x"),
        pool("c", "192.0.2.8/30", deleting=True),
        pool("d", "192.0.2.12/30", service_selector=LabelSelector(match_labels={"team": "x"})),
        pool("e", "192.0.2.16/30", namespace_selector=LabelSelector(match_labels={"env": "p"})),
        pool("f", "192.0.2.20/30"),
    )
    assert book.plan("default/web", svc()).acquire == (Acquire(ip("192.0.2.21"), "f"),)
    labelled = svc("api", labels={"team": "x"})
    assert book.plan("default/api", labelled).acquire == (Acquire(ip("192.0.2.13"), "d"),)
    plan = book.plan("default/db", svc("db"), {"env": "p"})
    assert plan.acquire == (Acquire(ip("192.0.2.17"), "e"),)


def test_named_pool_is_used_even_without_autoassign_and_in_annotation_order() -> None:
    book = book_with(pool("a", "192.0.2.0/30"), pool("z", "198.51.100.0/30", auto_assign=False))
    plan = book.plan(
        "default/web", svc(annotations={"external-ip": "auto", "external-ip-pool": "z,a"})
    )
    assert plan.acquire == (Acquire(ip("198.51.100.1"), "z"),)


def test_exhausted_pool_waits_with_a_problem_and_overflows_to_the_next() -> None:
    book = book_with(pool("a", "192.0.2.0/31"), pool("b", "192.0.2.8/32"))
    got = []
    for i in range(4):
        plan = book.plan(f"default/s{i}", svc(f"s{i}"))
        settle_all(book, f"default/s{i}", plan.acquire)
        got.append(plan)
    assert [p.desired for p in got[:3]] == [
        (ip("192.0.2.0"),),
        (ip("192.0.2.1"),),
        (ip("192.0.2.8"),),
    ]
    assert got[3].desired == ()
    assert [(p.reason, p.waiting) for p in got[3].problems] == [("PoolExhausted", True)]


@pytest.mark.parametrize(
    ("annotations", "reason", "text"),
    [
        ({"external-ip": "auto", "external-ip-pool": "nope"}, "NoPool", "pool nope does not exist"),
        ({"external-ip": "203.0.113.9"}, "IPNotInPool", "203.0.113.9 is not in any pool"),
        ({"external-ip": "bogus"}, "InvalidAnnotation", "'bogus' is neither"),
    ],
)
def test_bad_requests_give_problems_not_allocations(
    annotations: dict[str, str], reason: str, text: str
) -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    plan = book.plan("default/web", svc(annotations=annotations))
    assert plan.acquire == () and plan.release == ()
    assert plan.problems[0].reason == reason
    assert text in plan.problems[0].message


# ------------------------------------------------------------------ dual stack


def test_dual_stack_auto_gets_one_of_each_family() -> None:
    book = book_with(pool("v4", "192.0.2.0/30"), pool("v6", "2001:db8::/126"))
    plan = book.plan("default/web", svc(ip_families=(4, 6)))
    assert plan.desired == (ip("192.0.2.1"), ip("2001:db8::1"))


def test_dual_stack_is_served_as_far_as_pools_allow() -> None:
    book = book_with(pool("v4", "192.0.2.0/30"))
    plan = book.plan("default/web", svc(ip_families=(4, 6)))
    assert plan.desired == (ip("192.0.2.1"),) and plan.problems == ()


def test_single_family_service_skips_pools_of_the_other_family() -> None:
    book = book_with(pool("a", "192.0.2.0/30"), pool("b", "2001:db8::/126"))
    assert book.plan("default/web", svc(ip_families=(6,))).desired == (ip("2001:db8::1"),)


# ------------------------------------------------------------------ keep / release


def test_held_ip_is_kept_and_nothing_new_is_planned() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.2"), "a", ("default/web",)))
    plan = book.plan("default/web", svc())
    assert plan.keep == (ip("192.0.2.2"),) and plan.acquire == () and plan.release == ()


@pytest.mark.parametrize(
    "service",
    [None, svc(annotations={}), svc(annotations={"external-ip": "auto", "external-ip-pool": "b"})],
    ids=["service-gone", "annotation-removed", "moved-to-other-pool"],
)
def test_release(service: ServiceInfo | None) -> None:
    book = book_with(pool("a", "192.0.2.0/30"), pool("b", "198.51.100.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    plan = book.plan("default/web", service)
    assert plan.release == (ip("192.0.2.1"),)
    assert ip("192.0.2.1") not in plan.desired


def test_literal_change_releases_the_old_ip_and_takes_the_new() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    plan = book.plan("default/web", svc(annotations={"external-ip": "192.0.2.5"}))
    assert plan.release == (ip("192.0.2.1"),)
    assert plan.acquire == (Acquire(ip("192.0.2.5"), "a"),)


def test_bad_annotation_keeps_what_is_held() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    plan = book.plan("default/web", svc(annotations={"external-ip": "oops"}))
    assert plan.keep == (ip("192.0.2.1"),) and plan.release == ()


@pytest.mark.parametrize(
    ("new_pool", "reason"),
    [
        (pool("a", "192.0.2.0/30", ranges=[["192.0.2.2", "192.0.2.2"]]), "OutsidePool"),
        (pool("a", "192.0.2.0/30", deleting=True), "PoolDeleting"),
        (
            pool("a", "192.0.2.0/30", service_selector=LabelSelector(match_labels={"x": "y"})),
            "NotAdmitted",
        ),
        (pool("a", "192.0.2.0/30", auto_assign=False), "NotAdmitted"),
        (None, "PoolNotFound"),
    ],
)
def test_shrunk_or_deleted_pool_keeps_the_allocation_and_marks_it(
    new_pool: PoolInfo | None, reason: str
) -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    book.set_pools([new_pool] if new_pool else [])
    plan = book.plan("default/web", svc())
    assert plan.keep == (ip("192.0.2.1"),) and plan.release == ()
    assert [m.reason for m in plan.marks] == [reason]


def test_purge_on_pool_delete_releases_and_moves_elsewhere() -> None:
    book = book_with(
        pool("a", "192.0.2.0/30", deleting=True), pool("b", "198.51.100.0/30"), purge=True
    )
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    plan = book.plan("default/web", svc())
    assert plan.release == (ip("192.0.2.1"),)
    assert plan.acquire == (Acquire(ip("198.51.100.1"), "b"),)


# ------------------------------------------------------------------ sharing


def test_literal_ip_held_by_another_service_is_refused_with_the_holder() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    plan = book.plan("default/api", svc("api", annotations={"external-ip": "192.0.2.1"}))
    assert plan.desired == ()
    assert plan.problems[0].reason == "IPInUse" and "default/web" in plan.problems[0].message


def test_same_sharing_key_joins_the_one_claim() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    shared = {"external-ip": "192.0.2.1", "external-ip-sharing-key": "k"}
    plan = book.plan("default/api", svc("api", annotations=shared))
    assert plan.acquire == (Acquire(ip("192.0.2.1"), "a", join=True),)
    other = {"external-ip": "192.0.2.1", "external-ip-sharing-key": "other"}
    assert book.plan("default/db", svc("db", annotations=other)).problems[0].reason == "IPInUse"


def test_auto_with_sharing_key_joins_an_ip_with_that_key() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.2"), "a", ("default/web",), sharing_key="k"))
    plan = book.plan(
        "default/api",
        svc("api", annotations={"external-ip": "auto", "external-ip-sharing-key": "k"}),
    )
    assert plan.acquire == (Acquire(ip("192.0.2.2"), "a", join=True),)


def test_shared_ip_release_by_one_holder_only_drops_that_holder() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(
        ClaimInfo(ip("192.0.2.1"), "a", ("default/api", "default/web"), sharing_key="k")
    )
    assert book.plan("default/web", None).release == (ip("192.0.2.1"),)
    literal = {"external-ip": "192.0.2.1", "external-ip-sharing-key": "k"}
    assert book.plan("default/api", svc("api", annotations=literal)).keep == (ip("192.0.2.1"),)


# ------------------------------------------------------------------ families


def test_any_family_slot_takes_first_pool_of_either_family() -> None:
    book = book_with(pool("a6", "2001:db8::/126"), pool("b4", "192.0.2.0/30"))
    plan = book.plan("default/web", svc())
    assert plan.desired == (ip("2001:db8::1"),)
    assert Request().families == (ANY_FAMILY,)


def test_dual_stack_with_no_pool_of_either_family_waits_with_a_problem() -> None:
    book = book_with(pool("a", "192.0.2.0/30", auto_assign=False))
    plan = book.plan("default/web", svc(ip_families=(4, 6)))
    assert plan.desired == ()
    assert [(p.reason, p.waiting) for p in plan.problems] == [("NoPool", True)]
