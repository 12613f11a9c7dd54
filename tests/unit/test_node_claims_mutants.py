"""core/node_claims.py: reuse of a cordoned node's claim (docs/testing.md, "Mutation")."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from eipctl.core.node_claims import (
    NodeClaim,
    NodeEdit,
    NodeView,
    PodView,
    may_acquire,
    node_edit,
    rank_reuse,
)


def test_a_cordoned_nodes_claim_is_reused_only_if_no_pod_pins_it() -> None:
    claims = [
        NodeClaim("a", ip_address("192.0.2.1"), "p", node="cordoned"),
        NodeClaim("b", ip_address("192.0.2.2"), "p", node="cordoned"),
    ]
    nodes = {"cordoned": NodeView("cordoned", {"eipctl.io/external-ip-auto-assign": "true"}, True)}
    pods = [PodView(ip="192.0.2.1", node="cordoned")]
    assert [c.name for c in rank_reuse("p", claims, nodes, pods)] == ["b"]


AUTO = {"eipctl.io/external-ip-auto-assign": "true"}


def test_a_node_not_labelled_for_an_ip_may_not_acquire_one() -> None:
    """Only Nodes that ask (the auto-assign label) get an IP, schedulable or not."""
    assert not may_acquire(NodeView("n", {}))
    assert not may_acquire(NodeView("n", {"eipctl.io/external-ip-auto-assign": "false"}))
    assert may_acquire(NodeView("n", AUTO))


@pytest.mark.parametrize("phase", ["Pending", "Scheduled", "Failed"])
def test_an_ip_is_live_on_its_node_only_once_bound(phase: str) -> None:
    """A status naming the node as bound without the phase Bound is no live IP: the Node
    is not labelled with it, nor its startup taint lifted."""
    claim = NodeClaim("a", ip_address("192.0.2.1"), "p", node="n", phase=phase, bound_node="n")
    assert claim.live_on == ""
    node = NodeView("n", AUTO, tainted=True)
    assert node_edit(node, claim) == NodeEdit(external_ip=None, remove_taint=False)


@pytest.mark.parametrize(
    ("edit", "empty"),
    [
        (NodeEdit(), True),
        (NodeEdit(external_ip=""), False),  # removes the label
        (NodeEdit(external_ip="192.0.2.1"), False),
        (NodeEdit(remove_taint=True), False),
    ],
)
def test_an_edit_is_empty_only_if_it_changes_neither_the_label_nor_the_taint(
    edit: NodeEdit, empty: bool
) -> None:
    assert edit.empty is empty
