"""core/node_claims.py: providerID parsing and reuse of a cordoned node's claim
(docs/testing.md, "Mutation")."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.core.node_claims import NodeClaim, NodeView, PodView, parse_provider_id, rank_reuse


@pytest.mark.parametrize(
    ("provider_id", "parsed"),
    [
        ("aws:///us-east-1a/i-0abc", ("aws", "i-0abc")),
        ("aws:///us-east-1a/i-0abc/", ("aws", "i-0abc")),
        ("aws:///us-east-1a/i-ABX", ("aws", "i-ABX")),
        ("gce://proj://zone/n1", ("gce", "n1")),
    ],
)
def test_provider_ids(provider_id: str, parsed: tuple[str, str]) -> None:
    assert parse_provider_id(provider_id) == parsed


@pytest.mark.parametrize("provider_id", ["i-0abc", "://zone/i-0abc", "aws:///"])
def test_malformed_provider_ids(provider_id: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_provider_id(provider_id)
    assert str(caught.value) == f"{provider_id!r} is not a providerID (scheme:///.../instance)"


def test_a_cordoned_nodes_claim_is_reused_only_if_no_pod_pins_it() -> None:
    claims = [
        NodeClaim("a", ip_address("192.0.2.1"), "p", node="cordoned"),
        NodeClaim("b", ip_address("192.0.2.2"), "p", node="cordoned"),
    ]
    nodes = {"cordoned": NodeView("cordoned", {"eipctl.io/external-ip-auto-assign": "true"}, True)}
    pods = [PodView(ip="192.0.2.1", node="cordoned")]
    assert [c.name for c in rank_reuse("p", claims, nodes, pods)] == ["b"]
