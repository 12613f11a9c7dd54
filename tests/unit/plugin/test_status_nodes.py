"""`status` and `nodes`: rows from claims, IpNodes and the scheduler's Events; output; exit codes."""

from __future__ import annotations

import argparse
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.naming import natural_key
from eipctl.plugin import main as plugin
from eipctl.plugin.nodes import node_rows
from eipctl.plugin.pools import deleting_pools
from eipctl.plugin.snapshot import Snapshot
from eipctl.plugin.status import ip_rows

from .objects import auto, claim, condition, event, ipnode, pool

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)


@given(st.lists(st.integers(min_value=0, max_value=10_000), unique=True))
def test_natural_order_counts_numbers(numbers: list[int]) -> None:
    names = [f"demo-{n}" for n in numbers]
    assert sorted(names, key=natural_key) == [f"demo-{n}" for n in sorted(numbers)]


def _snapshot() -> Snapshot:
    moved = condition("Scheduled", "True", "Placed", "moved from node-1 to node-2: dead")
    return Snapshot(
        services=[auto("demo-10", ips=("198.51.100.2",)), auto("demo-2", ips=("198.51.100.3",))],
        pools=[pool("a"), pool("gone", "203.0.113.0/28", deleting=True)],
        claims=[
            claim(
                "198.51.100.2", "a", "shop/demo-10", node="node-2", phase="Bound", bound="node-2"
            ),
            claim(
                "198.51.100.3",
                "a",
                "shop/demo-2",
                node="node-2",
                phase="Bound",
                bound="node-2",
                conditions=(moved,),
            ),
            claim("203.0.113.1", "gone", "shop/old", node="node-10", phase="Scheduled"),
        ],
        nodes=[
            ipnode("node-10", live="False", reason="Fenced"),
            ipnode("node-2"),
            ipnode("node-1", live="False", reason="NoReply"),
        ],
        events=[
            event(
                "IpClaim", "198-51-100-2", "Placed", "placed on node-1", when="2026-01-01T00:10:00Z"
            ),
            event(
                "IpClaim",
                "198-51-100-2",
                "NodeDead",
                "moved from node-1 to node-2: node node-1 is dead",
                when="2026-01-01T00:50:00Z",
                type_="Warning",
            ),
            event(
                "IpClaim",
                "198-51-100-2",
                "TakenOver",
                "controller",
                source="eipctl-controller",
                when="2026-01-01T00:55:00Z",
            ),
        ],
    )


def test_ip_rows_sorted_naturally_with_since_and_last_cause() -> None:
    rows = ip_rows(_snapshot())
    assert [r.services for r in rows] == [("shop/demo-2",), ("shop/demo-10",), ("shop/old",)]
    demo10 = rows[1]
    assert demo10.node == "node-2" and demo10.phase == "Bound" and demo10.pool == "a"
    assert demo10.cause == "NodeDead: moved from node-1 to node-2: node node-1 is dead"
    assert demo10.cells(NOW)[5] == "10m"
    demo2 = rows[0]  # no Event left: the condition's wording and time
    assert demo2.cause == "Placed: moved from node-1 to node-2: dead"
    assert demo2.cells(NOW)[5] == "60m"


def test_node_rows() -> None:
    rows = node_rows(_snapshot())
    assert [r.name for r in rows] == ["node-1", "node-2", "node-10"]
    assert rows[2].fenced and rows[2].live == "False"
    assert not rows[0].fenced
    assert rows[1].ips == ("198.51.100.2", "198.51.100.3")


def test_deleting_pool_says_what_it_waits_for() -> None:
    [gone] = deleting_pools(_snapshot())
    assert gone.ips == ("203.0.113.1",) and gone.services == ("shop/old",)
    assert "--purge-on-pool-delete" in gone.text


def _run(argv: list[str], snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    async def read(args: argparse.Namespace, namespace: str, name: str) -> Snapshot:
        return snapshot

    monkeypatch.setattr(plugin, "_read", read)
    out = io.StringIO()
    code = plugin.run(plugin.build_parser().parse_args(argv), out)
    return code, out.getvalue()


def test_status_text_json_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    code, text = _run(["status"], _snapshot(), monkeypatch)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].split() == ["IP", "SERVICES", "NODE", "PHASE", "POOL", "SINCE", "LAST", "CAUSE"]
    assert "pool gone is being deleted and waits" in text
    code, text = _run(["status", "-o", "json"], _snapshot(), monkeypatch)
    data: Any = json.loads(text)
    assert [r["ip"] for r in data["ips"]] == ["198.51.100.3", "198.51.100.2", "203.0.113.1"]
    assert data["deletingPools"][0]["waitsFor"] == ["203.0.113.1"]
    code, text = _run(["nodes", "-o", "yaml"], _snapshot(), monkeypatch)
    assert code == 0
    assert yaml.safe_load(text)["nodes"][2]["fenced"] is True


def test_why_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _snapshot()
    code, text = _run(["why", "shop/demo-2"], snap, monkeypatch)
    assert code == plugin.EXIT_OK and "has an IP" in text
    snap = Snapshot(services=[auto("web")])
    code, text = _run(["why", "-n", "shop", "web"], snap, monkeypatch)
    assert code == plugin.EXIT_NO_IP
    assert text.startswith("Service shop/web: no IP (NoPool)")
    code, text = _run(["why", "-n", "shop", "web", "-o", "json"], snap, monkeypatch)
    assert code == plugin.EXIT_NO_IP and json.loads(text)["cause"] == "NoPool"
    code, _ = _run(["why", "-n", "shop", "nothere"], snap, monkeypatch)
    assert code == plugin.EXIT_USAGE


def test_usage_error_and_unreachable_api(tmp_path: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        plugin.main(["why"])
    assert exc.value.code == plugin.EXIT_USAGE
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: shop}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    assert plugin.context_namespace(str(config)) == "shop"
    assert plugin.main(["nodes", "--kubeconfig", str(config), "--request-timeout", "2"]) == (
        plugin.EXIT_API
    )


def test_eipctl_has_the_same_subcommands(monkeypatch: pytest.MonkeyPatch) -> None:
    from eipctl.cli import main as cli

    seen: list[str] = []
    monkeypatch.setattr(plugin, "run", lambda args, out: seen.append(args.command) or 0)
    assert cli.main(["status", "-o", "json"]) == 0
    assert cli.main(["why", "web", "-n", "shop"]) == 0
    assert seen == ["status", "why"]
