"""core/claims.py: every process's claim spelled in one place, and the predicates on it."""

from __future__ import annotations

import ipaddress

from eipctl.core.claims import (
    allocator_claim,
    is_all_nodes,
    is_bound_on,
    is_node_bound,
    is_node_ip_claim,
    is_per_node_copy,
    is_per_node_name,
    manual_claim,
    node_ip_claim,
    node_of,
    per_node_claim,
    put_node,
    reference,
    skips_probe,
)
from eipctl.core.naming import node_claim_name_for
from eipctl.core.resources import IpClaim

A = ipaddress.ip_address("192.0.2.1")
V6 = ipaddress.ip_address("2001:db8::7")


def test_every_constructor_makes_a_claim_that_parses_named_after_its_ip() -> None:
    bodies = [
        allocator_claim(A, pool="p", prefix_length=None, service="shop/web", sharing_key=""),
        manual_claim(A, pool=None, prefix_length=32, services=["b/x", "a/y"]),
        node_ip_claim(A, node="n1", pool="p", prefix_length=None),
    ]
    for body in bodies:
        typed = IpClaim.from_dict(body)
        assert typed.name == "192-0-2-1" and typed.spec.ip == "192.0.2.1"
        assert typed.spec.prefix_length == 32


def test_allocator_claim() -> None:
    body = allocator_claim(V6, pool="p6", prefix_length=64, service="shop/web", sharing_key="k")
    assert body["metadata"] == {
        "name": "2001-db8--7",
        "labels": {"eipctl.io/pool": "p6", "eipctl.io/origin": "allocator"},
        "annotations": {"eipctl.io/sharing-key": "k"},
    }
    assert body["spec"] == {"ip": "2001:db8::7", "prefixLength": 64, "services": ["shop/web"]}
    unshared = allocator_claim(V6, pool="p6", prefix_length=None, service="a/b", sharing_key="")
    assert "annotations" not in unshared["metadata"]
    assert unshared["spec"]["prefixLength"] == 128


def test_manual_claim() -> None:
    body = manual_claim(A, pool="p", prefix_length=24, services=["b/x", "a/y"])
    assert body["metadata"]["labels"] == {"eipctl.io/origin": "manual", "eipctl.io/pool": "p"}
    assert body["spec"] == {"ip": "192.0.2.1", "prefixLength": 24, "services": ["a/y", "b/x"]}
    unpooled = manual_claim(A, pool=None, prefix_length=32, services=[])
    assert unpooled["metadata"]["labels"] == {"eipctl.io/origin": "manual"}


def test_node_ip_claim_parses_and_marks_node_bound() -> None:
    bare = node_ip_claim(A, node="n1", pool="p", prefix_length=None)
    typed = IpClaim.from_dict(bare)
    assert typed.name == "192-0-2-1" and typed.spec.node_bound and typed.spec.node_name == "n1"
    assert typed.labels == {
        "eipctl.io/pool": "p",
        "eipctl.io/origin": "node",
        "eipctl.io/node": "n1",
    }
    assert typed.spec.prefix_length == 32
    cloud = node_ip_claim(
        V6, node="n1", pool="eips", prefix_length=64, provider="aws", allocation="x"
    )
    assert "eipctl.io/node" not in cloud["metadata"]["labels"]
    assert cloud["metadata"]["labels"]["eipctl.io/provider"] == "aws"
    assert cloud["metadata"]["annotations"] == {"eipctl.io/allocation-id": "x"}
    assert cloud["spec"]["prefixLength"] == 64
    assert is_node_ip_claim(cloud) and is_node_bound(cloud)


def test_per_node_claim_copies_its_base() -> None:
    base = allocator_claim(A, pool="p", prefix_length=24, service="a/b", sharing_key="")
    assert per_node_claim(base, "n1") is not None
    base["metadata"]["uid"] = "u1"
    base["spec"]["link"] = "eth1"
    copy = per_node_claim(base, "n1")
    assert copy is not None
    assert copy["metadata"]["name"] == "192-0-2-1.n1"
    assert copy["metadata"]["labels"] == {
        "eipctl.io/node": "n1",
        "eipctl.io/origin": "all-nodes",
        "eipctl.io/pool": "p",
    }
    assert copy["metadata"]["ownerReferences"] == [
        {"apiVersion": "eipctl.io/v1alpha1", "kind": "IpClaim", "name": "192-0-2-1", "uid": "u1"}
    ]
    assert copy["spec"] == {
        "ip": "192.0.2.1",
        "nodeName": "n1",
        "nodeBound": True,
        "prefixLength": 24,
        "link": "eth1",
    }
    assert is_per_node_copy(copy) and is_node_bound(copy) and not is_per_node_copy(base)
    assert per_node_claim(base, "Not_A_Node") is None
    IpClaim.from_dict(copy)


def test_node_bound_and_probe_skipping_read_the_same_marks() -> None:
    """Two meanings of one field: never moved (scheduler), added without a probe (controller)."""
    handmade = {"metadata": {"name": node_claim_name_for(A, "n3")}, "spec": {"ip": "192.0.2.1"}}
    plain = {"metadata": {"name": "192-0-2-1"}, "spec": {"ip": "192.0.2.1"}}
    marked = {"metadata": {"name": "192-0-2-1"}, "spec": {"ip": "192.0.2.1", "nodeBound": True}}
    assert is_node_bound(handmade) and is_node_bound(marked) and not is_node_bound(plain)
    assert skips_probe(node_claim_name_for(A, "n3"), False)
    assert skips_probe("192-0-2-1", True)
    assert not skips_probe("192-0-2-1", False)
    assert is_per_node_name("192-0-2-1.n3") and not is_per_node_name("192-0-2-1")


def test_put_node_places_and_unplaces_with_the_label() -> None:
    obj = manual_claim(A, pool=None, prefix_length=32, services=[])
    put_node(obj, "n1")
    assert node_of(obj) == "n1" and obj["metadata"]["labels"]["eipctl.io/node"] == "n1"
    put_node(obj, "n2", labelled=False)
    assert node_of(obj) == "n2" and obj["metadata"]["labels"]["eipctl.io/node"] == "n1"
    put_node(obj, "")
    assert node_of(obj) == "" and "eipctl.io/node" not in obj["metadata"]["labels"]
    assert "nodeName" not in obj["spec"]


def test_reads_and_reference() -> None:
    obj = {
        "metadata": {"name": "x", "labels": {"eipctl.io/placement": "all"}},
        "status": {"phase": "Bound", "boundNode": "n1"},
    }
    assert is_all_nodes(obj) and is_bound_on(obj, "n1") and not is_bound_on(obj, "n2")
    assert not is_bound_on({"status": {"boundNode": "n1"}}, "n1")  # Pending
    assert reference(obj) == {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaim",
        "metadata": obj["metadata"],
    }
