"""nodeips/views.py: the mutations decide from the fresh copy (compare-and-set)."""

from __future__ import annotations

import copy
import ipaddress

import pytest

from eipctl.core.claims import node_ip_claim
from eipctl.core.naming import ANNOTATION_SLOT, LABEL_EXTERNAL_IP, TAINT_NOT_ATTACHED
from eipctl.core.node_claims import NodeEdit
from eipctl.nodeips import views as v


def node_obj(slot: str = "", **labels: str) -> dict:  # type: ignore[type-arg]
    meta: dict = {"name": "n1", "labels": dict(labels)}  # type: ignore[type-arg]
    if slot:
        meta["annotations"] = {ANNOTATION_SLOT: slot}
    return {
        "metadata": meta,
        "spec": {"taints": [{"key": TAINT_NOT_ATTACHED, "effect": "NoSchedule"}, {"key": "x"}]},
    }


def test_set_slot_is_compare_and_set() -> None:
    obj = node_obj()
    v.set_slot("", "192-0-2-1")(obj)
    assert v.slot_of(obj) == "192-0-2-1"
    v.set_slot("", "192-0-2-2")(obj)  # someone else's choice is never overwritten
    assert v.slot_of(obj) == "192-0-2-1"
    v.set_slot("192-0-2-9", "")(obj)
    assert v.slot_of(obj) == "192-0-2-1"
    v.set_slot("192-0-2-1", "")(obj)
    assert v.slot_of(obj) == ""


def test_node_edit_sets_label_and_lifts_only_our_taint() -> None:
    obj = node_obj()
    v.apply_node_edit(NodeEdit(external_ip="192.0.2.1", remove_taint=True))(obj)
    assert obj["metadata"]["labels"][LABEL_EXTERNAL_IP] == "192.0.2.1"
    assert obj["spec"]["taints"] == [{"key": "x"}]
    v.apply_node_edit(NodeEdit(external_ip=""))(obj)
    assert LABEL_EXTERNAL_IP not in obj["metadata"]["labels"]


def test_a_node_ip_claim_reads_back_as_a_node_claim() -> None:
    cloud = node_ip_claim(
        ipaddress.ip_address("198.51.100.7"),
        node="n1",
        pool="eips",
        prefix_length=None,
        provider="aws",
        allocation="eipalloc-1",
    )
    assert v.allocation_id(cloud) == "eipalloc-1"
    claim = v.node_claim(cloud)
    assert claim is not None and claim.provider == "aws" and claim.node == "n1"


def test_bind_compare_and_set_on_node_name() -> None:
    obj = node_ip_claim(ipaddress.ip_address("192.0.2.1"), node="old", pool="p", prefix_length=32)
    before = copy.deepcopy(obj)
    with pytest.raises(v.NotOurs):
        v.bind("elsewhere", "new")(obj)
    assert obj == before
    v.bind("old", "new")(obj)
    assert obj["spec"]["nodeName"] == "new"
    assert obj["metadata"]["labels"]["eipctl.io/node"] == "new"
    v.bind("new", "")(obj)
    assert "nodeName" not in obj["spec"] and "eipctl.io/node" not in obj["metadata"]["labels"]
    foreign = {"metadata": {"name": "192-0-2-2", "labels": {}}, "spec": {"ip": "192.0.2.2"}}
    with pytest.raises(v.NotOurs):
        v.bind("", "n1")(foreign)
