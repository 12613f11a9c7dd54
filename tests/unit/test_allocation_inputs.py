"""What a Service asks for: parsing its annotations into a `Request`, or a clear refusal."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.core.allocation_inputs import (
    PoolInfo,
    Request,
    RequestError,
    ServiceInfo,
    ip_order,
    parse_request,
)
from eipctl.core.pool import Pool
from eipctl.core.selectors import LabelSelector


def ip(text: str):  # type: ignore[no-untyped-def]
    return ip_address(text)


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


def test_pool_admits_by_service_and_namespace_selectors() -> None:
    info = PoolInfo(
        name="p",
        pool=Pool.parse("p", "192.0.2.0/30"),
        service_selector=LabelSelector(match_labels={"team": "x"}),
        namespace_selector=LabelSelector(match_labels={"env": "prod"}),
    )
    web = ServiceInfo(key="shop/web", namespace="shop", labels={"team": "x"})
    assert info.admits(web, {"env": "prod"})
    assert not info.admits(web, {"env": "dev"})
    assert not info.admits(ServiceInfo(key="shop/db", namespace="shop"), {"env": "prod"})
    assert info.ready and not PoolInfo(name="q", pool=None, problem="bad cidr").ready


def test_ip_order_puts_ipv4_first_then_numeric() -> None:
    ips = [ip("2001:db8::1"), ip("192.0.2.10"), ip("192.0.2.9")]
    assert sorted(ips, key=ip_order) == [ip("192.0.2.9"), ip("192.0.2.10"), ip("2001:db8::1")]
