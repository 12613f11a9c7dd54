"""Pools and nodes as the scheduler reads them: tolerant parsing, eligibility."""

from __future__ import annotations

import ipaddress
from typing import Any

from eipctl.core.eligibility import EXCLUDE_LABEL, Exclusion
from eipctl.core.placement import Policy
from eipctl.scheduler.view import PoolViews, cluster_for, exclusions, pool_view


def pool(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def test_broken_cidr_keeps_the_selector() -> None:
    view = pool_view(pool("p", cidr="nonsense", nodeSelector={"matchLabels": {"rack": "a"}}))
    assert view.pool is None
    assert view.admits_node({"rack": "a"})
    assert not view.admits_node({"rack": "b"})


def test_broken_selector_admits_no_node() -> None:
    view = pool_view(pool("p", cidr="192.0.2.0/24", nodeSelector={"matchExpressions": "x"}))
    assert view.selector_broken
    assert not view.admits_node({})


def test_prefix_length_defaults_per_family() -> None:
    view = pool_view(pool("p", cidr="2001:db8::/64"))
    assert view.prefix_for(ipaddress.ip_address("2001:db8::7")) == 128
    assert (
        pool_view(pool("q", cidr="192.0.2.0/24", prefixLength=24)).prefix_for(
            ipaddress.ip_address("192.0.2.7")
        )
        == 24
    )


def test_manual_pool_lookup_and_memo() -> None:
    views = PoolViews()
    objs = [
        pool("b", cidr="192.0.2.0/24", allowManual=True),
        pool("a", cidr="192.0.2.0/25", allowManual=True),
        pool("c", cidr="198.51.100.0/24"),
    ]
    built = views.build(objs)

    def manual(ip: str) -> str | None:
        found = views.manual_pool_for(built, ipaddress.ip_address(ip))
        return None if found is None else found.name

    assert manual("192.0.2.7") == "a"
    assert manual("192.0.2.200") == "b"
    assert manual("198.51.100.7") is None
    assert views.build(objs)["a"] is built["a"]  # same resourceVersion: reused
    assert set(views.build(objs[:1])) == {"b"}


def test_a_cloud_pool_is_left_to_nodeips() -> None:
    views = PoolViews()
    built = views.build(
        [pool("eip", cidr="192.0.2.0/24", allowManual=True, provider="aws"), pool("l", cidr="")]
    )
    assert "eip" not in built
    assert views.manual_pool_for(built, ipaddress.ip_address("192.0.2.7")) is None


def test_cluster_for_applies_selectors() -> None:
    views = PoolViews().build(
        [
            pool("rack-a", cidr="192.0.2.0/24", nodeSelector={"matchLabels": {"rack": "a"}}),
            pool("any", cidr="198.51.100.0/24"),
        ]
    )
    cluster = cluster_for(
        [node("n1", rack="a"), node("n2", rack="b")], views, frozenset({"n1", "n2", "gone"})
    )
    assert cluster.known == {"n1", "n2"}
    assert cluster.live == {"n1", "n2"}
    assert cluster.admits("rack-a") == {"n1"}
    assert cluster.admits("any") == {"n1", "n2"}
    assert cluster.admits(None) == {"n1", "n2"}


def test_a_pool_without_a_node_selector_admits_every_node() -> None:
    view = pool_view(pool("p", cidr="192.0.2.0/24"))
    assert view.node_selector is None
    assert view.admits_node({}) and view.admits_node({"rack": "b"})


def test_a_pool_object_without_metadata_or_spec_is_read_not_refused() -> None:
    """Malformed objects are read as far as they go (no name: "", no spec: no addresses),
    never raising out of the pass that builds the views."""
    for obj in (
        {"spec": {"cidr": "192.0.2.0/24"}},
        {"metadata": {}, "spec": {"cidr": "192.0.2.0/24"}},
    ):
        view = pool_view(obj)
        assert view.name == "" and view.pool is not None
    bare = pool_view({"metadata": {"name": "p"}})
    assert (bare.name, bare.pool, bare.node_selector, bare.placement) == ("p", None, None, None)
    assert list(PoolViews().build([{"metadata": {"name": "p", "resourceVersion": "1"}}])) == ["p"]


def test_a_pool_with_a_broken_node_selector_admits_no_node_in_the_cluster() -> None:
    """Not every node: a typo in a selector must not spread the pool's claims everywhere."""
    views = PoolViews().build(
        [pool("broken", cidr="192.0.2.0/24", nodeSelector={"matchExpressions": "x"})]
    )
    cluster = cluster_for([node("n1"), node("n2")], views, frozenset({"n1", "n2"}))
    assert cluster.admits("broken") == frozenset()
    assert cluster.admits(None) == {"n1", "n2"}


def test_an_ipnode_without_labels_or_name_is_read_not_refused() -> None:
    """Read as ``name_of`` reads it everywhere else ("" for no name), with no labels: a
    selector does not admit it, and nothing excludes it."""
    views = PoolViews().build(
        [pool("rack-a", cidr="192.0.2.0/24", nodeSelector={"matchLabels": {"rack": "a"}})]
    )
    ipnodes = [{"metadata": {"name": "n1"}}, {"metadata": {}}, {}]
    cluster = cluster_for(ipnodes, views, frozenset())
    assert cluster.known == {"n1", ""}
    assert cluster.admits("rack-a") == frozenset()
    assert exclusions([{"metadata": {"name": "n1"}}, {}], [], cordoned_excludes=True) == {}


def test_a_changed_pool_is_read_again() -> None:
    """The memo keeps a view per resourceVersion: a new version is a new view."""
    views = PoolViews()
    first = pool("p", cidr="192.0.2.0/24", placement="spread")
    assert views.build([first])["p"].placement is Policy.SPREAD
    changed = pool("p", cidr="192.0.2.0/24", placement="all")
    changed["metadata"]["resourceVersion"] = "2"
    assert views.build([changed])["p"].placement is Policy.ALL


def test_a_pool_without_metadata_is_built_under_the_name_its_view_has() -> None:
    views = PoolViews().build([{"spec": {"cidr": "192.0.2.0/24"}}])
    assert list(views) == [""] and views[""].name == ""


def test_an_allow_manual_pool_with_a_broken_cidr_holds_no_manual_address() -> None:
    views = PoolViews()
    built = views.build(
        [
            pool("a", cidr="nonsense", allowManual=True),
            pool("b", cidr="192.0.2.0/24", allowManual=True),
        ]
    )
    found = views.manual_pool_for(built, ipaddress.ip_address("192.0.2.7"))
    assert found is not None and found.name == "b"


def test_an_ipnode_is_excluded_by_its_own_label_when_no_node_is_cached() -> None:
    """Its controller copies the exclusion label from the Node: until the scheduler's
    Node cache has that Node, the IpNode's label decides."""
    labelled = {"metadata": {"name": "n1", "labels": {EXCLUDE_LABEL: ""}}}
    assert exclusions([labelled], [], cordoned_excludes=False) == {"n1": Exclusion.EXCLUDED}
    assert exclusions([labelled], [node("n1")], cordoned_excludes=False) == {}
