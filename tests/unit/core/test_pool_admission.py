"""`core.admission`: which check of a pool refuses a Service, in the words the allocator's
``NoPool`` / ``IPNotInPool`` Events and `kubectl eipctl why` share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eipctl.allocator.views import pool_infos, service_info
from eipctl.core.admission import (
    ADMITS,
    FAMILY,
    MISSING,
    NAMESPACE_SELECTOR,
    NO_POOL_AT_ALL,
    NOT_READY,
    SERVICE_SELECTOR,
    refusals,
    weigh,
)
from eipctl.core.allocation_inputs import Request
from eipctl.core.fields import Obj


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
