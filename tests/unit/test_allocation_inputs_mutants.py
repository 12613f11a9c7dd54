"""core/allocation_inputs.py: what a LoadBalancer asks for without the annotation, and a
literal's pools (docs/testing.md, "Mutation")."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.core.allocation_inputs import (
    ANY_FAMILY,
    PoolInfo,
    Request,
    RequestError,
    ServiceInfo,
    parse_request,
    service_request,
)
from eipctl.core.naming import LOAD_BALANCER_CLASS
from eipctl.core.pool import Pool


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


# ------------------------------------------------------------------ guard mutants (session 17)


def cluster_ip(annotations: dict[str, str] | None = None, **kw: object) -> ServiceInfo:
    return ServiceInfo(
        key="default/web",
        namespace="default",
        annotations=annotations or {},
        service_type="ClusterIP",
        **kw,  # type: ignore[arg-type]
    )


def test_a_service_that_is_no_load_balancer_is_never_of_a_foreign_class() -> None:
    """Only a LoadBalancer has a class that hands it to another implementation; elsewhere the
    annotation decides."""
    svc = cluster_ip({"external-ip": "auto"}, load_balancer_class="other.io/lb")
    assert svc.foreign_class is False
    assert service_request(svc, serve_unclassed=False) == Request(families=(ANY_FAMILY,))


def test_serving_unclassed_load_balancers_gives_nothing_to_other_service_types() -> None:
    assert service_request(cluster_ip(), serve_unclassed=True) is None
    unclassed = ServiceInfo("default/web", "default", service_type="LoadBalancer")
    assert service_request(unclassed, serve_unclassed=True) == Request()


def test_load_balancer_ip_does_not_replace_a_literal_annotation() -> None:
    svc = lb({"external-ip": "192.0.2.5"}, load_balancer_ip="192.0.2.9")
    assert service_request(svc, serve_unclassed=False) == Request(
        ips=(ip_address("192.0.2.5"),), families=(4,)
    )


def test_load_balancer_ip_is_ignored_on_a_service_that_is_no_load_balancer() -> None:
    svc = cluster_ip({"external-ip": "auto"}, load_balancer_ip="192.0.2.9")
    assert service_request(svc, serve_unclassed=False) == Request(families=(ANY_FAMILY,))


def test_a_pool_whose_spec_does_not_parse_is_never_ready() -> None:
    assert PoolInfo("p", None).ready is False
    assert PoolInfo("p", Pool.parse("p", "192.0.2.0/30")).ready is True
    assert PoolInfo("p", Pool.parse("p", "192.0.2.0/30"), problem="overlap").ready is False
