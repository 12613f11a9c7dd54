"""`core.admission`: which check of a pool refuses a Service, in the words the allocator's
``NoPool`` / ``IPNotInPool`` Events and `kubectl eipctl why` share."""

from __future__ import annotations

from ipaddress import ip_address

from hypothesis import given
from hypothesis import strategies as st

from eipctl.allocator.views import pool_infos, service_info
from eipctl.core.admission import (
    ADMITS,
    FAMILY,
    MISSING,
    NAMESPACE_SELECTOR,
    NO_POOL_AT_ALL,
    NOT_AUTO,
    NOT_READY,
    SERVICE_SELECTOR,
    one_cause,
    refusals,
    selector_text,
    weigh,
)
from eipctl.core.allocation_inputs import Request
from eipctl.core.fields import Obj
from eipctl.core.selectors import LabelSelector


def pool(name: str, cidr: str = "198.51.100.0/28", *, created: str = "", **spec: object) -> Obj:
    meta = {"name": name, "creationTimestamp": created or "2026-01-01T00:00:00Z"}
    return {"metadata": meta, "spec": {"cidr": cidr, **spec}}


def auto(name: str, *, labels: dict[str, str] | None = None) -> Obj:
    meta = {"name": name, "namespace": "shop", "annotations": {"external-ip": "auto"}}
    return {"metadata": {**meta, "labels": labels or {}}, "spec": {"type": "ClusterIP"}}


def test_a_named_pool_is_weighed_even_when_missing_and_each_refusal_is_listed() -> None:
    infos = pool_infos(
        [
            pool("a-team", namespaceSelector={"matchLabels": {"team": "a"}}),
            pool("young", "198.51.100.0/29", created="2026-02-01T00:00:00Z"),
        ]
    )
    info = service_info(auto("web"))
    request = Request(pools=("a-team", "young", "gone"))
    verdicts = weigh(infos, info, request, namespace_labels={}, family=4)
    assert [v.kind for v in verdicts] == [NAMESPACE_SELECTOR, NOT_READY, MISSING]
    assert refusals(verdicts) == (
        "pool a-team's namespaceSelector team=a does not match namespace shop's labels (none); "
        "pool young is not Ready: overlaps pool 'a-team' (e.g. at 198.51.100.1); "
        "pool gone does not exist"
    )


def test_no_pool_at_all_is_said_so() -> None:
    info = service_info(auto("web"))
    assert refusals(weigh([], info, Request(), namespace_labels={}, family=4)) == NO_POOL_AT_ALL


@given(
    ns_ok=st.booleans(),
    svc_ok=st.booleans(),
    family_ok=st.booleans(),
)
def test_a_pool_is_refused_for_the_first_failing_check(
    ns_ok: bool, svc_ok: bool, family_ok: bool
) -> None:
    obj = pool(
        "p",
        "198.51.100.0/28" if family_ok else "2001:db8::/120",
        serviceSelector={"matchLabels": {"tier": "web" if svc_ok else "db"}},
        namespaceSelector={"matchLabels": {"team": "blue" if ns_ok else "red"}},
    )
    info = service_info(auto("web", labels={"tier": "web"}))
    [verdict] = weigh(
        pool_infos([obj]), info, Request(families=(4,)), namespace_labels={"team": "blue"}, family=4
    )
    expected = next(
        (
            kind
            for ok, kind in (
                (family_ok, FAMILY),
                (svc_ok, SERVICE_SELECTOR),
                (ns_ok, NAMESPACE_SELECTOR),
            )
            if not ok
        ),
        ADMITS,
    )
    assert verdict.kind == expected


def test_a_pool_without_selectors_admits_any_service_of_its_family() -> None:
    """Guard mutants: the namespaceSelector check must not assume one exists."""
    info = service_info(auto("web"))
    [verdict] = weigh(
        pool_infos([pool("open")]), info, Request(), namespace_labels={"team": "x"}, family=4
    )
    assert verdict.kind == ADMITS


def test_a_pool_without_auto_assign_serves_a_request_naming_it_or_a_literal_ip_in_it() -> None:
    """autoAssign: false keeps a pool out of ``auto`` alone: a Service that names the pool, or
    asks for a literal IP it contains, still draws from it."""
    infos = pool_infos([pool("manual", autoAssign=False)])
    info = service_info(auto("web"))
    [unnamed] = weigh(infos, info, Request(), namespace_labels={}, family=4)
    assert unnamed.kind == NOT_AUTO
    [named] = weigh(infos, info, Request(pools=("manual",)), namespace_labels={}, family=4)
    assert named.kind == ADMITS
    literal = ip_address("198.51.100.5")
    [asked] = weigh(infos, info, Request(), namespace_labels={}, family=4, literal=literal)
    assert asked.kind == ADMITS


def test_the_cause_and_the_refusals_leave_the_admitting_pools_out() -> None:
    """One pool admits, the others refuse for one reason: that reason is the cause, and only
    the refusals are listed (the Event says why the others did not serve)."""
    infos = pool_infos(
        [
            pool("v4", "198.51.100.0/28"),
            pool("v6-a", "2001:db8::/120"),
            pool("v6-b", "2001:db8:1::/120"),
        ]
    )
    verdicts = weigh(infos, service_info(auto("web")), Request(), namespace_labels={}, family=4)
    assert [v.kind for v in verdicts] == [ADMITS, FAMILY, FAMILY]
    assert one_cause(verdicts) == FAMILY
    assert refusals(verdicts) == (
        "pool v6-a gives IPv6, the Service wants IPv4; pool v6-b gives IPv6, the Service wants IPv4"
    )


def test_an_empty_selector_reads_as_braces() -> None:
    assert selector_text(LabelSelector()) == "{}"
    assert selector_text(None) == "(none)"
