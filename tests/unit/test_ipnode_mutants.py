"""core/ipnode.py: the IpNode fields the scheduler and controllers rely on (MACs, the restart
grace) parsed and refused exactly. Pinned where mutation testing found them loose
(docs/testing.md, "Mutation")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from eipctl.core.conditions import Condition
from eipctl.core.fields import ResourceError
from eipctl.core.ipnode import (
    REASON_NO_REPLY,
    REASON_REPLYING,
    IpNode,
    IpNodeSpec,
    IpNodeStatus,
    live_condition,
    mark_live,
)
from eipctl.core.naming import API_VERSION


def test_a_full_status_round_trips() -> None:
    raw = {
        "heartbeat": 7,
        "addresses": ["192.0.2.1/32", "2001:db8::1"],
        "macs": ["02:00:00:00:00:01", "02:00:00:00:00:02"],
        "restartGraceSeconds": 2.5,
    }
    status = IpNodeStatus.from_dict(raw)
    assert status.macs == ("02:00:00:00:00:01", "02:00:00:00:00:02")
    assert status.restart_grace_seconds == 2.5
    assert status.to_dict() == raw
    whole = IpNodeStatus.from_dict({"restartGraceSeconds": 0})
    assert whole.restart_grace_seconds == 0.0
    assert isinstance(whole.restart_grace_seconds, float)
    assert IpNodeStatus.from_dict({}).restart_grace_seconds is None
    assert IpNodeStatus.from_dict({}).to_dict() == {"heartbeat": 0}
    assert status.restart_grace == 2.5
    assert IpNodeStatus.from_dict({}).restart_grace == 0.0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"restartGraceSeconds": -1}, "status.restartGraceSeconds: must be a number >= 0"),
        ({"restartGraceSeconds": True}, "status.restartGraceSeconds: must be a number >= 0"),
        ({"restartGraceSeconds": "5"}, "status.restartGraceSeconds: must be a number >= 0"),
        (
            {"macs": ["02:00:00:00:00:01", "02:00:00:00:00:0G"]},
            "status.macs[1]: '02:00:00:00:00:0G' is not a lower-case MAC address",
        ),
        (
            {"macs": ["02:AA:00:00:00:01"]},
            "status.macs[0]: '02:AA:00:00:00:01' is not a lower-case MAC address",
        ),
        ({"macs": "02:00:00:00:00:01"}, "status.macs: expected a list, got str"),
    ],
)
def test_bad_status_fields_are_named(status: dict[str, Any], message: str) -> None:
    with pytest.raises(ResourceError) as caught:
        IpNodeStatus.from_dict(status)
    assert str(caught.value) == message


def test_the_spec_link_and_the_envelope() -> None:
    assert IpNodeSpec.from_dict({"link": "eth1"}).to_dict() == {"link": "eth1"}
    assert IpNodeSpec().to_dict() == {}
    with pytest.raises(ResourceError) as caught:
        IpNodeSpec.from_dict({"link": 5})
    assert str(caught.value) == "spec.link: expected a string, got int"
    node = IpNode.from_dict({"metadata": {"name": "n1"}, "status": {"macs": ["02:00:00:00:00:01"]}})
    out = node.to_dict()
    assert (out["apiVersion"], out["kind"]) == (API_VERSION, "IpNode")
    assert out["status"]["macs"] == ["02:00:00:00:00:01"]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"heartbeat": 2**63}, f"status.heartbeat: {2**63} is out of range 0..{2**63 - 1}"),
        ({"addresses": "192.0.2.1"}, "status.addresses: expected a list, got str"),
        ({"conditions": [{"type": "Ready"}]}, "status.conditions[0].status: required"),
    ],
)
def test_counter_addresses_and_conditions_errors_are_named(
    status: dict[str, Any], message: str
) -> None:
    with pytest.raises(ResourceError) as caught:
        IpNodeStatus.from_dict(status)
    assert str(caught.value) == message


def test_the_liveness_endpoint_needs_both_address_and_port() -> None:
    """Guard operators: the scheduler probes a node at its spec's address and port; a node
    publishing only one of them is judged by its heartbeat counter instead."""
    spec = IpNodeSpec.from_dict({"livenessAddress": "192.0.2.9", "livenessPort": 9473})
    assert spec.liveness_endpoint == ("192.0.2.9", 9473)
    assert IpNodeSpec.from_dict({"livenessAddress": "192.0.2.9"}).liveness_endpoint is None
    assert IpNodeSpec.from_dict({"livenessPort": 9473}).liveness_endpoint is None
    assert IpNodeSpec.from_dict({}).liveness_endpoint is None


def test_the_live_condition_takes_the_time_given_or_else_the_current_one() -> None:
    """The scheduler writes it without a time: that must stamp now, not fail; a given time
    is the one written (as the tests of the transitions rely on)."""
    given: dict[str, Any] = {}
    mark_live(True, REASON_REPLYING, "replies", now=datetime(2026, 1, 1, tzinfo=UTC))(given)
    assert live_condition(given) == Condition(
        type="Live",
        status="True",
        reason=REASON_REPLYING,
        message="replies",
        last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
    )
    before = datetime.now(UTC).replace(microsecond=0)
    stamped: dict[str, Any] = {}
    mark_live(False, REASON_NO_REPLY, "silent")(stamped)
    written = live_condition(stamped)
    assert written is not None and written.last_transition_time >= before
