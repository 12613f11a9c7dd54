"""core/claims.py: the envelope, the defaults of the lenient reads, and `put_node` on bare
objects (docs/testing.md, "Mutation")."""

from __future__ import annotations

import ipaddress

from eipctl.core.claims import (
    allocator_claim,
    bound_node_of,
    manual_claim,
    node_ip_claim,
    phase_of,
    pool_of,
    put_node,
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
