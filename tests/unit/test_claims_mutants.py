"""core/claims.py: the envelope, the defaults of the lenient reads, and `put_node` on bare
objects (docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress

from eipctl.core.claims import (
    allocator_claim,
    bound_node_of,
    manual_claim,
    node_ip_claim,
    node_of,
    per_node_claim,
    phase_of,
    pool_of,
    put_node,
    spec_of,
)
from eipctl.core.fields import Obj

A = ipaddress.ip_address("192.0.2.1")


def test_every_claim_carries_the_envelope() -> None:
    for body in (
        allocator_claim(A, pool="p", prefix_length=None, service="a/b", sharing_key=""),
        manual_claim(A, pool=None, prefix_length=32, services=[]),
        node_ip_claim(A, node="n1", pool="p", prefix_length=None),
    ):
        assert set(body) == {"apiVersion", "kind", "metadata", "spec"}
        assert (body["apiVersion"], body["kind"]) == ("eipctl.io/v1alpha1", "IpClaim")


def test_a_bare_metal_node_ip_claim_has_no_annotations() -> None:
    assert (
        "annotations" not in node_ip_claim(A, node="n1", pool="p", prefix_length=None)["metadata"]
    )


def test_lenient_reads_default_when_absent() -> None:
    assert phase_of({}) == "Pending" and phase_of({"status": {"phase": "Bound"}}) == "Bound"
    assert bound_node_of({}) == "" and bound_node_of({"status": {"boundNode": "n1"}}) == "n1"
    assert pool_of({}) == "" and pool_of({"metadata": {"labels": {"eipctl.io/pool": "p"}}}) == "p"


def test_put_node_on_a_bare_object() -> None:
    obj: Obj = {}
    put_node(obj, "")  # nothing to remove, nothing to fail on
    assert obj == {"spec": {}, "metadata": {"labels": {}}}
    bare: Obj = {}
    put_node(bare, "n1")
    assert bare == {"spec": {"nodeName": "n1"}, "metadata": {"labels": {"eipctl.io/node": "n1"}}}


def test_a_claim_without_a_spec_reads_as_an_empty_one() -> None:
    """A cached object with no spec (or a null one) reads as unplaced, it does not raise."""
    assert spec_of({}) == {} and spec_of({"spec": None}) == {}
    assert node_of({}) == "" and node_of({"spec": None}) == ""


def test_a_per_node_copy_of_an_unpooled_unstored_claim_has_no_pool_and_no_owner() -> None:
    """No ``eipctl.io/pool: null`` label (a label is a string) and no owner reference with a
    null uid (a reference needs one): the copy is collected with its base only given a uid."""
    base = manual_claim(A, pool=None, prefix_length=32, services=[])
    copy = per_node_claim(base, "n1")
    assert copy is not None
    assert copy["metadata"]["labels"] == {"eipctl.io/node": "n1", "eipctl.io/origin": "all-nodes"}
    assert "ownerReferences" not in copy["metadata"]
