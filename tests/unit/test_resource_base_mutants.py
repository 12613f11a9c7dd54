"""core/resource_base.py: the envelope checks and what every resource writes, exactly
(docs/testing.md, "Mutation")."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.core.fields import ResourceError
from eipctl.core.ipnode import IpNode
from eipctl.core.naming import API_VERSION
from eipctl.core.resources import IpClaimPool


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"kind": "Pod"}, "kind: expected 'IpClaimPool', got 'Pod'"),
        ({"apiVersion": "v1"}, f"apiVersion: expected {API_VERSION!r}, got 'v1'"),
        ({"metadata": 5, "spec": {}}, "metadata: expected an object, got int"),
        ({"metadata": {"name": 5}, "spec": {}}, "metadata.name: expected a string, got int"),
        (
            {"metadata": {"resourceVersion": 12}, "spec": {}},
            "metadata.resourceVersion: expected a string, got int",
        ),
        ({"metadata": {}}, "spec: required"),
        ({"spec": 5}, "spec: expected an object, got int"),
        ({"spec": {"cidr": "192.0.2.0/24"}, "status": []}, "status: expected an object, got list"),
        ([], "IpClaimPool: expected an object, got list"),
    ],
)
def test_envelope_errors_name_the_field(obj: Any, message: str) -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimPool.from_dict(obj)
    assert str(caught.value) == message


def test_every_resource_writes_its_api_version_and_kind() -> None:
    out = IpNode.from_dict({"metadata": {"name": "n1", "resourceVersion": "3"}}).to_dict()
    assert out["apiVersion"] == API_VERSION
    assert out["kind"] == "IpNode"
    assert out["metadata"] == {"name": "n1", "resourceVersion": "3"}


@pytest.mark.parametrize(
    "metadata",
    [{"name": "p"}, {"name": "p", "labels": None, "annotations": None}],
    ids=["absent", "null"],
)
def test_a_resource_without_labels_or_annotations_has_empty_ones(metadata: Any) -> None:
    """Callers read ``pool.labels.get(...)`` on any resource: none is an empty mapping."""
    pool = IpClaimPool.from_dict({"metadata": metadata, "spec": {"cidr": "192.0.2.0/24"}})
    assert pool.labels == {} and pool.annotations == {}
    assert pool.labels.get("eipctl.io/pool") is None


def test_a_resources_labels_and_annotations_are_read() -> None:
    metadata = {"name": "p", "labels": {"team": "x"}, "annotations": {"note": "y"}}
    pool = IpClaimPool.from_dict({"metadata": metadata, "spec": {"cidr": "192.0.2.0/24"}})
    assert (pool.labels, pool.annotations) == ({"team": "x"}, {"note": "y"})
