"""core/allocation_inputs.py: what a LoadBalancer asks for without the annotation, and a
literal's pools (docs/testing.md, "Mutation")."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    Request,
    RequestError,
    ServiceInfo,
    parse_request,
    service_request,
)
from eipctl.core.naming import LOAD_BALANCER_CLASS


def lb(annotations: dict[str, str] | None = None, **kw: object) -> ServiceInfo:
    return ServiceInfo(
        key="default/web",
        namespace="default",
        annotations=annotations or {},
        service_type="LoadBalancer",
        load_balancer_class=LOAD_BALANCER_CLASS,
        **kw,  # type: ignore[arg-type]
    )


def test_a_literal_keeps_its_pools() -> None:
    request = parse_request({"external-ip": "192.0.2.1", "external-ip-pool": "a, b"}, ())
    assert request == Request(ips=(ip_address("192.0.2.1"),), families=(4,), pools=("a", "b"))


def test_a_load_balancer_of_our_class_asks_auto_with_its_pool_and_key() -> None:
    svc = lb({"external-ip-pool": "a", "external-ip-sharing-key": " k "}, ip_families=(6, 6))
    assert service_request(svc, serve_unclassed=False) == Request(
        families=(6,), pools=("a",), sharing_key="k"
    )
    assert service_request(lb(), serve_unclassed=False) == Request(families=(ANY_FAMILY,))


def test_the_annotation_wins_over_the_load_balancer_default() -> None:
    svc = lb({"external-ip": "192.0.2.5"})
    assert service_request(svc, serve_unclassed=False) == Request(
        ips=(ip_address("192.0.2.5"),), families=(4,)
    )


def test_load_balancer_ip_turns_auto_into_that_literal_keeping_pool_and_key() -> None:
    svc = lb(
        {"external-ip-pool": "a", "external-ip-sharing-key": "k"}, load_balancer_ip="2001:db8::5"
    )
    assert service_request(svc, serve_unclassed=False) == Request(
        ips=(ip_address("2001:db8::5"),), families=(6,), pools=("a",), sharing_key="k"
    )
    with pytest.raises(RequestError, match=r"^spec\.loadBalancerIP='x' is not an IP address$"):
        service_request(lb(load_balancer_ip="x"), serve_unclassed=False)
