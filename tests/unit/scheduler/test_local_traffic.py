"""`scheduler.local_traffic.LocalTraffic.of`: where a claim's Local Services are answered."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.core.local_endpoints import EndpointNodes
from eipctl.scheduler import local_traffic
from eipctl.scheduler.local_traffic import SERVICE_INDEX, LocalTraffic

Obj = dict[str, Any]


class Services:
    def __init__(self, **policies: str) -> None:
        self._by_key = {
            f"default/{name}": {"spec": {"externalTrafficPolicy": policy}}
            for name, policy in policies.items()
        }

    def get(self, key: str) -> Obj | None:
        return self._by_key.get(key)


class Slices:
    def __init__(self, by_service: dict[str, list[Obj]]) -> None:
        self._by_service = by_service

    def by_index(self, index: str, value: str) -> list[Obj]:
        assert index == SERVICE_INDEX
        return self._by_service.get(value, [])


def endpoint_slice(address_type: str, *nodes: str) -> Obj:
    return {
        "addressType": address_type,
        "endpoints": [{"nodeName": n, "conditions": {"ready": True}} for n in nodes],
    }


def claim(ip: object, *services: str) -> Obj:
    return {"spec": {"ip": ip, "services": [f"default/{s}" for s in services]}}


SLICES = Slices(
    {
        "default/web": [endpoint_slice("IPv4", "node-1", "node-2"), endpoint_slice("IPv6", "n6")],
        "default/api": [endpoint_slice("IPv4", "node-2", "node-3")],
    }
)


def test_a_claim_is_answered_where_every_local_service_of_its_family_has_an_endpoint() -> None:
    traffic = LocalTraffic(Services(web="Local", api="Local"), SLICES)
    assert traffic.of(claim("203.0.113.1", "web")) == EndpointNodes(frozenset({"node-1", "node-2"}))
    assert traffic.of(claim("2001:db8::1", "web")) == EndpointNodes(frozenset({"n6"}))
    assert traffic.of(claim("203.0.113.1", "web", "api")) == EndpointNodes(frozenset({"node-2"}))


def test_a_local_service_without_an_ip_to_answer_for_places_nothing() -> None:
    traffic = LocalTraffic(Services(web="Local"), SLICES)
    assert traffic.of(claim(None, "web")) is None
    assert traffic.of(claim("not-an-ip", "web")) is None


def test_a_claim_with_no_local_service_goes_anywhere_without_its_ip_being_parsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A placement pass asks this of every claim ([scale]: at 10,000 claims parsing each IP
    was a quarter of the pass): only a claim with a Local Service needs its family."""

    def parsed(_claim: Obj) -> int | None:
        raise AssertionError("the IP of a claim with no Local Service was parsed")

    monkeypatch.setattr(local_traffic, "_family", parsed)
    traffic = LocalTraffic(Services(web="Cluster"), SLICES)
    assert traffic.of(claim("203.0.113.1", "web")) is None
    assert traffic.of(claim("203.0.113.1", "unknown")) is None
    assert traffic.of(claim("203.0.113.1")) is None


def test_a_services_policy_is_read_again_only_when_its_version_changes() -> None:
    services = Services(web="Cluster")
    web = services._by_key["default/web"]
    web["metadata"] = {"resourceVersion": "1"}
    traffic = LocalTraffic(services, SLICES)
    assert traffic.of(claim("203.0.113.1", "web")) is None
    web["spec"]["externalTrafficPolicy"] = "Local"  # changed in place, same version: not seen
    assert traffic.of(claim("203.0.113.1", "web")) is None
    web["metadata"]["resourceVersion"] = "2"  # as the API writes it: read again
    assert traffic.of(claim("203.0.113.1", "web")) == EndpointNodes(frozenset({"node-1", "node-2"}))
    del web["metadata"]  # no version (not from the API): read every time
    web["spec"]["externalTrafficPolicy"] = "Cluster"
    assert traffic.of(claim("203.0.113.1", "web")) is None


def test_the_policies_of_many_services_are_remembered_together() -> None:
    """A pass asks for every claim's Services: each Service's policy is read once per
    version, not again because another Service was read in between."""
    services = Services(web="Cluster", api="Local")
    for n, key in enumerate(["default/web", "default/api"]):
        services._by_key[key]["metadata"] = {"resourceVersion": str(n + 1)}
    traffic = LocalTraffic(services, SLICES)
    assert traffic.of(claim("203.0.113.1", "web")) is None
    assert traffic.of(claim("203.0.113.1", "api")) == EndpointNodes(frozenset({"node-2", "node-3"}))
    services._by_key["default/web"]["spec"]["externalTrafficPolicy"] = "Local"  # same version
    assert traffic.of(claim("203.0.113.1", "web")) is None  # remembered, not read again


def service_slice(service: str) -> Obj:
    return {
        "metadata": {
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": service},
        },
        **endpoint_slice("IPv4", "node-1"),
    }


def test_a_slice_added_or_deleted_for_a_local_service_is_relevant() -> None:
    """The informer's add has no old object and its delete no new one."""
    traffic = LocalTraffic(Services(web="Local", api="Cluster"), SLICES)
    assert traffic.relevant(None, service_slice("web"))
    assert traffic.relevant(service_slice("web"), None)
    assert not traffic.relevant(None, service_slice("api"))
    assert not traffic.relevant(service_slice("api"), None)


def test_a_slice_of_a_service_not_known_yet_is_relevant() -> None:
    """The slice may come before its Service: it might be Local, so a pass looks."""
    traffic = LocalTraffic(Services(api="Cluster"), SLICES)
    assert traffic.relevant(None, service_slice("web"))
    assert traffic.relevant(service_slice("api"), service_slice("web"))
    assert not traffic.relevant(service_slice("api"), service_slice("api"))
