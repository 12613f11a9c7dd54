"""core/resources.py: IpClaimPool and IpClaim parse errors name the field and say what is
wrong, exactly (docs/testing.md, "Mutation")."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.core.fields import ResourceError
from eipctl.core.resources import (
    MAX_COUNT,
    IpClaimPoolSpec,
    IpClaimPoolStatus,
    IpClaimSpec,
    IpClaimStatus,
)

POOL = {"cidr": "192.0.2.0/24"}
CLAIM = {"ip": "192.0.2.1"}

POOL_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({}, "spec.cidr: required"),
    ({**POOL, "ranges": ["192.0.2.1"]}, "spec.ranges[0]: expected a list, got str"),
    ({**POOL, "ranges": [["192.0.2.1"]]}, "spec.ranges[0]: expected [first, last]"),
    ({**POOL, "ranges": [["192.0.2.1", 5]]}, "spec.ranges[0][1]: expected a string, got int"),
    ({**POOL, "ranges": [["192.0.2.1", "x"]]}, "spec.ranges[0][1]: 'x' is not an IP address"),
    ({**POOL, "exclude": [5]}, "spec.exclude[0]: expected a string, got int"),
    ({**POOL, "exclude": "192.0.2.1"}, "spec.exclude: expected a list, got str"),
    ({**POOL, "allowManual": "yes"}, "spec.allowManual: expected a boolean, got str"),
    ({**POOL, "serviceSelector": []}, "spec.serviceSelector: expected an object, got list"),
    ({**POOL, "namespaceSelector": 1}, "spec.namespaceSelector: expected an object, got int"),
    ({**POOL, "provider": 1}, "spec.provider: expected a string, got int"),
]


@pytest.mark.parametrize(("spec", "message"), POOL_ERRORS)
def test_pool_spec_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimPoolSpec.from_dict(spec)
    assert str(caught.value) == message


def test_an_unknown_provider_is_named_with_the_ones_known() -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimPoolSpec.from_dict({**POOL, "provider": "gcp"})
    assert caught.value.field == "spec.provider"
    assert caught.value.problem.startswith("'gcp' is not one of ['")


def test_pool_counts_are_int64() -> None:
    assert IpClaimPoolStatus.from_dict({"allocated": 1, "free": MAX_COUNT}).free == MAX_COUNT
    for key in ("allocated", "free"):
        with pytest.raises(ResourceError) as caught:
            IpClaimPoolStatus.from_dict({key: MAX_COUNT + 1})
        assert str(caught.value) == f"status.{key}: {MAX_COUNT + 1} is out of range 0..{MAX_COUNT}"
        with pytest.raises(ResourceError) as caught:
            IpClaimPoolStatus.from_dict({key: "1"})
        assert str(caught.value) == f"status.{key}: expected an integer, got str"


CLAIM_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({}, "spec.ip: required"),
    ({**CLAIM, "prefixLength": 0}, "spec.prefixLength: 0 is out of range 1..32"),
    ({**CLAIM, "prefixLength": 33}, "spec.prefixLength: 33 is out of range 1..32"),
    ({**CLAIM, "link": 1}, "spec.link: expected a string, got int"),
    ({**CLAIM, "nodeName": 1}, "spec.nodeName: expected a string, got int"),
    ({**CLAIM, "services": "a/b"}, "spec.services: expected a list, got str"),
    ({**CLAIM, "services": ["a/b", 1]}, "spec.services[1]: expected a string, got int"),
    ({**CLAIM, "nodeBound": 1}, "spec.nodeBound: expected a boolean, got int"),
]


@pytest.mark.parametrize(("spec", "message"), CLAIM_ERRORS)
def test_claim_spec_errors(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimSpec.from_dict(spec)
    assert str(caught.value) == message


@pytest.mark.parametrize("ref", ["web", "/web", "default/", "a/b/c"])
def test_service_references_are_namespace_slash_name(ref: str) -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimSpec.from_dict({**CLAIM, "services": ["ok/one", ref]})
    assert str(caught.value) == (
        f"spec.services[1]: {ref!r} is not a namespace/name Service reference"
    )


def test_claim_status_errors() -> None:
    with pytest.raises(ResourceError) as caught:
        IpClaimStatus.from_dict({"phase": "Lost"})
    assert caught.value.field == "status.phase"
    assert caught.value.problem.startswith("'Lost' is not one of ")
    for status, message in [
        ({"boundNode": 1}, "status.boundNode: expected a string, got int"),
        ({"phase": 1}, "status.phase: expected a string, got int"),
        ({"conditions": [{"type": "Ready"}]}, "status.conditions[0].status: required"),
        ({"conditions": {}}, "status.conditions: expected a list, got dict"),
    ]:
        with pytest.raises(ResourceError) as caught:
            IpClaimStatus.from_dict(status)
        assert str(caught.value) == message


def test_a_pools_announce_mode_is_read() -> None:
    """announce bgp must not read as the default l2: its addresses would go on the link,
    not on the BGP link as host routes (`controller.pools`)."""
    assert IpClaimPoolSpec.from_dict({**POOL, "announce": "bgp"}).announce == "bgp"
    assert IpClaimPoolSpec.from_dict(POOL).announce == "l2"


def test_a_minimal_pool_and_claim_are_written_back_as_read() -> None:
    """No empty ``exclude``, ``services``, ``boundNode`` or ``previousNode`` is added: a
    rewrite of an object changes only what changed."""
    assert IpClaimPoolSpec.from_dict(POOL).to_dict() == {
        **POOL,
        "autoAssign": True,
        "allowManual": False,
    }
    assert IpClaimSpec.from_dict(CLAIM).to_dict() == CLAIM
    assert IpClaimStatus.from_dict({"phase": "Pending"}).to_dict() == {"phase": "Pending"}
