"""nodeips/views.py: the mutations decide from the fresh copy (compare-and-set)."""

from __future__ import annotations

import copy
import ipaddress

import pytest

from eipctl.core.naming import ANNOTATION_SLOT, LABEL_EXTERNAL_IP, TAINT_NOT_ATTACHED
from eipctl.core.node_claims import NodeEdit
from eipctl.core.resources import IpClaim
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


def test_new_claim_parses_and_marks_node_bound() -> None:
    bare = v.new_claim(ipaddress.ip_address("192.0.2.1"), node="n1", pool="p", prefix_length=None)
    typed = IpClaim.from_dict(bare)
    assert typed.name == "192-0-2-1" and typed.spec.node_bound and typed.spec.node_name == "n1"
    assert typed.labels == {
        "eipctl.io/pool": "p",
        "eipctl.io/origin": "node",
        "eipctl.io/node": "n1",
    }
    assert typed.spec.prefix_length == 32
    cloud = v.new_claim(
        ipaddress.ip_address("198.51.100.7"),
        node="n1",
        pool="eips",
        prefix_length=None,
        provider="aws",
        allocation="eipalloc-1",
    )
    assert "eipctl.io/node" not in cloud["metadata"]["labels"]
    assert v.allocation_id(cloud) == "eipalloc-1"
    claim = v.node_claim(cloud)
    assert claim is not None and claim.provider == "aws" and claim.node == "n1"


def test_bind_compare_and_set_on_node_name() -> None:
    obj = v.new_claim(ipaddress.ip_address("192.0.2.1"), node="old", pool="p", prefix_length=32)
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


def test_placed_status_keeps_bound_on_the_same_node() -> None:
    obj = v.new_claim(ipaddress.ip_address("192.0.2.1"), node="n1", pool="p", prefix_length=32)
    v.placed_status()(obj)
    assert obj["status"]["phase"] == "Scheduled"
    obj["status"].update(phase="Bound", boundNode="n1")
    v.placed_status()(obj)
    assert obj["status"]["phase"] == "Bound"
    v.bind("n1", "")(obj)
    v.placed_status()(obj)
    assert obj["status"]["phase"] == "Pending" and "boundNode" not in obj["status"]
    IpClaim.from_dict(obj)  # still valid


def test_cloud_status_only_for_the_node_it_is_on() -> None:
    obj = v.new_claim(
        ipaddress.ip_address("198.51.100.7"),
        node="n1",
        pool="eips",
        prefix_length=None,
        provider="aws",
    )
    v.cloud_status("n2")(obj)
    assert "status" not in obj
    v.cloud_status("n1", "NoPublicInterface", "no gateway")(obj)
    assert obj["status"]["conditions"][0]["reason"] == "NoPublicInterface"
    assert "phase" not in obj["status"]
    v.cloud_status("n1")(obj)
    assert obj["status"]["phase"] == "Bound" and obj["status"]["boundNode"] == "n1"
    assert obj["status"]["conditions"][0]["status"] == "True"
