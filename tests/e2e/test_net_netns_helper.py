"""The namespace helper cleans up after itself, after failures, and after dead runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from eipctl.net.probe import probe
from eipctl.net.sockets import hardware_address
from eipctl.sandbox.namespaces import (
    NamespaceSet,
    call_in_netns,
    list_namespaces,
    reap_leftovers,
    sh,
    why_unavailable,
)

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))


def test_namespaces_removed_even_when_the_body_fails() -> None:
    names: list[str] = []
    with pytest.raises(RuntimeError, match="boom"), NamespaceSet() as tb:
        names.append(tb.namespace("x").name)
        assert names[0] in list_namespaces()
        raise RuntimeError("boom")
    assert names[0] not in list_namespaces()


def test_leftovers_of_dead_runs_are_removed() -> None:
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # can never be alive
    name = f"eipt-{dead_pid}-0-stale"
    sh("ip", "netns", "add", name)
    try:
        assert name in reap_leftovers()
        assert name not in list_namespaces()
    finally:
        sh("ip", "netns", "del", name, check=False)


def test_bridge_joins_nodes_and_code_runs_inside() -> None:
    with NamespaceSet() as tb:
        switch = tb.namespace("sw")
        nodes = [tb.namespace(f"n{i}") for i in range(2)]
        for i, node in enumerate(nodes):
            tb.veth(node, "eth0", switch, f"p{i}")
            node.ip(f"addr add 192.0.2.{i + 1}/24 dev eth0")
        tb.bridge(switch, "br0", ["p0", "p1"])
        # L2 across the bridge: n1 answers n0's ARP probe for n1's address
        conflict = call_in_netns(nodes[0].name, probe, "eth0", "192.0.2.2")
        assert conflict is not None
        assert conflict.mac == nodes[1].mac("eth0")
        assert call_in_netns(nodes[0].name, hardware_address, "eth0") == nodes[0].mac("eth0")
