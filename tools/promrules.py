"""eipctl's alert rules through the real `promtool` (Debian's package `prometheus`).

    python tools/promrules.py              # check the rules, run their unit tests
    python tools/promrules.py --out DIR    # the same, and keep the files promtool read in DIR

deploy/components/prometheus/rules.yaml is a PrometheusRule: its `spec` is a Prometheus rules
file (`groups:`) inside a Kubernetes object, which promtool does not read. This writes
`spec.groups` alone to eipctl-rules.yaml, runs `promtool check rules` on it, then
`promtool test rules` on tests/unit/alert_rules/alerts-test.yaml (copied beside it; its
`rule_files` names eipctl-rules.yaml).

The test file spells out each firing alert's labels and its `summary` and `runbook_url`
annotations (the templated and the linked ones); promtool compares every annotation, so the
copy given to it also gets each alert's `description` from the rule, which must therefore be
plain text (no `{{ }}`): the prose is not written twice. tests/unit/test_alert_rules.py runs
this; exit status: promtool's.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "components" / "prometheus" / "rules.yaml"
TESTS = ROOT / "tests" / "unit" / "alert_rules" / "alerts-test.yaml"
RULES_FILE = "eipctl-rules.yaml"


def rule_groups(path: Path = RULES) -> dict[str, Any]:
    """The PrometheusRule's spec.groups, as a Prometheus rules file."""
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert doc["kind"] == "PrometheusRule", doc["kind"]
    return {"groups": doc["spec"]["groups"]}


def alerting_rules(path: Path = RULES) -> list[dict[str, Any]]:
    return [r for g in rule_groups(path)["groups"] for r in g["rules"] if "alert" in r]


def with_descriptions(tests: dict[str, Any], rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The unit tests, each expected alert given its rule's (plain) description."""
    descriptions = {}
    for rule in rules:
        text = rule["annotations"]["description"]
        if "{{" in text:
            raise ValueError(f"{rule['alert']}: a description must be plain text (no template)")
        descriptions[rule["alert"]] = text
    for group in tests["tests"]:
        for case in group.get("alert_rule_test") or []:
            for alert in case.get("exp_alerts") or []:
                annotations = alert.setdefault("exp_annotations", {})
                annotations.setdefault("description", descriptions[case["alertname"]])
    return tests


def write(directory: Path, rules: Path = RULES, tests: Path = TESTS) -> tuple[Path, Path]:
    """Writes the rules file and the completed unit tests to `directory`."""
    rules_path = directory / RULES_FILE
    rules_path.write_text(yaml.safe_dump(rule_groups(rules), sort_keys=False, width=100))
    cases = with_descriptions(yaml.safe_load(tests.read_text()), alerting_rules(rules))
    assert cases["rule_files"] == [RULES_FILE], cases["rule_files"]
    tests_path = directory / tests.name
    tests_path.write_text(yaml.safe_dump(cases, sort_keys=False, width=100))
    return rules_path, tests_path


def promtool() -> str | None:
    return shutil.which("promtool")


def run(directory: Path, binary: str) -> list[subprocess.CompletedProcess[str]]:
    """`promtool check rules`, then (if that passed) `promtool test rules`."""
    rules_path, tests_path = write(directory)
    done = []
    for command in ("check", "test"):
        path = rules_path if command == "check" else tests_path
        done.append(
            subprocess.run(
                [binary, command, "rules", path.name],
                cwd=directory,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        )
        if done[-1].returncode != 0:
            break
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="keep the files promtool read here")
    args = parser.parse_args()
    binary = promtool()
    if binary is None:
        print("promtool not found: apt-get install prometheus", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.out or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        for result in run(directory, binary):
            print("+", " ".join(result.args))
            print(result.stdout + result.stderr, end="")
            if result.returncode != 0:
                return result.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
