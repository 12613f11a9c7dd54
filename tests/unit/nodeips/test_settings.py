"""NodeIpsSettings as `eipctl nodeips` flags (the command is wired in cli/main.py COMMANDS)."""

from __future__ import annotations

import argparse

import pytest

from eipctl.cli.main import build_settings
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.settings import SettingsError, add_flags, flag_specs


def parse(*argv: str) -> NodeIpsSettings:
    parser = argparse.ArgumentParser()
    add_flags(parser, flag_specs(NodeIpsSettings))
    settings = build_settings(NodeIpsSettings, parser.parse_args(argv), "nodeips")
    assert isinstance(settings, NodeIpsSettings)
    return settings


def test_defaults() -> None:
    s = parse()
    assert s.default_node_pool == ""
    assert s.prevent_deallocation is False
    assert s.node_min_reconciliation_interval == 0.0
    assert s.node_reconciliation_requeue_interval == 60.0
    assert s.cluster_id == "" and s.workers == 4 and s.leader_elect is True


def test_flags() -> None:
    s = parse(
        "--default-node-pool=nodes",
        "--prevent-deallocation=true",
        "--node-min-reconciliation-interval=10s",
        "--node-reconciliation-requeue-interval=30s",
        "--cluster-id=prod",
        "--aws-region=eu-west-1",
    )
    assert (s.default_node_pool, s.prevent_deallocation, s.cluster_id) == ("nodes", True, "prod")
    assert s.node_min_reconciliation_interval == 10.0
    assert s.node_reconciliation_requeue_interval == 30.0
    assert s.aws_region == "eu-west-1"


def test_bad_leader_timings_refused() -> None:
    with pytest.raises(SettingsError):
        parse("--lease-duration=1s", "--renew-deadline=2s")
