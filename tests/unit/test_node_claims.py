"""Node IP decisions (core/node_claims.py): tables for the rules, hypothesis for invariants."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.naming import LABEL_AUTO_ASSIGN, LABEL_EXTERNAL_IP, LABEL_NODE_POOL
from eipctl.core.node_claims import (
    NodeClaim,
    NodeEdit,
    NodeView,
    PodView,
    Release,
    choose_own,
    desired_pool,
    may_acquire,
    new_ip,
    node_edit,
    rank_reuse,
    reference_counts,
    release_decision,
    reusable,
)
from eipctl.core.pool import Pool
from eipctl.core.resources import IpClaimPool

AUTO = {LABEL_AUTO_ASSIGN: "true"}


def nv(name: str, labels: Mapping[str, str] | None = None, **kw: object) -> NodeView:
    return NodeView(name=name, labels=dict(AUTO if labels is None else labels), **kw)  # type: ignore[arg-type]


def claim(ip: str, node: str = "", pool: str = "p", **kw: object) -> NodeClaim:
    address = ipaddress.ip_address(ip)
    return NodeClaim(name=str(address).replace(".", "-"), ip=address, pool=pool, node=node, **kw)  # type: ignore[arg-type]


# --- who asks --------------------------------------------------------------------------------


def test_who_asks_and_who_may_acquire() -> None:
    assert nv("a").auto_assign
    assert not nv("a", {}).auto_assign
    assert not nv("a", {LABEL_AUTO_ASSIGN: "false"}).auto_assign
    assert may_acquire(nv("a"))
    assert not may_acquire(nv("a", unschedulable=True))  # cordoned: keeps, never gets


def test_desired_pool_label_then_default() -> None:
    assert desired_pool(nv("a"), "default") == "default"
    assert desired_pool(nv("a", {**AUTO, LABEL_NODE_POOL: "edge"}), "default") == "edge"
    assert desired_pool(nv("a", {**AUTO, LABEL_NODE_POOL: " "}), "") == ""


# --- reuse ------------------------------------------------------------------------------------


def test_reusable_rules() -> None:
    nodes = {
        "live": nv("live"),
        "cordoned": nv("cordoned", unschedulable=True),
        "unlabelled": nv("unlabelled", {}),
    }
    pods = [PodView(ip="192.0.2.2", node="cordoned")]
    assert reusable(claim("192.0.2.1"), nodes, pods)  # orphan
    assert reusable(claim("192.0.2.1", "gone"), nodes, pods)  # node gone
    assert reusable(claim("192.0.2.1", "unlabelled"), nodes, pods)
    assert not reusable(claim("192.0.2.1", "live"), nodes, pods)
    assert reusable(claim("192.0.2.1", "cordoned"), nodes, pods)  # nothing pinned to it
    assert not reusable(claim("192.0.2.2", "cordoned"), nodes, pods)  # a pod pins it
    finished = [PodView(ip="192.0.2.2", node="cordoned", finished=True)]
    assert reusable(claim("192.0.2.2", "cordoned"), nodes, finished)
    elsewhere = [PodView(ip="192.0.2.2", node="live")]
    assert reusable(claim("192.0.2.2", "cordoned"), nodes, elsewhere)


def test_rank_most_referenced_then_lowest_ip() -> None:
    claims = [
        claim("192.0.2.9"),
        claim("192.0.2.3"),
        claim("192.0.2.5"),
        claim("192.0.2.1", "live"),
    ]
    pods = [
        PodView(ip="192.0.2.9"),
        PodView(ip="192.0.2.9"),
        PodView(ip="192.0.2.5"),
        PodView(ip="192.0.2.3", finished=True),
    ]
    ranked = rank_reuse("p", claims, {"live": nv("live")}, pods)
    assert [str(c.ip) for c in ranked] == ["192.0.2.9", "192.0.2.5", "192.0.2.3"]
    assert [str(c.ip) for c in rank_reuse("p", claims, {"live": nv("live")}, [])] == [
        "192.0.2.3",
        "192.0.2.5",
        "192.0.2.9",
    ]
    assert rank_reuse("other", claims, {}, pods) == []
    excluded = rank_reuse("p", claims, {"live": nv("live")}, pods, exclude={"192-0-2-9"})
    assert str(excluded[0].ip) == "192.0.2.5"


def test_reference_counts_skip_finished() -> None:
    pods = [PodView("a"), PodView("a"), PodView("b", finished=True)]
    assert reference_counts(pods) == {"a": 2}


@given(
    st.lists(st.integers(1, 30), unique=True, max_size=12),
    st.lists(st.integers(1, 30), max_size=20),
)
def test_rank_is_a_permutation_of_orphans_ordered_by_count(
    orphans: list[int], wanted: list[int]
) -> None:
    claims = [claim(f"192.0.2.{i}") for i in orphans]
    pods = [PodView(ip=f"192.0.2.{i}") for i in wanted]
    before = list(claims)
    ranked = rank_reuse("p", claims, {}, pods)
    assert claims == before  # input untouched
    assert sorted(c.name for c in ranked) == sorted(c.name for c in claims)
    counts = reference_counts(pods)
    keys = [(-counts.get(str(c.ip), 0), int(c.ip)) for c in ranked]
    assert keys == sorted(keys)


# --- release ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "prevent", "want"),
    [
        (nv("n"), False, Release.KEEP),
        (nv("n", unschedulable=True), False, Release.KEEP),  # cordoned keeps its IP
        (None, False, Release.DELETE),
        (None, True, Release.ORPHAN),
        (nv("n", {}), False, Release.DELETE),  # label removed
        (nv("n", {**AUTO, LABEL_NODE_POOL: "other"}), True, Release.ORPHAN),  # pool changed
    ],
)
def test_release_decision(node: NodeView | None, prevent: bool, want: Release) -> None:
    got = release_decision(claim("192.0.2.1", "n"), node, "p", prevent_deallocation=prevent)
    assert got is want


def test_choose_own_slot_first_then_lowest_name() -> None:
    mine = [claim("192.0.2.7", "n"), claim("192.0.2.3", "n"), claim("192.0.2.4", "n", pool="q")]
    assert choose_own(nv("n", slot="192-0-2-7"), mine, "p") == mine[0]
    assert choose_own(nv("n"), mine, "p") == mine[1]  # adopt: lowest name of the pool
    assert choose_own(nv("n", slot="192-0-2-4"), mine, "p") is None  # other pool
    assert choose_own(nv("n", slot="192-0-2-9"), mine, "p") is None
    assert choose_own(nv("m"), mine, "p") is None


# --- Node edits -------------------------------------------------------------------------------


def test_node_edit_label_when_live_and_taint_only_lifted() -> None:
    bound = claim("192.0.2.1", "n", phase="Bound", bound_node="n")
    scheduled = claim("192.0.2.1", "n", phase="Scheduled")
    tainted = nv("n", tainted=True)
    assert node_edit(tainted, scheduled) == NodeEdit()
    assert node_edit(tainted, bound) == NodeEdit(external_ip="192.0.2.1", remove_taint=True)
    labelled = nv("n", {**AUTO, LABEL_EXTERNAL_IP: "192.0.2.1"})
    assert node_edit(labelled, bound).empty
    assert node_edit(labelled, None) == NodeEdit(external_ip="")  # the IP moved away
    stale = claim("192.0.2.1", "n", phase="Bound", bound_node="other")
    assert node_edit(labelled, stale) == NodeEdit(external_ip="")
    assert node_edit(nv("n"), None).empty


# --- addresses --------------------------------------------------------------------------------


def test_new_ip_lowest_free_ignoring_outsiders() -> None:
    pool = Pool.parse("p", "192.0.2.0/29")
    used = [ipaddress.ip_address(a) for a in ("192.0.2.1", "192.0.2.3", "10.0.0.1", "2001:db8::1")]
    assert str(new_ip(pool, used)) == "192.0.2.2"
    full = [ipaddress.ip_address(f"192.0.2.{i}") for i in range(1, 7)]
    assert new_ip(pool, full) is None


# --- the pool's provider field (core/resources.py, deploy/crds) -----------------------------


def test_pool_provider_round_trip_and_crd() -> None:
    import json
    from pathlib import Path

    import jsonschema
    import yaml

    d = {"metadata": {"name": "eips"}, "spec": {"cidr": "203.0.113.0/24", "provider": "aws"}}
    parsed = IpClaimPool.from_dict(d)
    assert parsed.spec.provider == "aws"
    out = parsed.to_dict()
    assert out["spec"]["provider"] == "aws"
    assert (
        "provider"
        not in IpClaimPool.from_dict({**d, "spec": {"cidr": "203.0.113.0/24"}}).to_dict()["spec"]
    )
    with pytest.raises(ValueError, match="provider"):
        IpClaimPool.from_dict({**d, "spec": {"cidr": "203.0.113.0/24", "provider": "gcp"}})
    crd = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "deploy/crds/ipclaimpools.yaml").read_text()
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(json.loads(json.dumps(out)), schema)
    bad = {**out, "spec": {**out["spec"], "provider": "gcp"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
