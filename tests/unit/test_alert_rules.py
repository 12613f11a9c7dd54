"""The alerts of deploy/components/prometheus/rules.yaml, evaluated by the real Prometheus.

`promtool` (Debian's package `prometheus`; README's test command installs it) checks the
PrometheusRule's spec.groups (`promtool check rules`) and runs the unit tests of
tests/unit/alert_rules/alerts-test.yaml on them (`promtool test rules`): every alert fires
on synthetic series, with its exact labels and annotations, and a near miss does not.
tools/promrules.py prepares the files. Without promtool these tests skip, except under CI
(CI=true), where they fail: the CI machine must have it.

The rest needs no promtool: the alerts and docs/metrics.md's "Alerts" table are the same
(names, expressions, `for`, severity), every runbook_url is a section of docs/operations.md,
and every alert has a firing and a non-firing case in the unit tests.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
METRICS_DOC = ROOT / "docs" / "metrics.md"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"
SEVERITIES = {"critical", "warning", "info"}


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eipctl_promrules", ROOT / "tools/promrules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


promrules = _load_tool()


@pytest.fixture(scope="module")
def promtool() -> str:
    found: str | None = promrules.promtool()
    if found is None:
        reason = "promtool not installed (apt-get install prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must run the alert tests, README's command installs it")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = promrules.alerting_rules()
    return found


def test_promtool_checks_the_rules_and_their_unit_tests_pass(promtool: str, tmp_path: Path) -> None:
    check, test = promrules.run(tmp_path, promtool)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout, check.stdout
    assert test.returncode == 0, test.stdout + test.stderr


def test_a_broken_threshold_fails_the_unit_tests(promtool: str, tmp_path: Path) -> None:
    """The unit tests can fail: a threshold moved just under a near miss's value is caught."""
    broken = tmp_path / "rules.yaml"
    text = promrules.RULES.read_text()
    assert text.count("rate(eipctl_writer_conflicts_total[5m]) > 1\n") == 1
    broken.write_text(text.replace("conflicts_total[5m]) > 1\n", "conflicts_total[5m]) > 0.8\n"))
    _, tests_path = promrules.write(tmp_path, rules=broken)
    out = subprocess.run(
        [promtool, "test", "rules", tests_path.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0, out.stdout
    assert "EipctlWriterConflicts" in out.stdout + out.stderr


def _doc_alerts() -> dict[str, dict[str, str]]:
    """docs/metrics.md, "## Alerts": | `name` | `expression` | for | severity | means |."""
    text = METRICS_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    row = re.compile(r"^\| `(Eipctl\w+)` \| `(.+?)` \| (\S+) \| (\w+) \| .+ \|$")
    out = {}
    for line in section.splitlines():
        if line.startswith("| `Eipctl"):
            m = row.match(line)
            assert m, f"a row of docs/metrics.md's Alerts table does not parse: {line}"
            name, expr, for_, severity = m.groups()
            assert name not in out, f"{name} twice in docs/metrics.md"
            out[name] = {"expr": expr.replace("\\|", "|"), "for": for_, "severity": severity}
    return out


def _squeeze(expr: str) -> str:
    return re.sub(r"\s+", "", expr)


def test_the_docs_table_and_the_rules_have_the_same_alerts(rules: list[dict[str, Any]]) -> None:
    documented = _doc_alerts()
    shipped = {r["alert"]: r for r in rules}
    assert len(shipped) == len(rules), "an alert name is used twice"
    assert sorted(documented) == sorted(shipped)
    for name, doc in documented.items():
        rule = shipped[name]
        assert _squeeze(doc["expr"]) == _squeeze(rule["expr"]), name
        assert doc["for"] == rule.get("for", "—"), name
        assert doc["severity"] == rule["labels"]["severity"], name


def _github_anchors(markdown: str) -> set[str]:
    anchors = set()
    for line in markdown.splitlines():
        if m := re.match(r"^#{1,6} (.+)$", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


def test_every_alert_has_a_severity_and_a_runbook_section(rules: list[dict[str, Any]]) -> None:
    anchors = _github_anchors(OPERATIONS_DOC.read_text(encoding="utf-8"))
    for rule in rules:
        name = rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description", "runbook_url"}, name
        doc, _, anchor = annotations["runbook_url"].partition("#")
        assert doc == "docs/operations.md", name
        assert anchor == name.lower(), name
        assert anchor in anchors, f"{name}: no section {anchor} in docs/operations.md"


def test_every_alert_has_a_firing_and_a_quiet_unit_test(rules: list[dict[str, Any]]) -> None:
    tests = yaml.safe_load(promrules.TESTS.read_text())
    fires: set[str] = set()
    quiet: set[str] = set()
    for group in tests["tests"]:
        for case in group["alert_rule_test"]:
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in rules}
    assert names - fires == set(), "never seen firing"
    assert names - quiet == set(), "never seen quiet"
    assert (fires | quiet) - names == set(), "tests of alerts that do not exist"
