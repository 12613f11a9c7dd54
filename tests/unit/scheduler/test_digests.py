"""scheduler/digests.py: the per-node digests the leader's probes carry, kept from the claim
informer's changes, always equal to the digest of the claims labelled for each node now."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.liveness_wire import placement_digest
from eipctl.core.naming import LABEL_NODE
from eipctl.scheduler import digests as digests_module
from eipctl.scheduler.digests import NodeDigests

NAMES = [f"10-0-0-{n}" for n in range(6)]
NODES = ["node-a", "node-b", "node-c"]
EMPTY = placement_digest([])


def claim(name: str, node: str | None, style: int = 0) -> dict[str, Any]:
    """A claim labelled for ``node`` (None: for nobody, written several ways)."""
    labels: dict[str, Any] | None
    if node is not None:
        labels = {LABEL_NODE: node, "app": "x"} if style else {LABEL_NODE: node}
    else:
        labels = [None, {}, {"app": "x"}, None][style % 4]
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(style)}
    if labels is not None or style == 3:
        meta["labels"] = labels
    return {"metadata": meta}


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from(NAMES),
            st.one_of(st.none(), st.sampled_from(NODES)),
            st.integers(0, 3),
        ),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none(), st.just(0)),
        st.tuples(st.just("resync"), st.sampled_from(NAMES), st.none(), st.just(0)),
        st.tuples(st.just("look"), st.none(), st.sampled_from(NODES), st.just(0)),
    ),
    max_size=50,
)


def expected(objects: dict[str, dict[str, Any]], node: str) -> bytes:
    """The independent model: hash the names labelled for ``node`` now."""
    names = [
        name
        for name, obj in objects.items()
        if (obj["metadata"].get("labels") or {}).get(LABEL_NODE) == node
    ]
    return placement_digest(names)


@given(ops, st.booleans())
def test_every_digest_is_that_of_the_claims_labelled_for_the_node_now(
    steps: list[tuple[str, Any, Any, int]], check_every_step: bool
) -> None:
    digests = NodeDigests()
    objects: dict[str, dict[str, Any]] = {}  # the informer's cache: name -> object
    for op, name, node, style in steps:
        if op == "put":
            new = claim(name, node, style)
            digests.observe(objects.get(name), new)  # an add, or an update (relabel or not)
            objects[name] = new
        elif op == "delete" and name in objects:
            digests.observe(objects.pop(name), None)
        elif op == "resync" and name in objects:
            digests.observe(objects[name], objects[name])  # a relist replaying the cache
        elif op == "look":
            assert digests.digest(node) == expected(objects, node)
        if check_every_step:
            for each in NODES:
                assert digests.digest(each) == expected(objects, each), (op, name, node)
    for each in [*NODES, "node-nobody-knows"]:
        assert digests.digest(each) == expected(objects, each)


def test_a_node_with_no_claims_has_the_digest_of_the_empty_set() -> None:
    digests = NodeDigests()
    assert digests.digest("node-a") == EMPTY
    digests.observe(None, claim("10-0-0-1", "node-b"))
    assert digests.digest("node-a") == EMPTY
    assert digests.digest("node-b") == placement_digest(["10-0-0-1"])
    assert digests.digest("node-b") != EMPTY


def test_a_relabel_moves_the_claim_between_the_two_nodes_digests() -> None:
    digests = NodeDigests()
    a1, b1 = claim("10-0-0-1", "node-a"), claim("10-0-0-1", "node-b")
    digests.observe(None, a1)
    digests.observe(None, claim("10-0-0-2", "node-a"))
    assert digests.digest("node-a") == placement_digest(["10-0-0-1", "10-0-0-2"])
    assert digests.digest("node-b") == EMPTY  # looked at before the move: cached
    digests.observe(a1, b1)
    assert digests.digest("node-a") == placement_digest(["10-0-0-2"])
    assert digests.digest("node-b") == placement_digest(["10-0-0-1"])


def test_the_last_claim_of_a_node_going_leaves_the_empty_digest() -> None:
    digests = NodeDigests()
    only = claim("10-0-0-1", "node-a")
    digests.observe(None, only)
    assert digests.digest("node-a") != EMPTY
    digests.observe(only, None)
    assert digests.digest("node-a") == EMPTY


def test_unplacing_a_claim_takes_it_out_of_its_nodes_digest() -> None:
    digests = NodeDigests()
    placed = claim("10-0-0-1", "node-a")
    digests.observe(None, placed)
    digests.observe(None, claim("10-0-0-2", "node-a"))
    assert digests.digest("node-a") == placement_digest(["10-0-0-1", "10-0-0-2"])
    digests.observe(placed, claim("10-0-0-1", None))
    assert digests.digest("node-a") == placement_digest(["10-0-0-2"])


def test_a_change_naming_a_node_the_digests_hold_no_claims_for_changes_nothing() -> None:
    """The informer hands a deletion its final object (the watch event's, not the cached
    one): a delete or update whose old labels name a node with no claim here must not raise
    (the handler would skip the rest of the scheduler's claim handling)."""
    digests = NodeDigests()
    kept = claim("10-0-0-2", "node-b")
    digests.observe(None, kept)
    digests.observe(claim("10-0-0-1", "node-a"), None)  # never seen labelled node-a
    digests.observe(claim("10-0-0-1", "node-c"), claim("10-0-0-1", "node-b"))
    assert digests.digest("node-a") == EMPTY
    assert digests.digest("node-c") == EMPTY
    assert digests.digest("node-b") == placement_digest(["10-0-0-1", "10-0-0-2"])


def test_an_object_without_metadata_is_no_claim_of_any_node() -> None:
    digests = NodeDigests()
    digests.observe(None, claim("10-0-0-1", "node-a"))
    digests.observe(None, {})
    digests.observe({}, None)
    assert digests.digest("node-a") == placement_digest(["10-0-0-1"])


def test_a_digest_is_computed_again_only_after_its_nodes_claims_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The module's promise: a probe round is a dictionary look-up per node, not a hash of
    every node's claims (the leader probes every node several times a second)."""
    hashed: list[list[str]] = []

    def counting(names: Iterable[str]) -> bytes:
        hashed.append(sorted(names))
        return placement_digest(names)

    monkeypatch.setattr(digests_module, "placement_digest", counting)
    digests = NodeDigests()
    digests.observe(None, claim("10-0-0-1", "node-a"))
    first = digests.digest("node-a")
    assert digests.digest("node-a") == first
    assert digests.digest("node-b") == digests.digest("node-b") == EMPTY
    assert hashed == [["10-0-0-1"], []]
    digests.observe(None, claim("10-0-0-2", "node-a"))
    assert digests.digest("node-a") == digests.digest("node-a") != first
    assert digests.digest("node-b") == EMPTY
    assert hashed == [["10-0-0-1"], [], ["10-0-0-1", "10-0-0-2"]]
