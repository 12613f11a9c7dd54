"""`node_settings`: every controller flag a node's controller reads lands in its group's field,
and no other field changes with it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from eipctl.controller.process import node_settings
from eipctl.controller.settings import (
    AddressSettings,
    AnnounceSettings,
    ApiSettings,
    FencingSettings,
    LivenessSettings,
    NodeSettings,
)
from eipctl.runtime.config import ControllerSettings

FLAGS = ControllerSettings(node_name="node-a", iface="eth0", liveness_key_file="/dev/null")

MAPPED: dict[str, tuple[str, str, Any]] = {
    # flag: (group, field, a value no flag has by default)
    "node_name": ("", "node", "node-z"),
    "iface": ("", "link", "ens9"),
    "heartbeat_interval": ("api", "heartbeat_interval", 7.25),
    "restart_grace": ("api", "restart_grace", 8.25),
    "node_key_namespace": ("api", "node_key_namespace", "keys-z"),
    "fence_timeout": ("fencing", "fence_timeout", 9.25),
    "api_check_interval": ("fencing", "api_check_interval", 1.75),
    "address_lifetime": ("addresses", "lifetime", 11.25),
    "resync_interval": ("addresses", "resync_interval", 12.25),
    "cleanup_on_exit": ("addresses", "cleanup_on_exit", True),
    "liveness_address": ("liveness", "address", "192.0.2.77"),
    "liveness_port": ("liveness", "port", 4242),
    "probe_silence": ("liveness", "probe_silence", 0.65),
    "bgp_link": ("announcing", "bgp_link", "bgp-z"),
    "frr_config": ("announcing", "frr_config", "/etc/frr/z.conf"),
    "bgp_secret_namespace": ("announcing", "bgp_secret_namespace", "secrets-z"),
}
PROCESS_ONLY = {
    # read by `process.run` itself (or by the runner), never by the node's controller
    "config",
    "kubeconfig",
    "log_format",
    "log_level",
    "metrics_bind_address",
    "health_probe_bind_address",
    "host_ip",
    "liveness_key_file",
    "liveness_node_key_file",
    "announce_count",
    "announce_interval",
    "probe_timeout",
    "node_timeout",  # the deprecated old name of fence_timeout: resolved into it, never read
}


def leaves(settings: NodeSettings) -> dict[tuple[str, str], Any]:
    """Every value of `settings`, keyed by (group, field); ("", field) for the top level."""
    out: dict[tuple[str, str], Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value):
            out.update(
                {(f.name, g.name): getattr(value, g.name) for g in dataclasses.fields(value)}
            )
        else:
            out[("", f.name)] = value
    return out


def test_every_flag_is_mapped_or_the_process_own() -> None:
    flags = {f.name for f in dataclasses.fields(ControllerSettings)}
    assert flags == set(MAPPED) | PROCESS_ONLY
    assert not set(MAPPED) & PROCESS_ONLY


def test_every_group_field_comes_from_one_flag() -> None:
    targets = [(group, field) for group, field, _ in MAPPED.values()]
    assert sorted(targets) == sorted(leaves(node_settings(FLAGS)))


@pytest.mark.parametrize("flag", sorted(MAPPED))
def test_a_flag_lands_in_its_group_field(flag: str) -> None:
    group, field, value = MAPPED[flag]
    assert getattr(FLAGS, flag) != value
    before = leaves(node_settings(FLAGS))
    after = leaves(node_settings(dataclasses.replace(FLAGS, **{flag: value})))
    assert after[(group, field)] == value
    assert {k: v for k, v in after.items() if k != (group, field)} == {
        k: v for k, v in before.items() if k != (group, field)
    }


def test_the_defaults_go_through_unchanged() -> None:
    assert node_settings(FLAGS) == NodeSettings(
        node="node-a",
        link="eth0",
        api=ApiSettings(
            heartbeat_interval=10.0, restart_grace=15.0, node_key_namespace="eipctl-node-keys"
        ),
        fencing=FencingSettings(fence_timeout=2.5, api_check_interval=1.0),
        addresses=AddressSettings(lifetime=2.0, resync_interval=30.0, cleanup_on_exit=False),
        liveness=LivenessSettings(address="", port=9473, probe_silence=0.4),
        announcing=AnnounceSettings(
            bgp_link="eipctl-bgp", frr_config="", bgp_secret_namespace="eipctl-bgp"
        ),
    )


def test_the_derived_values() -> None:
    assert LivenessSettings(probe_silence=0.4).vouch_window == 1.0
    assert LivenessSettings(probe_silence=1.0).vouch_window == pytest.approx(2.2)
    assert AddressSettings(lifetime=2.0, resync_interval=30.0).renew_interval == pytest.approx(
        2 / 3
    )
    assert AddressSettings(lifetime=60.0, resync_interval=5.0).renew_interval == 5.0
    assert AddressSettings(lifetime=2.5, resync_interval=30.0).valid_lft == 3
    assert AddressSettings(lifetime=0.2, resync_interval=30.0).valid_lft == 1
