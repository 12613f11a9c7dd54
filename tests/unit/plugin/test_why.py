"""`why SERVICE`: each cause, named as the allocator / scheduler / controller would name it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from eipctl.core.admission import FAMILY, NAMESPACE_SELECTOR, SERVICE_SELECTOR
from eipctl.plugin.snapshot import Snapshot
from eipctl.plugin.why import HAS_IP, Explanation, explain

from .objects import auto, claim, condition, event, ipnode, pool, service

NOW = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def why(snapshot: Snapshot, name: str = "web", namespace: str = "shop") -> Explanation:
    found = explain(snapshot, namespace, name, NOW)
    assert found is not None
    return found


def test_no_such_service_is_none() -> None:
    assert explain(Snapshot(), "shop", "web", NOW) is None


def test_namespace_selector_is_named_as_the_one_cause() -> None:
    snap = Snapshot(
        services=[auto("web")],
        pools=[
            pool("a", namespaceSelector={"matchLabels": {"team": "red"}}),
            pool("b", "203.0.113.0/28", namespaceSelector={"matchLabels": {"team": "red"}}),
        ],
        namespace_labels={"shop": {"team": "blue"}},
    )
    found = why(snap)
    assert found.cause == "NoPool"
    assert not found.has_ip
    assert [v.kind for v in found.pools] == [NAMESPACE_SELECTOR, NAMESPACE_SELECTOR]
    assert "namespaceSelector team=red does not match namespace shop's labels (team=blue)" in (
        found.reason
    )
    assert "The one cause: every pool's namespaceSelector excludes its namespace" in found.reason


def test_service_selector() -> None:
    snap = Snapshot(
        services=[auto("web", labels={"tier": "web"})],
        pools=[pool("a", serviceSelector={"matchLabels": {"tier": "db"}})],
    )
    found = why(snap)
    assert found.cause == "NoPool"
    assert found.pools[0].kind == SERVICE_SELECTOR
    assert "serviceSelector tier=db does not match the Service's labels (tier=web)" in found.reason


def test_family() -> None:
    snap = Snapshot(
        services=[auto("web", ipFamilies=["IPv4"])],
        pools=[pool("v6", "2001:db8::/120")],
    )
    found = why(snap)
    assert found.cause == "NoPool"
    assert found.pools[0].kind == FAMILY
    assert "pool v6 gives IPv6, the Service wants IPv4" in found.reason


def test_not_ready_pool_overlapping_an_older_one() -> None:
    snap = Snapshot(
        services=[auto("web", annotations={"external-ip-pool": "young"})],
        pools=[
            pool("old", "198.51.100.0/28", created="2025-01-01T00:00:00Z"),
            pool("young", "198.51.100.0/29"),
        ],
    )
    found = why(snap)
    assert found.cause == "NoPool"
    assert found.pools[0].kind == "NotReady"
    assert "pool young is not Ready: overlaps pool 'old'" in found.reason


def test_different_causes_are_each_listed_and_none_is_called_the_one() -> None:
    snap = Snapshot(
        services=[auto("web", ipFamilies=["IPv4"])],
        pools=[
            pool("a", namespaceSelector={"matchLabels": {"team": "red"}}),
            pool("v6", "2001:db8::/120"),
        ],
    )
    found = why(snap)
    assert [v.kind for v in found.pools] == [NAMESPACE_SELECTOR, FAMILY]
    assert "The one cause" not in found.reason
    assert "pool a's namespaceSelector" in found.reason and "pool v6 gives IPv6" in found.reason


def test_no_pool_at_all() -> None:
    found = why(Snapshot(services=[auto("web")]))
    assert found.cause == "NoPool"
    assert "there is no IpClaimPool at all: create one" in found.reason


def test_pool_exhausted() -> None:
    snap = Snapshot(
        services=[auto("web"), auto("other", ips=("198.51.100.7",))],
        pools=[pool("tiny", "198.51.100.7/32")],
        claims=[claim("198.51.100.7", "tiny", "shop/other")],
    )
    found = why(snap)
    assert found.cause == "PoolExhausted"
    assert "every address of tiny is taken" in found.reason


def test_ip_in_use_names_the_holder() -> None:
    snap = Snapshot(
        services=[
            service("web", annotations={"external-ip": "198.51.100.7"}),
            auto("other", ips=("198.51.100.7",)),
        ],
        pools=[pool("a")],
        claims=[claim("198.51.100.7", "a", "shop/other")],
    )
    found = why(snap)
    assert found.cause == "IPInUse"
    assert "198.51.100.7 is held by shop/other" in found.reason


def test_ip_outside_every_pool() -> None:
    snap = Snapshot(
        services=[service("web", annotations={"external-ip": "192.0.2.200"})],
        pools=[pool("a")],
    )
    found = why(snap)
    assert found.cause == "IPNotInPool"
    assert "pool a (198.51.100.0/28) does not contain 192.0.2.200" in found.reason


def test_sharing_refused_names_the_clashing_port() -> None:
    key = {"external-ip-sharing-key": "k"}
    snap = Snapshot(
        services=[
            auto("web", annotations=key),
            auto("first", annotations=key, ips=("198.51.100.7",)),
        ],
        pools=[pool("tiny", "198.51.100.7/32")],
        claims=[claim("198.51.100.7", "tiny", "shop/first", sharing_key="k")],
    )
    found = why(snap)
    assert found.cause == "SharingRefused"
    assert "TCP/80 used by both shop/web and shop/first" in found.reason


def _placed(cond: dict[str, Any], **kw: Any) -> Snapshot:
    return Snapshot(
        services=[auto("web", ips=("198.51.100.1",), **kw)],
        pools=[pool("a", nodeSelector={"matchLabels": {"zone": "a"}})],
        claims=[claim("198.51.100.1", "a", "shop/web", conditions=(cond,))],
        nodes=[
            ipnode("node-1", live="False", reason="NoReply", labels={"zone": "a"}),
            ipnode("node-2", labels={"zone": "b"}),
        ],
    )


def test_no_live_node_says_why_each_node_may_not_hold_it() -> None:
    cond = condition("Scheduled", "False", "NoLiveNode", "no live eligible node")
    found = why(_placed(cond))
    assert found.cause == "NoLiveNode"
    assert "node-1: not live (NoReply)" in found.reason
    assert "node-2: the pool's nodeSelector zone=a does not match its labels (zone=b)" in (
        found.reason
    )


def test_local_with_no_endpoint() -> None:
    cond = condition(
        "Scheduled",
        "False",
        "NoLocalEndpoint",
        "no ready endpoint of its Local Service on any live node (unplaced)",
    )
    snap = _placed(cond, externalTrafficPolicy="Local")
    slices = [
        {
            "metadata": {
                "name": "web-x",
                "namespace": "shop",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "endpoints": [{"nodeName": "node-1", "conditions": {"ready": True}}],
        }
    ]
    found = why(Snapshot(**{**snap.__dict__, "slices": slices}))
    assert found.cause == "NoLocalEndpoint"
    assert "node-1: ready endpoint, node not live (NoReply)" in found.reason
    found = why(snap)
    assert "No ready IPv4 endpoint on any node" in found.reason


def test_conflict_from_the_controller() -> None:
    cond = condition("Conflict", "True", "AddressInUse", "02:00:00:00:00:09 answers for it")
    snap = _placed(cond)
    snap.claims[0]["spec"]["nodeName"] = "node-2"
    found = why(snap)
    assert found.cause == "AddressInUse"
    assert "02:00:00:00:00:09 answers for it" in found.reason


def test_has_ip() -> None:
    snap = Snapshot(
        services=[auto("web", ips=("198.51.100.1",))],
        pools=[pool("a")],
        claims=[
            claim("198.51.100.1", "a", "shop/web", node="node-2", phase="Bound", bound="node-2")
        ],
    )
    found = why(snap)
    assert found.has_ip and found.cause == HAS_IP
    assert "198.51.100.1 on node-2" in found.reason


def test_plain_load_balancer_without_class_or_annotation() -> None:
    snap = Snapshot(services=[service("web", type="LoadBalancer")], pools=[pool("a")])
    found = why(snap)
    assert found.cause == "Unclassed"
    assert "--serve-unclassed-load-balancers" in found.reason
    assert "spec.loadBalancerClass: eipctl.io/external-ip" in found.reason


def test_unclassed_served_when_the_allocator_spoke_about_it() -> None:
    warned = event(
        "Service",
        "web",
        "NoPool",
        "no pool can give an IP",
        namespace="shop",
        type_="Warning",
        source="eipctl-allocator",
    )
    snap = Snapshot(services=[service("web", type="LoadBalancer")], events=[warned])
    found = why(snap)
    assert found.cause == "NoPool"
    assert found.recorded.startswith("NoPool (eipctl-allocator, 2026-01-01T00:00:00Z)")


def test_foreign_class_and_asks_nothing() -> None:
    lb = service("web", type="LoadBalancer", loadBalancerClass="other.io/lb")
    assert why(Snapshot(services=[lb])).cause == "ForeignClass"
    assert why(Snapshot(services=[service("web")])).cause == "NotAsked"


def test_invalid_annotation() -> None:
    snap = Snapshot(services=[service("web", annotations={"external-ip": "nope"})])
    assert why(snap).cause == "InvalidAnnotation"


def test_only_pool_being_deleted_says_what_it_waits_for_and_the_two_ways_out() -> None:
    snap = Snapshot(
        services=[auto("web"), auto("old", ips=("198.51.100.1",))],
        pools=[pool("a", deleting=True)],
        claims=[
            claim("198.51.100.1", "a", "shop/old", node="node-1", phase="Bound", bound="node-1")
        ],
    )
    found = why(snap)
    assert found.cause == "NoPool"
    assert found.pools[0].kind == "Deleting"
    assert "--purge-on-pool-delete" in found.reason
    held = why(snap, "old")
    assert held.has_ip
    assert "pool a is being deleted and waits (finalizer eipctl.io/pool-protection)" in held.reason
    assert "held by shop/old" in held.reason and "--purge-on-pool-delete" in held.reason


def test_not_yet_allocated_points_at_the_allocator_lease() -> None:
    found = why(Snapshot(services=[auto("web")], pools=[pool("a")]))
    assert found.cause == "NotYetAllocated"
    assert "198.51.100.1 from pool a" in found.reason and "eipctl-allocator" in found.reason
