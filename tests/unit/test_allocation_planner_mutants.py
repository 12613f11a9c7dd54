"""core/allocation_planner.py and core/sharing.py: the exact Problems, Marks and choices that
mutation testing found unpinned (docs/testing.md, "Mutation").

Problems become Events on the Service and `waiting` decides whether the allocator retries
on change, so each case pins reason, message and `waiting` together.
"""

from __future__ import annotations

from typing import Any

from test_allocation_support import book_with, ip, pool, svc

from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo, ServiceInfo
from eipctl.core.allocation_plan import Acquire, AllocationPlan, Mark, Problem
from eipctl.core.selectors import LabelSelector
from eipctl.core.sharing import came_first, clash

AUTO = {"external-ip": "auto"}
KEY = {"external-ip": "auto", "external-ip-sharing-key": "k"}


def tcp(*ports: int) -> frozenset[tuple[str, int]]:
    return frozenset(("TCP", p) for p in ports)


def literal(addr: str, **more: str) -> dict[str, str]:
    return {"external-ip": addr, **more}


def held(book: AllocationBook, addr: str, pool_name: str, *services: str, **kw: Any) -> None:
    book.claim_seen(ClaimInfo(ip(addr), pool_name, services or ("default/web",), **kw))


# ------------------------------------------------------------------ marks on kept IPs


def test_each_mark_on_a_kept_ip_says_why_in_full() -> None:
    book = book_with(
        pool("deleting", "192.0.2.0/29", deleting=True),
        pool("small", "192.0.2.8/31"),
        pool("picky", "192.0.2.16/29", service_selector=LabelSelector(match_labels={"t": "x"})),
        pool("manual", "192.0.2.24/29", auto_assign=False),
    )
    cases = [
        ("192.0.2.1", "deleting", "PoolDeleting", "pool 'deleting' is being deleted"),
        ("192.0.2.12", "small", "OutsidePool", "192.0.2.12 is no longer in pool 'small'"),
        (
            "192.0.2.17",
            "picky",
            "NotAdmitted",
            "pool 'picky' no longer admits it: pool picky's serviceSelector t=x does not match "
            "the Service's labels (none)",
        ),
        ("192.0.2.25", "manual", "NotAdmitted", "pool 'manual' no longer has autoAssign"),
        ("198.51.100.1", "gone", "PoolNotFound", "pool 'gone' does not exist"),
    ]
    for addr, pool_name, reason, why in cases:
        book = book_with(*book.pools())
        held(book, addr, pool_name)
        plan = book.plan("default/web", svc())
        assert plan.keep == (ip(addr),)
        assert plan.marks == (Mark(ip(addr), reason, f"kept {addr}: {why}"),)


def test_a_kept_ip_that_still_fits_gets_no_mark() -> None:
    ns = LabelSelector(match_labels={"env": "p"})
    book = book_with(pool("p", "192.0.2.0/29", namespace_selector=ns))
    held(book, "192.0.2.1", "p")
    plan = book.plan("default/web", svc(), {"env": "p"})
    assert (plan.keep, plan.marks, plan.problems) == ((ip("192.0.2.1"),), (), ())
    # a literal in a pool without autoAssign is not "no longer autoAssign"
    book = book_with(pool("manual", "192.0.2.0/29", auto_assign=False))
    held(book, "192.0.2.1", "manual")
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert (plan.keep, plan.marks) == ((ip("192.0.2.1"),), ())
    # nor a named pool's
    book = book_with(pool("manual", "192.0.2.0/29", auto_assign=False))
    held(book, "192.0.2.1", "manual")
    plan = book.plan("default/web", svc(annotations={**AUTO, "external-ip-pool": "manual"}))
    assert (plan.keep, plan.marks) == ((ip("192.0.2.1"),), ())


def test_a_literal_held_in_a_named_pool_is_kept() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    held(book, "192.0.2.3", "a")
    plan = book.plan(
        "default/web", svc(annotations=literal("192.0.2.3", **{"external-ip-pool": "a"}))
    )
    assert plan == AllocationPlan("default/web", keep=(ip("192.0.2.3"),))


# ------------------------------------------------------------------ no pool, exhausted


def test_no_pool_problems_name_what_was_wanted() -> None:
    book = book_with(pool("v4", "192.0.2.0/30"))
    six = book.plan("default/web", svc(ip_families=(6,)))
    family = "pool v4 gives IPv4, the Service wants IPv6"
    assert six.problems == (Problem("NoPool", f"no pool can give an IPv6 address: {family}", True),)
    why = "there is no IpClaimPool at all"
    empty = AllocationBook()
    anything = empty.plan("default/web", svc())
    assert anything.problems == (Problem("NoPool", f"no pool can give an IP: {why}", True),)
    dual = empty.plan("default/web", svc(ip_families=(4, 6)))
    assert dual.problems == (
        Problem("NoPool", f"no pool can give any of its families: {why}", True),
    )
    assert (dual.service, dual.deferred) == ("default/web", "")


def test_exhausted_pools_are_named_in_order() -> None:
    book = book_with(pool("a", "192.0.2.0/32"), pool("b", "192.0.2.8/32"))
    held(book, "192.0.2.0", "a", "default/x")
    held(book, "192.0.2.8", "b", "default/y")
    plan = book.plan("default/web", svc())
    assert plan.problems == (
        Problem("PoolExhausted", "no free address for an IP in a, b", waiting=True),
    )


# ------------------------------------------------------------------ recorded IPs (repair)


def test_a_recorded_ip_is_taken_back_only_if_nobody_else_uses_it() -> None:
    def plan_with(setup: str) -> tuple[Acquire, ...]:
        book = book_with(pool("p", "192.0.2.0/29"))
        if setup == "claimed":
            held(book, "192.0.2.1", "p", "default/other")
        elif setup == "pending":
            book.reserve_pending(ip("192.0.2.1"), "default/other", sharing_key="", pool="p")
        elif setup == "by hand":
            book.service_seen(svc("other", hand_set=(ip("192.0.2.1"),)))
        return book.plan("default/web", svc(recorded=(ip("192.0.2.1"), ip("192.0.2.5")))).acquire

    assert plan_with("free") == (Acquire(ip("192.0.2.1"), "p"),)
    for setup in ("claimed", "pending", "by hand"):  # the next recorded one, not the lowest
        assert plan_with(setup) == (Acquire(ip("192.0.2.5"), "p"),), setup


# ------------------------------------------------------------------ literals


def test_literal_problems_in_full() -> None:
    book = book_with(pool("a", "192.0.2.0/30"), pool("b", "192.0.2.4/30"))
    plan = book.plan("default/web", svc(annotations=literal("198.51.100.1")))
    assert plan.problems == (
        Problem(
            "IPNotInPool",
            "198.51.100.1 is not in any pool that admits the Service: pool a (192.0.2.0/30) does "
            "not contain 198.51.100.1; pool b (192.0.2.4/30) does not contain 198.51.100.1",
            True,
        ),
    )
    named = literal("198.51.100.1", **{"external-ip-pool": "a,b"})
    plan = book.plan("default/web", svc(annotations=named))
    assert plan.problems == (
        Problem(
            "IPNotInPool",
            "198.51.100.1 is not in pool a, b that admits the Service: pool a (192.0.2.0/30) "
            "does not contain 198.51.100.1; pool b (192.0.2.4/30) does not contain 198.51.100.1",
            True,
        ),
    )


def test_a_literal_may_come_from_a_pool_without_autoassign() -> None:
    book = book_with(pool("manual", "192.0.2.0/30", auto_assign=False))
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.2")))
    assert plan.acquire == (Acquire(ip("192.0.2.2"), "manual"),)


def test_a_literal_set_by_hand_elsewhere_is_in_use_with_every_user_named() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("x", hand_set=(ip("192.0.2.1"),)))
    book.service_seen(svc("y", hand_set=(ip("192.0.2.1"),)))
    held(book, "192.0.2.1", "p", "default/x", owned=False)
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert plan.problems == (
        Problem("IPInUse", "192.0.2.1 is set by hand on default/x, default/y", True),
    )


def test_a_literal_held_by_others_names_them() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    held(book, "192.0.2.1", "p", "default/a", "default/b")
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert plan.problems == (Problem("IPInUse", "192.0.2.1 is held by default/a, default/b", True),)
    # a scheduler-made (hand-set) claim
    book = book_with(pool("p", "192.0.2.0/29"))
    held(book, "192.0.2.1", "p", "default/a", owned=False)
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert plan.problems == (
        Problem("IPInUse", "192.0.2.1 is held by hand-set externalIPs of default/a", True),
    )


def test_a_literal_pending_for_another_service_is_in_use_unless_it_may_be_joined() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.reserve_pending(ip("192.0.2.1"), "default/a", sharing_key="", pool="p")
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert (plan.deferred, plan.problems) == (
        "",
        (Problem("IPInUse", "192.0.2.1 is held by default/a", True),),
    )
    # same key, but the reserving Service's ports clash: not joined, not waited for
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("a", annotations=KEY, ports=tcp(80)))
    book.reserve_pending(ip("192.0.2.1"), "default/a", sharing_key="k", pool="p")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/web", svc(annotations=key, ports=tcp(80)))
    assert (plan.deferred, plan.problems) == (
        "",
        (Problem("IPInUse", "192.0.2.1 is held by default/a", True),),
    )


def test_a_shared_literal_with_a_port_clash_says_so() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("a", annotations=KEY, ports=tcp(80)))
    held(book, "192.0.2.1", "p", "default/a", sharing_key="k")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/web", svc(annotations=key, ports=tcp(80, 443)))
    why = "TCP/80 used by both default/web and default/a"
    assert plan.problems == (
        Problem("PortClash", f"192.0.2.1 is shared under key 'k', but {why}", True),
    )


# ------------------------------------------------------------------ sharing


def test_joining_looks_only_at_the_pools_the_service_may_use() -> None:
    book = book_with(pool("a", "192.0.2.0/29"), pool("other", "198.51.100.0/29"))
    held(book, "198.51.100.1", "other", "default/x", sharing_key="k")
    annotations = {**KEY, "external-ip-pool": "a"}
    plan = book.plan("default/web", svc(annotations=annotations))
    assert plan.acquire == (Acquire(ip("192.0.2.1"), "a"),)
    # nor waits for a pending one in another pool
    book = book_with(pool("a", "192.0.2.0/29"), pool("other", "198.51.100.0/29"))
    book.reserve_pending(ip("198.51.100.1"), "default/x", sharing_key="k", pool="other")
    plan = book.plan("default/web", svc(annotations=annotations))
    assert (plan.deferred, plan.acquire) == ("", (Acquire(ip("192.0.2.1"), "a"),))


def test_refusals_to_share_are_all_listed_and_do_not_wait() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("a", annotations=KEY, ports=tcp(80)))
    book.service_seen(svc("b", annotations=KEY, ports=tcp(443)))
    held(book, "192.0.2.1", "p", "default/a", sharing_key="k")
    held(book, "192.0.2.2", "p", "default/b", sharing_key="k")
    plan = book.plan("default/web", svc(annotations=KEY, ports=tcp(80, 443)))
    assert plan.problems == (
        Problem(
            "SharingRefused",
            "not sharing 192.0.2.1: TCP/80 used by both default/web and default/a; "
            "not sharing 192.0.2.2: TCP/443 used by both default/web and default/b",
            waiting=False,
        ),
    )
    assert plan.acquire == (Acquire(ip("192.0.2.3"), "p"),)


def test_a_pending_shared_ip_whose_reserver_clashes_is_refused_not_waited_for() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("a", annotations=KEY, ports=tcp(80)))
    book.reserve_pending(ip("192.0.2.1"), "default/a", sharing_key="k", pool="p")
    plan = book.plan("default/web", svc(annotations=KEY, ports=tcp(80)))
    assert plan.deferred == ""
    assert plan.problems == (
        Problem(
            "SharingRefused",
            "not sharing 192.0.2.1: TCP/80 used by both default/web and default/a",
            waiting=False,
        ),
    )


def test_the_first_pending_shared_ip_that_fits_is_waited_for() -> None:
    book = book_with(pool("a", "192.0.2.0/29"), pool("other", "192.0.2.8/29"))
    book.reserve_pending(ip("192.0.2.3"), "default/x", sharing_key="k", pool="a")
    book.reserve_pending(ip("192.0.2.1"), "default/web", sharing_key="k", pool="a")  # its own
    plan = book.plan("default/web2", svc("web2", annotations={**KEY, "external-ip-pool": "a"}))
    assert plan.deferred == "waiting for 192.0.2.1 (key 'k') being reserved for default/web"
    # its own pending reservation is never waited for
    plan = book.plan("default/web", svc(annotations={**KEY, "external-ip-pool": "a"}))
    assert plan.deferred == "waiting for 192.0.2.3 (key 'k') being reserved for default/x"


def clashing_sharers() -> tuple[AllocationBook, ServiceInfo, ServiceInfo]:
    """default/old and the later default/new share 192.0.2.1 under key k, both on TCP/80."""
    book = book_with(pool("p", "192.0.2.0/29"))
    old = svc("old", annotations=KEY, ports=tcp(80), created="2026-01-01T00:00:00Z")
    new = svc("new", annotations=KEY, ports=tcp(80), created="2026-01-02T00:00:00Z")
    book.service_seen(old)
    book.service_seen(new)
    held(book, "192.0.2.1", "p", "default/old", "default/new", sharing_key="k")
    return book, old, new


def test_only_the_later_service_gives_up_a_shared_ip_when_ports_start_to_clash() -> None:
    book, old, new = clashing_sharers()
    plan_old = book.plan("default/old", old)
    assert (plan_old.keep, plan_old.problems) == ((ip("192.0.2.1"),), ())
    plan_new = book.plan("default/new", new)
    assert plan_new.release == (ip("192.0.2.1"),)
    assert plan_new.problems[0] == Problem(
        "PortClash", "gives up 192.0.2.1: TCP/80 used by both default/new and default/old"
    )


def test_clash_messages_and_the_order_of_creation() -> None:
    a = ServiceInfo("default/a", "default", ports=tcp(80, 443))
    b = ServiceInfo("default/b", "default", ports=tcp(80, 443))
    assert clash(a, b) == "TCP/80, TCP/443 used by both default/a and default/b"
    local = ServiceInfo("default/c", "default", local_traffic=True, selector=(("app", "c"),))
    other = ServiceInfo("default/d", "default", selector=(("app", "d"),))
    assert clash(local, other) == (
        "externalTrafficPolicy Local needs the same selector, and default/c and default/d "
        "select different Pods"
    )
    assert not came_first(a, a)  # strict: a Service is not older than itself
    assert came_first(a, b)


def test_a_claim_nobody_is_listed_on_is_held_by_another_claim() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", ()))
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert plan.problems == (Problem("IPInUse", "192.0.2.1 is held by another claim", True),)


def test_a_keyed_literal_does_not_wait_for_an_unkeyed_reservation() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.reserve_pending(ip("192.0.2.1"), "default/a", sharing_key="", pool="p")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/web", svc(annotations=key))
    assert (plan.deferred, plan.problems) == (
        "",
        (Problem("IPInUse", "192.0.2.1 is held by default/a", True),),
    )


def test_services_of_one_key_wait_for_the_ip_the_first_is_reserving() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    first = book.plan("default/a", svc("a", annotations=KEY, ports=tcp(80)))
    assert first.acquire == (Acquire(ip("192.0.2.1"), "p"),)
    second = book.plan("default/b", svc("b", annotations=KEY, ports=tcp(443)))
    assert second.acquire == ()
    assert second.deferred == "waiting for 192.0.2.1 (key 'k') being reserved for default/a"


def test_why_no_named_pool_can_give_an_ip() -> None:
    book = book_with(pool("a", "192.0.2.0/29", problem="bad"), pool("b", "192.0.2.8/29"))
    missing = book.plan("default/web", svc(annotations={**AUTO, "external-ip-pool": "x,y"}))
    assert missing.problems[0].message.endswith(": pool x does not exist; pool y does not exist")
    unready = svc(annotations={**AUTO, "external-ip-pool": "a,b"}, ip_families=(6,))
    plan = book.plan("default/web", unready)
    assert plan.problems[0].message.endswith(
        ": pool a is not Ready: bad; pool b gives IPv4, the Service wants IPv6"
    )


def test_a_pinned_pool_that_refuses_the_namespace_says_so_not_maybe_not_ready() -> None:
    """#33: a Service pinned to a Ready pool whose namespaceSelector refuses it was told
    "pool a-team is not Ready or does not admit it"; the message names the one real cause."""
    team = pool(
        "a-team", "192.0.2.0/29", namespace_selector=LabelSelector(match_labels={"team": "a"})
    )
    book = book_with(team)
    pinned = svc(annotations={**AUTO, "external-ip-pool": "a-team"})
    plan = book.plan("default/web", pinned, {"team": "b"})
    assert plan.problems == (
        Problem(
            "NoPool",
            "no pool can give an IP: pool a-team's namespaceSelector team=a does not match "
            "namespace default's labels (team=b)",
            True,
        ),
    )
    selected = pool(
        "web-only", "192.0.2.8/29", service_selector=LabelSelector(match_labels={"tier": "web"})
    )
    plan = book_with(selected).plan("default/web", svc(), {})
    assert plan.problems[0].message == (
        "no pool can give an IP: pool web-only's serviceSelector tier=web does not match the "
        "Service's labels (none)"
    )


def test_an_auto_service_of_the_key_waits_for_a_literal_being_reserved() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    keyed_literal = literal("192.0.2.5", **{"external-ip-sharing-key": "k"})
    first = book.plan("default/a", svc("a", annotations=keyed_literal, ports=tcp(80)))
    assert first.acquire == (Acquire(ip("192.0.2.5"), "p"),)
    second = book.plan("default/b", svc("b", annotations=KEY, ports=tcp(443)))
    assert second.deferred == "waiting for 192.0.2.5 (key 'k') being reserved for default/a"


# ------------------------------------------------------------------ guard mutants (session 17)


def test_a_held_literal_in_a_pool_the_service_no_longer_names_is_released() -> None:
    """Naming another pool releases the literal (module docstring); it is not kept."""
    book = book_with(pool("a", "192.0.2.0/29"), pool("b", "198.51.100.0/29"))
    held(book, "192.0.2.3", "a")
    plan = book.plan(
        "default/web", svc(annotations=literal("192.0.2.3", **{"external-ip-pool": "b"}))
    )
    assert (plan.keep, plan.release) == ((), (ip("192.0.2.3"),))
    assert [p.reason for p in plan.problems] == ["IPNotInPool"]


def test_a_later_service_gives_up_a_shared_literal_whose_ports_now_clash_and_waits() -> None:
    """A literal is not re-keyed by keeping it: the later holder lets go and waits."""
    book = book_with(pool("p", "192.0.2.0/29"))
    old = svc("old", annotations=KEY, ports=tcp(80), created="2026-01-01T00:00:00Z")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    new = svc("new", annotations=key, ports=tcp(80), created="2026-01-02T00:00:00Z")
    book.service_seen(old)
    book.service_seen(new)
    held(book, "192.0.2.1", "p", "default/old", "default/new", sharing_key="k")
    why = "TCP/80 used by both default/new and default/old"
    assert book.plan("default/new", new) == AllocationPlan(
        "default/new",
        release=(ip("192.0.2.1"),),
        problems=(
            Problem("PortClash", f"gives up 192.0.2.1: {why}"),
            Problem("PortClash", f"192.0.2.1 is shared under key 'k', but {why}", True),
        ),
    )


def test_a_service_giving_up_a_shared_ip_does_not_also_refuse_to_share_it() -> None:
    """The IP it gives up is no candidate to join: one PortClash, no SharingRefused."""
    book, _, new = clashing_sharers()
    plan = book.plan("default/new", new)
    assert plan.problems == (
        Problem("PortClash", "gives up 192.0.2.1: TCP/80 used by both default/new and default/old"),
    )
    assert plan.acquire == (Acquire(ip("192.0.2.2"), "p"),)


def test_the_first_service_of_a_key_acquires_with_no_problem_and_the_next_only_waits() -> None:
    """Nothing refused means no SharingRefused; a deferred plan is no NoPool either."""
    book = book_with(pool("p", "192.0.2.0/29"))
    first = book.plan("default/a", svc("a", annotations=KEY, ports=tcp(80)))
    assert first == AllocationPlan("default/a", acquire=(Acquire(ip("192.0.2.1"), "p"),))
    second = book.plan("default/b", svc("b", annotations=KEY, ports=tcp(443)))
    assert second == AllocationPlan(
        "default/b", deferred="waiting for 192.0.2.1 (key 'k') being reserved for default/a"
    )


def test_purge_on_pool_delete_releases_nothing_of_a_pool_that_stays() -> None:
    book = book_with(pool("p", "192.0.2.0/29"), purge=True)
    held(book, "192.0.2.3", "p")
    assert book.plan("default/web", svc()) == AllocationPlan("default/web", keep=(ip("192.0.2.3"),))


def test_a_kept_ip_whose_pool_spec_went_bad_is_marked_outside_the_pool() -> None:
    """A pool whose spec no longer parses (``pool`` None) keeps its IPs, marked."""
    book = book_with(pool("p", "192.0.2.0/29"))
    held(book, "192.0.2.3", "p")
    book.set_pools([PoolInfo("p", None, problem="bad cidr")])
    plan = book.plan("default/web", svc())
    assert plan.keep == (ip("192.0.2.3"),)
    assert plan.marks == (
        Mark(ip("192.0.2.3"), "OutsidePool", "kept 192.0.2.3: 192.0.2.3 is no longer in pool 'p'"),
    )


def test_dual_stack_pinned_to_pools_says_which_family_they_cannot_give() -> None:
    """Unpinned dual stack is served as far as pools allow; pinned, the missing family is a
    problem the user should see (the named pools were chosen for both)."""
    book = book_with(pool("v4", "192.0.2.0/29"))
    pinned = svc(annotations={**AUTO, "external-ip-pool": "v4"}, ip_families=(4, 6))
    plan = book.plan("default/web", pinned)
    assert plan.acquire == (Acquire(ip("192.0.2.1"), "v4"),)
    assert plan.problems == (
        Problem(
            "NoPool",
            "no pool can give an IPv6 address: pool v4 gives IPv4, the Service wants IPv6",
            True,
        ),
    )
    unpinned = book.plan("default/two", svc("two", ip_families=(4, 6)))
    assert (unpinned.acquire, unpinned.problems) == ((Acquire(ip("192.0.2.2"), "v4"),), ())


def test_a_claim_the_allocator_did_not_make_is_never_joined_whatever_its_key() -> None:
    """A scheduler-made claim (hand-set IPs) carrying a sharing key is still no shared IP."""
    book = book_with(pool("p", "192.0.2.0/29"))
    book.service_seen(svc("x", hand_set=(ip("192.0.2.1"),)))
    held(book, "192.0.2.1", "p", "default/x", owned=False, sharing_key="k")
    assert book.plan("default/web", svc(annotations=KEY)).acquire == (
        Acquire(ip("192.0.2.2"), "p"),
    )
    # as a literal, with its hand-setter gone from the book
    book = book_with(pool("p", "192.0.2.0/29"))
    held(book, "192.0.2.1", "p", "default/x", owned=False, sharing_key="k")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/web", svc(annotations=key))
    assert (plan.acquire, plan.problems) == (
        (),
        (Problem("IPInUse", "192.0.2.1 is held by hand-set externalIPs of default/x", True),),
    )


def test_a_keyed_claim_nobody_is_listed_on_is_never_joined() -> None:
    book = book_with(pool("p", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "p", (), sharing_key="k"))
    assert book.plan("default/web", svc(annotations=KEY)).acquire == (
        Acquire(ip("192.0.2.2"), "p"),
    )
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/lit", svc("lit", annotations=key))
    assert (plan.acquire, plan.problems) == (
        (),
        (Problem("IPInUse", "192.0.2.1 is held by another claim", True),),
    )


def test_a_literal_claimed_by_the_allocator_names_its_holders_even_if_set_by_hand_elsewhere() -> (
    None
):
    """The claim is the reservation: a stray hand-set copy on another Service is not the
    holder the user should be sent to."""
    book = book_with(pool("p", "192.0.2.0/29"))
    held(book, "192.0.2.1", "p", "default/a")
    book.service_seen(svc("stray", hand_set=(ip("192.0.2.1"),)))
    plan = book.plan("default/web", svc(annotations=literal("192.0.2.1")))
    assert plan.problems == (Problem("IPInUse", "192.0.2.1 is held by default/a", True),)


def test_a_keyed_literal_waits_for_a_reservation_of_its_key_by_a_service_now_gone() -> None:
    """The reserver left the book (deleted meanwhile): nothing clashes, so wait for the claim."""
    book = book_with(pool("p", "192.0.2.0/29"))
    book.reserve_pending(ip("192.0.2.1"), "default/gone", sharing_key="k", pool="p")
    key = literal("192.0.2.1", **{"external-ip-sharing-key": "k"})
    plan = book.plan("default/web", svc(annotations=key, ports=tcp(80)))
    assert plan == AllocationPlan(
        "default/web", deferred="waiting for 192.0.2.1 being reserved for default/gone"
    )
