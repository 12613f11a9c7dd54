"""`ClaimFactsMemo`: a pass reads a claim again only when its version changed."""

from __future__ import annotations

import copy

from eipctl.core.fields import Obj
from eipctl.scheduler.claim_facts import ClaimFactsMemo, facts_of


def claim(name: str, rv: str | None, node: str = "", phase: str = "") -> Obj:
    meta: Obj = {"name": name, "labels": {"eipctl.io/pool": "p"}}
    if rv is not None:
        meta["resourceVersion"] = rv
    spec: Obj = {"ip": "192.0.2.7", "services": ["default/web", "bad"]}
    if node:
        spec["nodeName"] = node
        meta["labels"]["eipctl.io/node"] = node
    status: Obj = {"phase": phase} if phase else {}
    if phase == "Bound":
        status["boundNode"] = node
    return {"metadata": meta, "spec": spec, "status": status}


def test_facts_are_what_the_pass_would_read() -> None:
    facts = facts_of(claim("c", "1", node="n1", phase="Bound"))
    assert (facts.name, facts.phase, facts.node_bound) == ("c", "Bound", False)
    assert (facts.view.node, facts.view.pool, facts.view.all_nodes) == ("n1", "p", False)
    assert facts.consistent and facts.services == ("default/web",)
    assert facts_of(claim("c", "1")).phase == "Pending"
    assert facts_of(claim("192-0-2-7.n1", "1", node="n1")).node_bound  # a per-node name


def test_only_changed_claims_are_read_again_and_deleted_ones_forgotten() -> None:
    memo = ClaimFactsMemo()
    a, b = claim("a", "1"), claim("b", "2")
    assert [f.name for f in memo.of_all([a, b])] == ["a", "b"]
    assert memo.read == 2
    assert [f.name for f in memo.of_all([copy.deepcopy(a), b])] == ["a", "b"]
    assert memo.read == 0  # same versions: nothing read

    moved = claim("b", "3", node="n2", phase="Scheduled")
    facts = memo.of_all([a, moved])
    assert memo.read == 1 and facts[1].view.node == "n2" and facts[1].phase == "Scheduled"

    memo.of_all([moved])  # a is gone
    assert memo.of_all([a, moved]) and memo.read == 1  # a read again, not remembered


def test_a_claim_without_a_version_is_read_every_time() -> None:
    memo = ClaimFactsMemo()
    loose = claim("x", None)
    memo.of_all([loose])
    loose["spec"]["nodeName"] = "n1"  # changed in place, as no API object is
    (facts,) = memo.of_all([loose])
    assert memo.read == 1 and facts.view.node == "n1"


def test_a_claim_without_metadata_is_read_as_nameless_and_not_kept() -> None:
    """A claim not from the API may lack metadata: the pass still reads it (every time)."""
    memo = ClaimFactsMemo()
    bare: Obj = {"spec": {"ip": "192.0.2.7", "nodeName": "n1"}}
    for _ in range(2):
        (facts,) = memo.of_all([bare])
        assert memo.read == 1 and (facts.name, facts.view.node) == ("", "n1")
