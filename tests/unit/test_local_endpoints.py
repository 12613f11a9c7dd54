"""core/local_endpoints.py: the nodes where a Local Service is answered, as kube-proxy reads
its EndpointSlices."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.local_endpoints import (
    EndpointNodes,
    endpoint_nodes,
    is_local,
    service_key_of_slice,
    trim_slice,
)


def endpoint(node: str | None, **conditions: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"addresses": ["10.0.0.1"], "conditions": conditions}
    if node is not None:
        out["nodeName"] = node
    return out


def slice_(*endpoints: dict[str, Any], family: str = "IPv4") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "web-abc",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": family,
        "endpoints": list(endpoints),
    }


def test_ready_endpoints_place_and_terminating_serving_ones_only_hold() -> None:
    got = endpoint_nodes(
        [
            slice_(
                endpoint("n1", ready=True),
                endpoint("n2", ready=False, serving=True, terminating=True),
                endpoint("n3", ready=False, serving=False, terminating=True),
                endpoint("n4", ready=False),  # not ready, not terminating: starting up
            )
        ],
        4,
    )
    assert got == EndpointNodes(frozenset({"n1"}), frozenset({"n2"}))
    assert got.answers("n2") and not got.answers("n3") and not got.answers("n4")


def test_missing_conditions_read_as_the_api_documents_them() -> None:
    # ready missing: ready; serving missing: as ready; terminating missing: not
    assert endpoint_nodes([slice_(endpoint("n1"))], 4).ready == {"n1"}
    only_terminating = endpoint_nodes([slice_(endpoint("n1", ready=False, terminating=True))], 4)
    assert only_terminating == EndpointNodes()  # serving defers to ready: not serving


def test_a_node_with_a_ready_and_a_terminating_endpoint_is_ready() -> None:
    got = endpoint_nodes(
        [
            slice_(endpoint("n1", ready=False, serving=True, terminating=True)),
            slice_(endpoint("n1", ready=True)),
        ],
        4,
    )
    assert got == EndpointNodes(frozenset({"n1"}), frozenset())


def test_only_the_claims_family_counts_and_endpoints_without_a_node_count_nowhere() -> None:
    slices = [slice_(endpoint("n1")), slice_(endpoint("n2"), family="IPv6"), slice_(endpoint(None))]
    assert endpoint_nodes(slices, 4).ready == {"n1"}
    assert endpoint_nodes(slices, 6).ready == {"n2"}
    assert endpoint_nodes([slice_(endpoint("n1"), family="FQDN")], 4) == EndpointNodes()


def test_garbage_in_a_slice_is_skipped() -> None:
    bad: list[Any] = [
        {"addressType": "IPv4", "endpoints": "nope"},
        {"addressType": "IPv4", "endpoints": [None, 3, {"nodeName": 7}, {"nodeName": ""}]},
        {"addressType": "IPv4", "endpoints": [{"nodeName": "n1", "conditions": "yes"}]},
        {"addressType": "IPv4", "endpoints": [{"nodeName": "n2", "conditions": {"ready": "no"}}]},
    ]
    # a condition that is no bool is as if missing: n1 and n2 read as ready
    assert endpoint_nodes(bad, 4).ready == {"n1", "n2"}


def test_the_policy_and_the_owning_service() -> None:
    assert is_local({"spec": {"externalTrafficPolicy": "Local"}})
    assert not is_local({"spec": {"externalTrafficPolicy": "Cluster"}})
    assert not is_local({"spec": None})
    assert service_key_of_slice(slice_()) == ("default", "web")
    assert service_key_of_slice({"metadata": {"namespace": "default"}}) is None
    assert service_key_of_slice({}) is None
    for name, namespace in ((7, "default"), ("", "default"), ("web", None), ("web", 3)):
        broken = {"namespace": namespace, "labels": {"kubernetes.io/service-name": name}}
        assert service_key_of_slice({"metadata": broken}) is None, (name, namespace)


def test_an_endpoint_serving_but_neither_ready_nor_terminating_answers_nowhere() -> None:
    """Only a terminating endpoint that still serves holds a claim where it is."""
    got = endpoint_nodes([slice_(endpoint("n1", ready=False, serving=True, terminating=False))], 4)
    assert got == EndpointNodes(frozenset(), frozenset())


def test_a_slice_of_no_service_trims_to_no_service_label() -> None:
    orphan = {"metadata": {"name": "x", "namespace": "default"}, "endpoints": []}
    assert "labels" not in trim_slice(orphan)["metadata"]


NODE = st.sampled_from(["n1", "n2", "n3", "n4"])
ENDPOINT_NODES = st.builds(
    lambda r, t: EndpointNodes(frozenset(r), frozenset(t) - frozenset(r)),
    st.sets(NODE),
    st.sets(NODE),
)


@given(ENDPOINT_NODES, ENDPOINT_NODES)
def test_shared_ips_answer_only_where_both_services_do(a: EndpointNodes, b: EndpointNodes) -> None:
    both = a & b
    assert both.ready == a.ready & b.ready
    assert not both.ready & both.terminating
    for node in ["n1", "n2", "n3", "n4"]:
        assert both.answers(node) == (a.answers(node) and b.answers(node))


CONDITIONS = st.fixed_dictionaries(
    {}, optional={"ready": st.booleans(), "serving": st.booleans(), "terminating": st.booleans()}
)


@given(
    st.lists(
        st.builds(
            lambda node, c, family, garbage: slice_(
                {"addresses": ["10.0.0.9"], "nodeName": node, "zone": "a"}
                | ({} if c is None else {"conditions": c}),
                *garbage,
                family=family,
            ),
            NODE,
            st.none() | CONDITIONS,  # conditions may be missing altogether
            st.sampled_from(["IPv4", "IPv6"]),
            st.lists(st.sampled_from([None, "n1", 3]), max_size=2),  # endpoints that are no object
        ),
        max_size=6,
    )
)
def test_a_trimmed_slice_answers_as_the_whole_one(slices: list[dict[str, Any]]) -> None:
    trimmed = [trim_slice(s) for s in slices]
    for family in (4, 6):
        assert endpoint_nodes(trimmed, family) == endpoint_nodes(slices, family)
    for t, s in zip(trimmed, slices, strict=True):
        assert service_key_of_slice(t) == service_key_of_slice(s)
        assert "addresses" not in t["endpoints"][0] and "ports" not in t
