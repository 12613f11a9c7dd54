"""The allocator's integrity rules, through `AllocationBook.plan`: one IP per sharing key,
hand-set IPs are in use, sharing only without port clashes, LoadBalancer conventions.

Each test is one defect of the [integrity] issue, told as the book sees it.
"""

from __future__ import annotations

from test_allocation_support import book_with, ip, pool, settle_all, svc

from eipctl.core.allocation_inputs import ClaimInfo, ServiceInfo
from eipctl.core.allocation_plan import Acquire

KEY = {"external-ip": "auto", "external-ip-sharing-key": "k"}


def shared(name: str, *ports: int, created: str = "", **kw: object) -> ServiceInfo:
    return svc(
        name,
        annotations=kw.pop("annotations", KEY),  # type: ignore[arg-type]
        ports=frozenset(("TCP", p) for p in ports),
        created=created,
        **kw,
    )


# ------------------------------------------------------------------ 1: one IP per key


def test_two_services_of_one_key_planned_before_either_claim_exists_get_one_ip() -> None:
    """Defect 1: both planned while the first's claim create is still in flight."""
    book = book_with(pool("a", "192.0.2.0/29"))
    first = book.plan("default/web", shared("web", 80))
    assert first.acquire == (Acquire(ip("192.0.2.1"), "a"),)
    second = book.plan("default/api", shared("api", 443))
    assert second.acquire == () and second.deferred  # waits for the claim, takes nothing
    settle_all(book, "default/web", first.acquire)
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    again = book.plan("default/api", shared("api", 443))
    assert again.acquire == (Acquire(ip("192.0.2.1"), "a", join=True),)


def test_a_failed_first_create_lets_the_waiting_service_reserve_its_own() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    first = book.plan("default/web", shared("web", 80))
    assert book.plan("default/api", shared("api", 443)).deferred
    book.settle(first.acquire[0].ip, "default/web", None)  # the create lost a race
    plan = book.plan("default/api", shared("api", 443))
    assert not plan.deferred and len(plan.acquire) == 1 and not plan.acquire[0].join


def test_literal_request_of_one_key_waits_for_the_claim_being_made() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    literal = {"external-ip": "192.0.2.6", "external-ip-sharing-key": "k"}
    first = book.plan("default/web", shared("web", 80, annotations=literal))
    assert first.acquire == (Acquire(ip("192.0.2.6"), "a"),)
    second = book.plan("default/api", shared("api", 443, annotations=literal))
    assert second.deferred and not second.problems


# ------------------------------------------------------------------ 2: hand-set IPs


def hand_set(name: str, *ips: str) -> ServiceInfo:
    return svc(name, annotations={}, hand_set=tuple(ip(i) for i in ips))


def test_ip_set_by_hand_on_any_service_is_never_handed_out() -> None:
    """Defect 2: A carries 192.0.2.1 in spec.externalIPs, no claim (allowManual false)."""
    book = book_with(pool("a", "192.0.2.0/29"))
    assert book.service_seen(hand_set("a", "192.0.2.1"))
    plan = book.plan("default/b", svc("b"))
    assert plan.acquire == (Acquire(ip("192.0.2.2"), "a"),)


def test_literal_request_for_a_hand_set_ip_waits_naming_the_service() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.service_seen(hand_set("a", "192.0.2.1"))
    plan = book.plan("default/b", svc("b", annotations={"external-ip": "192.0.2.1"}))
    assert plan.acquire == ()
    assert [(p.reason, p.waiting) for p in plan.problems] == [("IPInUse", True)]
    assert "default/a" in plan.problems[0].message


def test_a_service_may_ask_for_the_ip_it_set_by_hand_itself() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    own = svc("a", annotations={"external-ip": "192.0.2.1"}, hand_set=(ip("192.0.2.1"),))
    assert book.plan("default/a", own).acquire == (Acquire(ip("192.0.2.1"), "a"),)


def test_hand_set_ip_is_free_again_once_no_service_carries_it() -> None:
    book = book_with(pool("a", "192.0.2.0/31"))
    book.service_seen(hand_set("a", "192.0.2.0"))
    book.service_seen(hand_set("c", "192.0.2.0"))
    assert book.counts("a") == (0, 1)
    assert book.service_seen(hand_set("a"))  # taken off a: c still carries it
    assert book.counts("a") == (0, 1)
    assert book.service_gone("default/c")
    assert book.counts("a") == (0, 2)


def test_hand_set_ip_stays_in_use_after_the_claim_that_covered_it_goes() -> None:
    book = book_with(pool("a", "192.0.2.0/31"))
    book.claim_seen(ClaimInfo(ip("192.0.2.0"), "a", ("default/a",), owned=False))
    book.service_seen(hand_set("a", "192.0.2.0"))
    book.claim_gone(ip("192.0.2.0"))
    assert book.plan("default/b", svc("b")).acquire == (Acquire(ip("192.0.2.1"), "a"),)


def test_ip_set_by_hand_before_a_pool_exists_is_in_use_in_the_new_pool() -> None:
    book = book_with()
    book.service_seen(hand_set("a", "192.0.2.0"))
    book.set_pools([pool("a", "192.0.2.0/31")])
    assert book.plan("default/b", svc("b")).acquire == (Acquire(ip("192.0.2.1"), "a"),)


# ------------------------------------------------------------------ 3: port clashes


def test_same_key_and_same_port_get_separate_ips_with_a_reason() -> None:
    """Defect 3: kube-proxy cannot serve two Services on TCP/80 of one IP."""
    book = book_with(pool("a", "192.0.2.0/29"))
    book.service_seen(shared("web", 80))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    plan = book.plan("default/api", shared("api", 80, 443))
    assert plan.acquire == (Acquire(ip("192.0.2.2"), "a"),)
    assert [p.reason for p in plan.problems] == ["SharingRefused"]
    assert "TCP/80" in plan.problems[0].message and "default/web" in plan.problems[0].message


def test_same_port_number_on_another_protocol_shares() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.service_seen(shared("dns-tcp", 53))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/dns-tcp",), sharing_key="k"))
    udp = svc("dns-udp", annotations=KEY, ports=frozenset({("UDP", 53)}))
    assert book.plan("default/dns-udp", udp).acquire == (Acquire(ip("192.0.2.1"), "a", join=True),)


def test_literal_with_clashing_port_waits_with_port_clash() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.service_seen(shared("web", 80))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    literal = {"external-ip": "192.0.2.1", "external-ip-sharing-key": "k"}
    plan = book.plan("default/api", shared("api", 80, annotations=literal))
    assert plan.acquire == ()
    assert [(p.reason, p.waiting) for p in plan.problems] == [("PortClash", True)]


def test_local_traffic_policy_shares_only_with_the_same_selector() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.service_seen(shared("web", 80, selector=(("app", "web"),)))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    other = shared("api", 443, local_traffic=True, selector=(("app", "api"),))
    assert book.plan("default/api", other).acquire == (Acquire(ip("192.0.2.2"), "a"),)
    same = shared("tls", 443, local_traffic=True, selector=(("app", "web"),))
    assert book.plan("default/tls", same).acquire == (Acquire(ip("192.0.2.1"), "a", join=True),)


def test_later_holder_that_now_clashes_gives_the_shared_ip_up() -> None:
    """A holder changed its ports onto a co-holder's: the one that came later moves."""
    book = book_with(pool("a", "192.0.2.0/29"))
    both = ("default/api", "default/web")
    book.service_seen(shared("web", 80, created="2026-01-01T00:00:00Z"))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", both, sharing_key="k"))
    older = book.plan("default/web", shared("web", 80, created="2026-01-01T00:00:00Z"))
    assert older.keep == (ip("192.0.2.1"),) and not older.release
    later = book.plan("default/api", shared("api", 80, created="2026-01-02T00:00:00Z"))
    assert later.release == (ip("192.0.2.1"),)
    assert later.acquire == (Acquire(ip("192.0.2.2"), "a"),)
    assert later.problems[0].reason == "PortClash"


# ------------------------------------------------------------------ 7, 8: LoadBalancer


def lb(name: str, **kw: object) -> ServiceInfo:
    return svc(name, annotations=kw.pop("annotations", {}), service_type="LoadBalancer", **kw)  # type: ignore[arg-type]


def test_load_balancer_of_eipctl_class_is_served_without_the_annotation() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    plan = book.plan("default/web", lb("web", load_balancer_class="eipctl.io/external-ip"))
    assert plan.acquire == (Acquire(ip("192.0.2.1"), "a"),)


def test_unclassed_load_balancer_is_served_only_with_the_flag() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    assert book.plan("default/web", lb("web")).acquire == ()
    book.serve_unclassed = True
    assert book.plan("default/web", lb("web")).acquire == (Acquire(ip("192.0.2.1"), "a"),)


def test_load_balancer_of_another_class_is_never_touched_even_annotated() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.4"), "a", ("default/web",)))
    other = lb("web", load_balancer_class="example.com/lb", annotations={"external-ip": "auto"})
    plan = book.plan("default/web", other)
    assert plan.hands_off and plan.acquire == () and plan.release == ()


def test_load_balancer_ip_is_a_literal_request() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    classed = lb("web", load_balancer_class="eipctl.io/external-ip", load_balancer_ip="192.0.2.3")
    assert book.plan("default/web", classed).acquire == (Acquire(ip("192.0.2.3"), "a"),)
    annotated = lb("api", annotations={"external-ip": "auto"}, load_balancer_ip="192.0.2.4")
    assert book.plan("default/api", annotated).acquire == (Acquire(ip("192.0.2.4"), "a"),)


def test_bad_load_balancer_ip_is_a_problem_that_keeps_what_is_held() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    book.claim_seen(ClaimInfo(ip("192.0.2.2"), "a", ("default/web",)))
    bad = lb("web", annotations={"external-ip": "auto"}, load_balancer_ip="not-an-ip")
    plan = book.plan("default/web", bad)
    assert plan.keep == (ip("192.0.2.2"),) and plan.problems[0].reason == "InvalidAnnotation"


# ------------------------------------------------------------------ keys changed later


def test_holder_that_leaves_the_key_gives_a_shared_ip_up_and_a_sole_holder_rekeys() -> None:
    book = book_with(pool("a", "192.0.2.0/29"))
    both = ("default/api", "default/web")
    book.service_seen(shared("web", 80))
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", both, sharing_key="k"))
    no_key = shared("api", 443, annotations={"external-ip": "auto"})
    plan = book.plan("default/api", no_key)
    assert plan.release == (ip("192.0.2.1"),) and plan.acquire == (Acquire(ip("192.0.2.2"), "a"),)
    assert plan.problems[0].reason == "PortClash" and "sharing key" in plan.problems[0].message
    book.claim_seen(ClaimInfo(ip("192.0.2.1"), "a", ("default/web",), sharing_key="k"))
    alone = book.plan("default/web", shared("web", 80, annotations={"external-ip": "auto"}))
    assert alone.keep == (ip("192.0.2.1"),) and alone.rekey == ((ip("192.0.2.1"), ""),)
