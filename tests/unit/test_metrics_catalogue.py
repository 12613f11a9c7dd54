"""docs/metrics.md and the metrics the code registers cannot drift apart.

Every eipctl module is imported (that is when metric objects are created), then every
collector on `eipctl.metrics.REGISTRY` must be prefixed `eipctl_` and have a row in one of the
tables of docs/metrics.md with the same type and label names, and every row must name a
metric that exists. Rows are written as Prometheus shows the series: counters with `_total`.
The "served by" column is checked too: each process's module is imported alone, in a fresh
interpreter, and what lands on its registry is what its /metrics serves.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import prometheus_client
import pytest

import eipctl
from eipctl.metrics import REGISTRY

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(
    r"^\|\s*`(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)`\s*\|\s*(?P<type>counter|gauge|histogram)\s*"
    r"\|\s*(?P<labels>[^|]*)\|"
)
NAME = re.compile(r"^eipctl_[a-z][a-z0-9_]*$")
PROCESSES = {
    "allocator": "eipctl.allocator.process",
    "scheduler": "eipctl.scheduler.process",
    "controller": "eipctl.controller.process",
    "nodeips": "eipctl.nodeips.process",
}
SHOW_REGISTRY = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
from eipctl.metrics import REGISTRY
names = []
for collector in list(REGISTRY._collector_to_names):
    for family in collector.describe():
        names.append(family.name + ("_total" if family.type == "counter" else ""))
print(json.dumps(sorted(names)))
"""


@dataclass(frozen=True)
class Metric:
    name: str  # as exposed: counters end in _total
    type: str
    labels: tuple[str, ...]
    served_by: frozenset[str] = frozenset()


def import_every_module() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(eipctl.__path__, f"{eipctl.__name__}."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # would run a command
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    return names


def exported() -> dict[str, Metric]:
    import_every_module()
    metrics: dict[str, Metric] = {}
    # prometheus_client keeps no public map from a collector to its label names
    for collector in list(REGISTRY._collector_to_names):
        labels = tuple(getattr(collector, "_labelnames", ()))
        for family in collector.describe():
            shown = f"{family.name}_total" if family.type == "counter" else family.name
            metrics[shown] = Metric(shown, family.type, labels)
    return metrics


def documented() -> dict[str, Metric]:
    rows: dict[str, Metric] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m is None:
            continue
        labels = tuple(re.findall(r"`([a-zA-Z_][a-zA-Z0-9_]*)`", m["labels"]))
        served = line.split("|")[4].strip()
        processes = set(PROCESSES) if served == "all" else {p.strip() for p in served.split(",")}
        assert m["name"] not in rows, f"docs/metrics.md lists {m['name']} twice"
        rows[m["name"]] = Metric(m["name"], m["type"], labels, frozenset(processes))
    return rows


def served_by_process() -> dict[str, set[str]]:
    """metric name -> the processes whose /metrics serves it."""
    served: dict[str, set[str]] = {}
    for process, module in PROCESSES.items():
        out = subprocess.run(
            [sys.executable, "-c", SHOW_REGISTRY, module],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        for name in json.loads(out):
            served.setdefault(name, set()).add(process)
    return served


@pytest.fixture(scope="module")
def code() -> dict[str, Metric]:
    return exported()


@pytest.fixture(scope="module")
def docs() -> dict[str, Metric]:
    return documented()


def test_every_module_imports() -> None:
    assert len(import_every_module()) > 20


def test_the_registry_is_not_empty(code: dict[str, Metric]) -> None:
    assert len(code) >= 10


def test_every_metric_is_prefixed(code: dict[str, Metric]) -> None:
    bad = sorted(name for name in code if not NAME.match(name))
    assert bad == [], f"metrics without the eipctl_ prefix (or not snake_case): {bad}"


def test_every_metric_is_documented(code: dict[str, Metric], docs: dict[str, Metric]) -> None:
    missing = sorted(set(code) - set(docs))
    assert missing == [], f"add a row to docs/metrics.md for: {missing}"


def test_every_documented_metric_exists(code: dict[str, Metric], docs: dict[str, Metric]) -> None:
    stale = sorted(set(docs) - set(code))
    assert stale == [], f"docs/metrics.md lists metrics no module registers: {stale}"


def test_documented_types_and_labels_match(
    code: dict[str, Metric], docs: dict[str, Metric]
) -> None:
    wrong = [
        f"{name}: code {code[name].type} {list(code[name].labels)}, "
        f"docs {docs[name].type} {list(docs[name].labels)}"
        for name in sorted(set(code) & set(docs))
        if (code[name].type, sorted(code[name].labels))
        != (docs[name].type, sorted(docs[name].labels))
    ]
    assert wrong == []


def test_served_by_is_what_each_process_serves(docs: dict[str, Metric]) -> None:
    served = served_by_process()
    wrong = {
        name: {"code": sorted(served.get(name, set())), "docs": sorted(row.served_by)}
        for name, row in docs.items()
        if served.get(name, set()) != row.served_by
    }
    assert wrong == {}


def test_nothing_lands_on_the_default_registry() -> None:
    """A metric created without `registry=REGISTRY` would never be served on /metrics."""
    import_every_module()
    names = {
        family.name
        for collector in list(prometheus_client.REGISTRY._collector_to_names)
        for family in getattr(collector, "describe", collector.collect)()
    }
    assert sorted(n for n in names if n.startswith("eipctl")) == []
