"""The allocation book's state: restart repair, settling, counts, and its invariants.

Hypothesis checks that no IP is ever planned for two Services (unless they share a key),
release frees, reloading keeps valid assignments, and inputs are never mutated.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from test_allocation_support import book_with, ip, pool, settle_all, svc

from eipctl.core.allocation_inputs import ClaimInfo, ServiceInfo
from eipctl.core.allocation_plan import Acquire

# ------------------------------------------------------------------ restarts and settling


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


def test_unused_startup_reservation_is_freed_when_the_service_moved_pools() -> None:
    book = book_with(pool("a", "192.0.2.0/29"), pool("b", "198.51.100.0/30"))
    book.reserve_recorded("default/web", [ip("192.0.2.5")])
    moved = svc(
        annotations={"external-ip": "auto", "external-ip-pool": "b"}, recorded=(ip("192.0.2.5"),)
    )
    plan = book.plan("default/web", moved)
    assert plan.desired == (ip("198.51.100.1"),)
    assert book.counts("a") == (0, 6)
