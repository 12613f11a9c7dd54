"""The scale benchmark's cheap nodes (`eipctl.sandbox.scale_nodes`): their pure parts."""

from __future__ import annotations

from typing import Any

from eipctl.runtime.config import ControllerSettings
from eipctl.sandbox.scale_nodes import NodeClaims, ScaleTiming, request_kind
from eipctl.sandbox.scale_worker import blocks, node_flags, spec_names


def test_requests_are_named_by_the_api_servers_verbs() -> None:
    ipnodes = "/apis/eipctl.io/v1alpha1/ipnodes"
    assert request_kind("GET", f"{ipnodes}/node-1", "resourceVersion=0") == "GET"
    assert request_kind("GET", ipnodes, "") == "LIST"
    assert request_kind("GET", "/apis/eipctl.io/v1alpha1/ipclaims", "watch=true&rv=5") == "WATCH"
    assert request_kind("GET", "/api/v1/nodes/node-1", "") == "GET"
    assert request_kind("GET", "/api/v1/namespaces/default/services", "") == "LIST"
    assert request_kind("GET", "/api/v1/namespaces/default/services/demo-1", "") == "GET"
    assert request_kind("PATCH", f"{ipnodes}/node-1/status", "") == "PATCH"


def test_timing_is_the_controllers_defaults_and_its_vouch_window() -> None:
    flags = ControllerSettings()
    t = ScaleTiming.for_node(1000, flags)
    assert t.address == "127.1.3.232"
    assert t.heartbeat_interval == flags.heartbeat_interval
    assert t.fence_timeout == flags.fence_timeout
    assert t.vouch_window == max(1.0, 2 * flags.probe_silence + 0.2)


def test_a_spec_may_give_the_nodes_another_probe_silence() -> None:
    assert node_flags({"first": 0, "count": 1}) is None  # the controller's defaults
    flags = node_flags({"first": 0, "count": 1, "probe_silence": 0.5})
    assert flags is not None
    t = ScaleTiming.for_node(3, flags)
    assert t.probe_silence == 0.5
    assert t.vouch_window == max(1.0, 2 * 0.5 + 0.2)
    assert t.fence_timeout == ControllerSettings().fence_timeout  # the rest unchanged


def test_a_worker_names_its_block_of_nodes() -> None:
    assert spec_names(501, 2) == [(501, "node-501"), (502, "node-502")]
    assert blocks(1000, 2) == [(1, 500), (501, 500)]


class FakeInformer:
    def __init__(self, synced: bool, by_node: dict[str, list[dict[str, Any]]]) -> None:
        self.has_synced = synced
        self._by_node = by_node

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        assert index == "node"
        return self._by_node.get(value, [])


def test_a_nodes_claims_are_its_slice_of_the_shared_informer() -> None:
    claim = {"metadata": {"name": "a"}}
    view = NodeClaims(FakeInformer(True, {"node-1": [claim]}), "node-1")  # type: ignore[arg-type]
    assert view.has_synced
    assert view.objects() == [claim]
    assert NodeClaims(FakeInformer(False, {}), "node-2").objects() == []  # type: ignore[arg-type]
