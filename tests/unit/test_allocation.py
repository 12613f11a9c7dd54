"""The allocator's pure decisions: requests, pool order, keep/acquire/release, sharing.

Tables for the rules, and hypothesis for the invariants: no IP is ever planned for two
Services (unless they share a key), release frees, and inputs are never mutated.
"""

from __future__ import annotations

import copy
from ipaddress import ip_address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eipctl.core.allocation import (
    ANY_FAMILY,
    Acquire,
    AllocationBook,
    ClaimInfo,
    PoolInfo,
    Request,
    RequestError,
    ServiceInfo,
    parse_request,
)
from eipctl.core.pool import Pool
from eipctl.core.selectors import LabelSelector


def ip(text: str):  # type: ignore[no-untyped-def]
    return ip_address(text)


def pool(name: str, cidr: str, **kw: object) -> PoolInfo:
    ranges = kw.pop("ranges", None)
    return PoolInfo(name=name, pool=Pool.parse(name, cidr, ranges), **kw)  # type: ignore[arg-type]


def svc(name: str = "web", annotations: dict[str, str] | None = None, **kw: object) -> ServiceInfo:
    return ServiceInfo(
        key=f"default/{name}",
        namespace="default",
        annotations={"external-ip": "auto"} if annotations is None else annotations,
        **kw,  # type: ignore[arg-type]
    )


def book_with(*pools: PoolInfo, purge: bool = False) -> AllocationBook:
    book = AllocationBook(purge_on_pool_delete=purge)
    book.set_pools(pools)
    return book


def settle_all(book: AllocationBook, plan_key: str, acquires: tuple[Acquire, ...]) -> None:
    """What the process does after the creates succeed."""
    for acq in acquires:
        old = book.claim(acq.ip)
        services = (*old.services, plan_key) if old else (plan_key,)
        book.settle(acq.ip, plan_key, ClaimInfo(acq.ip, acq.pool, services))


# ------------------------------------------------------------------ parse_request


@pytest.mark.parametrize(
    ("annotations", "families", "expected"),
    [
        ({}, (), None),
        ({"external-ip": "auto"}, (), Request()),
        ({"external-ip": " AUTO "}, (4,), Request(families=(4,))),
        ({"external-ip": "auto"}, (4, 6), Request(families=(4, 6))),
        (
            {"external-ip": "auto", "external-ip-pool": "a, b", "external-ip-sharing-key": "k"},
            (),
            Request(pools=("a", "b"), sharing_key="k"),
        ),
        ({"external-ip": "192.0.2.7"}, (6,), Request(ips=(ip("192.0.2.7"),), families=(4,))),
        (
            {"external-ip": "192.0.2.7, 2001:db8::7"},
            (),
            Request(ips=(ip("192.0.2.7"), ip("2001:db8::7")), families=(4, 6)),
        ),
    ],
)
def test_parse_request(
    annotations: dict[str, str], families: tuple[int, ...], expected: object
) -> None:
    assert parse_request(annotations, families) == expected


@pytest.mark.parametrize(
    "value", ["", "yes", "192.0.2.300", "192.0.2.1,192.0.2.2", "::ffff:192.0.2.1", "fe80::1%eth0"]
)
def test_parse_request_rejects_with_a_clear_message(value: str) -> None:
    with pytest.raises(RequestError, match="external-ip"):
        parse_request({"external-ip": value}, ())


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
        ({"external-ip": "auto", "external-ip-pool": "nope"}, "NoPool", "nope not found"),
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


def test_two_claims_for_one_slot_keep_the_recorded_one() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    book.claim_seen(ClaimInfo(ip("192.0.2.2"), "a", ("default/web",)))
    plan = book.plan("default/web", svc(recorded=(ip("192.0.2.2"),)))
    assert plan.keep == (ip("192.0.2.2"),) and plan.release == (ip("192.0.2.1"),)


def test_recorded_ip_without_claim_is_repaired_before_anyone_else_gets_it() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.reserve_recorded("default/web", [ip("192.0.2.5")])
    other = book.plan("default/other", svc("other"))
    assert other.desired == (ip("192.0.2.1"),)
    plan = book.plan("default/web", svc(recorded=(ip("192.0.2.5"),)))
    assert plan.acquire == (Acquire(ip("192.0.2.5"), "a"),)


def test_scheduler_claims_are_in_use_but_never_released_by_the_allocator() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), owned=False))
    plan = book.plan("default/web", None)
    assert plan.release == ()
    assert book.plan("default/x", svc("x")).desired == (ip("192.0.2.2"),)
    plan = book.plan("default/y", svc("y", annotations={"external-ip": "192.0.2.1"}))
    assert plan.problems[0].reason == "IPInUse"
    assert "hand-set externalIPs of default/web" in plan.problems[0].message


def test_failed_acquire_settles_back_to_free() -> None:
    book = book_with(pool("a", "192.0.2.0/30"))
    plan = book.plan("default/web", svc())
    book.settle(plan.acquire[0].ip, "default/web", None)
    assert book.counts("a") == (0, 2)
    assert book.plan("default/x", svc("x")).desired == plan.desired


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
    assert book.plan("default/api", svc("api", annotations={"external-ip": "192.0.2.1"})).keep == (
        ip("192.0.2.1"),
    )


# ------------------------------------------------------------------ counts and pools


def test_counts_follow_claims_and_pool_changes() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",)))
    assert book.counts("a") == (1, 5)
    book.set_pools([pool("a", "192.0.2.0/28")])
    assert book.counts("a") == (1, 13)
    book.claim_gone(ip("192.0.2.1"))
    assert book.counts("a") == (0, 14)


def test_pool_created_later_serves_waiting_service() -> None:
    book = book_with()
    assert book.plan("default/web", svc()).problems[0].reason == "NoPool"
    book.set_pools([pool("a", "192.0.2.0/30")])
    assert book.plan("default/web", svc()).desired == (ip("192.0.2.1"),)


# ------------------------------------------------------------------ properties

names = st.lists(st.sampled_from([f"s{i}" for i in range(12)]), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([f"s{i}" for i in range(10)]),
            st.sampled_from(["auto", "none", "gone", "192.0.2.3", "2001:db8::2", "auto-a", "bad"]),
            st.sampled_from([(), (4,), (6,), (4, 6)]),
            st.booleans(),  # does the create succeed?
        ),
        max_size=60,
    )
)
def test_no_ip_twice_release_frees_reload_keeps_inputs_untouched(
    steps: list[tuple[str, str, tuple[int, ...], bool]],
) -> None:
    pools = (pool("a", "192.0.2.0/29"), pool("b", "192.0.2.8/30"), pool("v6", "2001:db8::/125"))
    book = book_with(*pools)
    last: dict[str, ServiceInfo | None] = {}
    for name, kind, families, succeeds in steps:
        key = f"default/{name}"
        annotations = {
            "auto": {"external-ip": "auto"},
            "none": {},
            "192.0.2.3": {"external-ip": "192.0.2.3"},
            "2001:db8::2": {"external-ip": "2001:db8::2"},
            "auto-a": {"external-ip": "auto", "external-ip-pool": "a"},
            "bad": {"external-ip": "bad"},
        }.get(kind, {})
        service = (
            None if kind == "gone" else svc(name, annotations=annotations, ip_families=families)
        )
        last[key] = service
        before = copy.deepcopy(service)
        plan = book.plan(key, service)
        assert service == before
        assert not set(plan.keep) & set(plan.release)
        for acq in plan.acquire:
            owner = book.claim(acq.ip)
            assert owner is None or acq.join, f"{acq.ip} planned while held by {owner}"
        for rel in plan.release:
            book.claim_gone(rel)
        if succeeds:
            settle_all(book, key, plan.acquire)
        else:
            for acq in plan.acquire:
                book.settle(acq.ip, key, None)
        # invariants: every claim lists distinct services, no service holds two IPs of a family
        held: dict[str, list[int]] = {}
        for claim in book.claims():
            for s in claim.services:
                held.setdefault(s, []).append(claim.ip.version)
        for versions in held.values():
            assert len(versions) == len(set(versions))
        for name_ in ("a", "b", "v6"):
            _, free = book.counts(name_)
            info = book.pool(name_)
            assert info is not None and info.pool is not None
            in_range = sum(1 for c in book.claims() if info.pool.contains(c.ip))
            assert free == info.pool.size - in_range
    # reload (a new leader): a book rebuilt from the claims keeps every valid assignment
    reloaded = book_with(*pools)
    for claim in book.claims():
        reloaded.claim_seen(claim)
    for key, service in last.items():
        held = {c.ip for c in book.held_by(key)}
        plan = reloaded.plan(key, service)
        assert set(plan.keep) == held and plan.release == ()
    for claim in book.claims():
        book.claim_gone(claim.ip)
    assert all(book.counts(n)[0] == 0 for n in ("a", "b", "v6"))
    assert book.counts("a")[1] == 6 and book.counts("b")[1] == 2


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


def test_unused_startup_reservation_is_freed_when_the_service_moved_pools() -> None:
    book = book_with(pool("a", "192.0.2.0/29"), pool("b", "198.51.100.0/30"))
    book.reserve_recorded("default/web", [ip("192.0.2.5")])
    moved = svc(
        annotations={"external-ip": "auto", "external-ip-pool": "b"}, recorded=(ip("192.0.2.5"),)
    )
    plan = book.plan("default/web", moved)
    assert plan.desired == (ip("198.51.100.1"),)
    assert book.counts("a") == (0, 6)
