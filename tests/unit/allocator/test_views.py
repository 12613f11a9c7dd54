"""Objects <-> decision inputs, and the edits the allocator makes to Services and claims."""

from __future__ import annotations

import copy
from ipaddress import ip_address
from typing import Any

import pytest

from eipctl.allocator.views import (
    Refused,
    claim_info,
    join_claim,
    leave_claim,
    pool_infos,
    pool_status,
    service_info,
    set_finalizer,
    set_ingress,
    set_service_ips,
)
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import POOL_FINALIZER

A, B, HAND = ip_address("192.0.2.1"), ip_address("192.0.2.2"), "203.0.113.9"


def svc(ips: list[str] | None = None, recorded: str = "", type_: str = "ClusterIP") -> Any:
    annotations = {"external-ip": "auto"}
    if recorded:
        annotations["eipctl.io/allocated-ips"] = recorded
    return {
        "metadata": {"name": "web", "namespace": "shop", "annotations": annotations},
        "spec": {"type": type_, "externalIPs": ips or [], "ipFamilies": ["IPv4", "IPv6"]},
    }


def test_service_info_reads_families_and_recorded_ips() -> None:
    info = service_info(svc(recorded="192.0.2.1, bogus"))
    assert info.key == "shop/web" and info.ip_families == (4, 6)
    assert info.recorded == (A,)


def test_set_service_ips_keeps_hand_set_entries_and_records_ours() -> None:
    obj = svc([HAND, "192.0.2.1"], recorded="192.0.2.1")
    set_service_ips([B], {A})(obj)
    assert obj["spec"]["externalIPs"] == [HAND, "192.0.2.2"]
    assert obj["metadata"]["annotations"]["eipctl.io/allocated-ips"] == "192.0.2.2"
    set_service_ips([], {B})(obj)
    assert obj["spec"]["externalIPs"] == [HAND]
    assert "eipctl.io/allocated-ips" not in obj["metadata"]["annotations"]


def test_set_service_ips_is_idempotent() -> None:
    obj = svc()
    set_service_ips([A], set())(obj)
    once = copy.deepcopy(obj)
    set_service_ips([A], {A})(obj)
    assert obj == once


def test_ingress_only_for_load_balancers_and_others_entries_kept() -> None:
    obj = svc(type_="LoadBalancer")
    obj["status"] = {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}
    set_ingress([A], set())(obj)
    assert obj["status"]["loadBalancer"]["ingress"] == [
        {"hostname": "lb.example"},
        {"ip": "192.0.2.1"},
    ]
    obj["spec"]["type"] = "ClusterIP"
    set_ingress([A], {A})(obj)
    assert obj["status"]["loadBalancer"]["ingress"] == [{"hostname": "lb.example"}]


def test_an_allocator_claim_is_named_after_the_ip_and_owned() -> None:
    body = allocator_claim(A, pool="p", prefix_length=None, service="shop/web", sharing_key="k")
    assert body["metadata"]["name"] == "192-0-2-1"
    assert body["metadata"]["labels"] == {"eipctl.io/pool": "p", "eipctl.io/origin": "allocator"}
    info = claim_info(body)
    assert info is not None and info.owned and info.sharing_key == "k"
    assert info.services == ("shop/web",) and body["spec"]["prefixLength"] == 32


def test_join_needs_the_same_key_and_leave_drops_only_that_service() -> None:
    body = allocator_claim(A, pool="p", prefix_length=None, service="shop/web", sharing_key="k")
    join_claim("shop/api", "k")(body)
    assert body["spec"]["services"] == ["shop/api", "shop/web"]
    with pytest.raises(Refused):
        join_claim("shop/db", "other")(copy.deepcopy(body))
    leave_claim("shop/web")(body)
    assert body["spec"]["services"] == ["shop/api"]


def test_scheduler_claims_are_not_owned() -> None:
    obj = {"metadata": {"labels": {"eipctl.io/origin": "manual"}}, "spec": {"ip": "192.0.2.1"}}
    info = claim_info(obj)
    assert info is not None and not info.owned


def _pool(name: str, cidr: str, created: str, **spec: Any) -> Any:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"cidr": cidr, **spec},
    }


def test_pool_infos_flags_bad_specs_and_the_younger_of_two_overlapping_pools() -> None:
    infos = {
        i.name: i
        for i in pool_infos(
            [
                _pool("young", "192.0.2.0/28", "2026-01-02T00:00:00Z"),
                _pool("old", "192.0.2.0/24", "2026-01-01T00:00:00Z"),
                _pool(
                    "bad", "192.0.2.0/24", "2026-01-01T00:00:00Z", ranges=[["10.0.0.1", "10.0.0.2"]]
                ),
            ]
        )
    }
    assert infos["old"].ready
    assert not infos["young"].ready and "'old'" in infos["young"].problem
    assert infos["bad"].pool is None and "outside cidr" in infos["bad"].problem


def test_pool_status_and_finalizer() -> None:
    info = pool_infos([_pool("p", "192.0.2.0/29", "2026-01-01T00:00:00Z")])[0]
    obj: Any = {"metadata": {"name": "p"}}
    pool_status(info, 2, 4, 3)(obj)
    assert obj["status"]["allocated"] == 2 and obj["status"]["free"] == 4
    (ready,) = obj["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["observedGeneration"]) == ("Ready", "True", 3)
    set_finalizer(True)(obj)
    set_finalizer(True)(obj)
    assert obj["metadata"]["finalizers"] == [POOL_FINALIZER]
    set_finalizer(False)(obj)
    assert obj["metadata"]["finalizers"] == []


def test_cloud_pools_are_left_to_nodeips() -> None:
    pools = [
        {"metadata": {"name": "metal"}, "spec": {"cidr": "192.0.2.0/24"}},
        {"metadata": {"name": "eips"}, "spec": {"cidr": "198.51.100.0/24", "provider": "aws"}},
    ]
    assert [p.name for p in pool_infos(pools)] == ["metal"]


# ------------------------------------------------------------------ [integrity]


def test_ingress_compared_by_meaning_so_a_defaulted_ip_mode_writes_nothing() -> None:
    """A real API server (1.30+) stores ``ipMode: VIP``: our entry is unchanged by that."""
    obj = svc(type_="LoadBalancer", recorded="192.0.2.1")
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ipMode": "VIP"}]}}
    before = copy.deepcopy(obj)
    set_ingress([A], {A})(obj)
    assert obj == before
    set_ingress([A, B], {A})(obj)  # a new one is added; the stored one stays as stored
    assert obj["status"]["loadBalancer"]["ingress"] == [
        {"ip": "192.0.2.1", "ipMode": "VIP"},
        {"ip": "192.0.2.2"},
    ]
    set_ingress([B], {A, B})(obj)
    assert obj["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.2"}]


def test_no_change_to_a_service_without_status_adds_no_status() -> None:
    obj = svc()
    before = copy.deepcopy(obj)
    set_ingress([A], set())(obj)
    assert obj == before


def test_load_balancer_gets_its_ips_in_ingress_only_and_older_spec_entries_go() -> None:
    """DenyServiceExternalIPs clusters: a LoadBalancer needs no spec.externalIPs."""
    obj = svc([HAND, "192.0.2.1"], recorded="192.0.2.1", type_="LoadBalancer")
    set_service_ips([A], {A})(obj)
    assert obj["spec"]["externalIPs"] == [HAND]
    assert obj["metadata"]["annotations"]["eipctl.io/allocated-ips"] == "192.0.2.1"
    fresh = svc(type_="LoadBalancer")
    set_service_ips([B], set())(fresh)
    assert "externalIPs" not in fresh["spec"]


def test_service_info_reads_sharing_fields_and_hand_set_ips() -> None:
    obj = svc([HAND, "192.0.2.1"], recorded="192.0.2.1", type_="LoadBalancer")
    obj["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z"
    obj["spec"].update(
        ports=[{"port": 80}, {"port": 53, "protocol": "UDP"}, {"port": "x"}],
        externalTrafficPolicy="Local",
        selector={"app": "web"},
        loadBalancerClass="eipctl.io/external-ip",
        loadBalancerIP="192.0.2.7",
    )
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}, {"hostname": "h"}]}}
    info = service_info(obj)
    assert info.ports == frozenset({("TCP", 80), ("UDP", 53)})
    assert info.local_traffic and info.selector == (("app", "web"),)
    assert info.load_balancer and not info.foreign_class
    assert info.load_balancer_ip == "192.0.2.7" and info.created == "2026-12-01T00:00:00Z"
    assert info.hand_set == (ip_address(HAND), ip_address("198.51.100.1"))


def test_per_node_copies_of_a_claim_are_not_claims_of_their_own() -> None:
    """Policy ``all``: ``<claim>.<node>`` carries the same IP and no Services; taking it
    for the record would make the allocator forget who holds the IP."""
    copy_ = {
        "metadata": {
            "name": "192-0-2-1.node-1",
            "labels": {"eipctl.io/origin": "all-nodes", "eipctl.io/pool": "p"},
        },
        "spec": {"ip": "192.0.2.1", "nodeName": "node-1", "nodeBound": True},
    }
    assert claim_info(copy_) is None
