"""core/node_claims.py: reuse of a cordoned node's claim (docs/testing.md, "Mutation")."""

from __future__ import annotations

from ipaddress import ip_address

from eipctl.core.node_claims import NodeClaim, NodeView, PodView, rank_reuse


def test_a_cordoned_nodes_claim_is_reused_only_if_no_pod_pins_it() -> None:
    claims = [
        NodeClaim("a", ip_address("192.0.2.1"), "p", node="cordoned"),
        NodeClaim("b", ip_address("192.0.2.2"), "p", node="cordoned"),
    ]
    nodes = {"cordoned": NodeView("cordoned", {"eipctl.io/external-ip-auto-assign": "true"}, True)}
    pods = [PodView(ip="192.0.2.1", node="cordoned")]
    assert [c.name for c in rank_reuse("p", claims, nodes, pods)] == ["b"]
