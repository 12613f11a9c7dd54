"""The Grafana dashboard of deploy/components/prometheus is what tools/dashboard.py builds.

The committed dashboard.json and dashboard-configmap.yaml equal the generator's output now
(edit tools/dashboard.py and forget to run it: this fails), the ConfigMap carries the same
JSON under the Grafana sidecar's label and the component lists it, and every panel query is
one tests/integration/test_prometheus_scrape.py evaluates against a real Prometheus
(tests/promql.py's `shipped()`). Offline, every panel query and alert expression names only
metrics of docs/metrics.md and labels they (or their targets) have.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

import promql

dashboard = promql.tool("dashboard")


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    doc: dict[str, Any] = dashboard.build()
    return doc


def test_the_committed_files_are_what_the_generator_makes_now() -> None:
    for path, text in dashboard.outputs().items():
        assert path.read_text() == text, f"{path.name} is stale: run python tools/dashboard.py"


def test_the_configmap_carries_the_dashboard_for_grafanas_sidecar() -> None:
    configmap = yaml.safe_load(dashboard.CONFIGMAP_YAML.read_text())
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    assert text == dashboard.DASHBOARD_JSON.read_text()
    kustomization = yaml.safe_load((dashboard.COMPONENT / "kustomization.yaml").read_text())
    assert dashboard.CONFIGMAP_YAML.name in kustomization["resources"]


def test_every_panel_query_is_evaluated_by_the_prometheus_test(built: dict[str, Any]) -> None:
    queries = promql.dashboard_queries(built)
    assert len(queries) >= 20
    evaluated = {q.expr for q in promql.shipped() if q.kind == "panel"}
    assert {q.expr for q in queries} <= evaluated
    assert {q.expr for q in promql.alert_expressions()} <= {q.expr for q in promql.shipped()}


def test_the_panels_the_issue_asks_for_are_there(built: dict[str, Any]) -> None:
    """Issue #33: failover time, live vs known nodes, fenced nodes, claims by phase, pool
    addresses used/free, planned moves and their gaps, API errors and relists, liveness
    packets rejected: each by the metric that shows it."""
    exprs = "\n".join(q.expr for q in promql.dashboard_queries(built))
    for needed in (
        "histogram_quantile(0.99, sum by (le) (rate(eipctl_failover_duration_seconds_bucket",
        "eipctl_scheduler_live_nodes",
        "eipctl_scheduler_known_nodes",
        "eipctl_controller_fenced",
        "sum by (phase) (eipctl_claims)",
        'eipctl_pool_addresses{state=~"used|free"}',
        "eipctl_scheduler_planned_moves_total",
        "eipctl_scheduler_planned_move_seconds_bucket",
        "eipctl_controller_handovers_total",
        "eipctl_writer_retries_total",
        "eipctl_controller_heartbeats_total",
        "eipctl_watch_relists_total",
        "eipctl_liveness_packets_rejected_total",
    ):
        assert needed in exprs, needed


def test_every_panel_has_a_unit_a_legend_and_the_datasource_variable(
    built: dict[str, Any],
) -> None:
    variables = built["templating"]["list"]
    assert [(v["name"], v["type"], v["query"]) for v in variables] == [
        ("datasource", "datasource", "prometheus")
    ]
    panels = [p for p in built["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in built["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert target["legendFormat"], (panel["title"], target["expr"])
            assert target["datasource"]["uid"] == "${datasource}"
    assert json.loads(dashboard.DASHBOARD_JSON.read_text())["uid"] == dashboard.UID


def test_every_query_names_catalogued_metrics_and_their_labels() -> None:
    metrics = promql.catalogue()
    assert len(metrics) > 40
    problems = [p for q in promql.shipped() for p in promql.static_problems(q, metrics)]
    assert problems == []


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("sum(eipctl_claim)", "no series of a metric"),
        ('eipctl_claims{phse="Bound"}', "has no label 'phse'"),
        ("sum by (pahse) (eipctl_claims)", "grouped by label(s)"),
        ("rate(eipctl_writer_retries_total[$__range])", "unknown variable"),
        ("vector(1)", "no metric selector"),
    ],
)
def test_the_static_check_catches_a_typo(expr: str, problem: str) -> None:
    found = promql.static_problems(promql.Shipped("panel", "t", expr), promql.catalogue())
    assert any(problem in p for p in found), found


def test_selectors_are_read_out_of_an_expression() -> None:
    parts = promql.selectors(
        "sum by (namespace, pod) (rate(eipctl_liveness_replies_accepted_total[2m])) == 0 and "
        'sum by (namespace, pod) (rate(eipctl_liveness_packets_rejected_total{role="prober",'
        'reason=~"key|mac"}[5m])) > 0 or absent(eipctl_leader{component="scheduler"} == 1)'
    )
    assert [s.promql() for s in parts.selectors] == [
        'eipctl_liveness_packets_rejected_total{role="prober",reason=~"key|mac"}',
        'eipctl_leader{component="scheduler"}',
        "eipctl_liveness_replies_accepted_total",
    ]
    assert parts.grouping == {"namespace", "pod"}
