"""Flags of `eipctl nodeips` (its entry in cli/main.py COMMANDS)."""

from __future__ import annotations

from dataclasses import dataclass

from eipctl.runtime.config import CommonSettings, PatientLeaderSettings
from eipctl.runtime.settings import setting
from eipctl.runtime.values import (
    int_range,
    parse_bool,
    parse_duration,
    parse_text,
    positive_duration,
)


@dataclass(frozen=True)
class NodeIpsSettings(PatientLeaderSettings, CommonSettings):
    default_node_pool: str = setting(
        "", parse_text, "pool of labelled Nodes without eipctl.io/external-ip-pool ('' = none)"
    )
    prevent_deallocation: bool = setting(
        "false",
        parse_bool,
        "keep a Node's IP (orphaned, reusable) when the Node goes, instead of releasing it",
    )
    node_min_reconciliation_interval: float = setting(
        "0s",
        parse_duration,
        "least time between two reconciles of one Node (load only; correctness never needs it)",
    )
    node_reconciliation_requeue_interval: float = setting(
        "1m", positive_duration, "every Node is looked at again this often (periodic repair)"
    )
    cluster_id: str = setting(
        "", parse_text, "tag value eipctl.io/cluster on cloud addresses (required for aws pools)"
    )
    aws_region: str = setting("", parse_text, "EC2 region ('' = the standard AWS chain)")
    aws_endpoint_url: str = setting(
        "", parse_text, "EC2 endpoint ('' = the region's; for VPC endpoints and tests)"
    )
    workers: int = setting("4", int_range(1, 64), "concurrent Node reconciles")
