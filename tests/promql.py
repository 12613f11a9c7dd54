"""The PromQL eipctl ships, and what is in it: every dashboard query and every alert expression.

`shipped()` is the set tests/integration/test_prometheus_scrape.py evaluates against a real
Prometheus: the `expr` of every target of deploy/components/prometheus/dashboard.json and of
every rule of rules.yaml. tests/unit/test_dashboard.py checks that every query of the
generated dashboard is in it. `selectors()` takes a query apart into its metric selectors
(name and label matchers) and the labels it groups by, with regular expressions that know
the PromQL eipctl writes (no strings outside label matchers, no nested braces); `catalogue()`
reads the metrics and their labels from docs/metrics.md's tables (which
tests/unit/test_metrics_catalogue.py holds to the code).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = ROOT / "deploy" / "components" / "prometheus"
DASHBOARD_JSON = COMPONENT / "dashboard.json"
RULES = COMPONENT / "rules.yaml"
METRICS_DOC = ROOT / "docs" / "metrics.md"

GRAFANA_VARIABLES = {"$__rate_interval": "1m"}
"""The Grafana variables a dashboard query may use, and the value a test gives each."""
TARGET_LABELS = frozenset(
    {"job", "instance", "namespace", "pod", "service", "endpoint", "container", "node"}
)
"""Labels Prometheus adds to every series of a target (the ServiceMonitors' and the
controllers' `node` relabeling; the integration test's static targets set the same)."""
HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
    | {"and", "or", "unless", "offset", "inf", "nan"}
)

_ROW = re.compile(
    r"^\|\s*`(?P<name>eipctl_[a-z0-9_]+)`\s*\|\s*(?P<type>counter|gauge|histogram)\s*"
    r"\|\s*(?P<labels>[^|]*)\|"
)
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_FUNCTION = re.compile(r"\b([a-zA-Z_][a-zA-Z0-9_]*)\s*\(")
_RANGE = re.compile(r"\[[^\]]*\]")
_SELECTOR = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{(?P<matchers>[^}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_IDENT = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)")


def tool(name: str) -> ModuleType:
    """tools/<name>.py as a module (tools/ is no package): promrules, dashboard."""
    spec = importlib.util.spec_from_file_location(f"eipctl_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Shipped:
    """One query eipctl ships: a dashboard panel's target or an alert's expression."""

    kind: str  # "panel" or "alert"
    name: str  # the panel's title or the alert's name
    expr: str  # as written

    def promql(self) -> str:
        """The query Prometheus evaluates: Grafana's variables given a value."""
        out = self.expr
        for variable, value in GRAFANA_VARIABLES.items():
            out = out.replace(variable, value)
        return out


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str


@dataclass(frozen=True)
class Selector:
    name: str
    matchers: tuple[Matcher, ...]

    def promql(self) -> str:
        inner = ",".join(f"{m.label}{m.op}{json.dumps(m.value)}" for m in self.matchers)
        return f"{self.name}{{{inner}}}" if inner else self.name


@dataclass(frozen=True)
class Parts:
    selectors: tuple[Selector, ...]
    grouping: frozenset[str]  # labels named in by/without/on/ignoring/group_*


def dashboard_queries(doc: dict[str, Any] | None = None) -> list[Shipped]:
    """Every target of a dashboard (the committed dashboard.json by default)."""
    if doc is None:
        doc = json.loads(DASHBOARD_JSON.read_text())
    out = []
    for item in doc.get("panels") or []:
        for panel in [item, *(item.get("panels") or [])]:
            for target in panel.get("targets") or []:
                out.append(Shipped("panel", str(panel["title"]), str(target["expr"])))
    return out


def alert_expressions(path: Path = RULES) -> list[Shipped]:
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return [
        Shipped("alert", str(rule.get("alert") or rule.get("record")), str(rule["expr"]).strip())
        for group in doc["spec"]["groups"]
        for rule in group["rules"]
    ]


def shipped() -> list[Shipped]:
    """What the integration test evaluates."""
    return dashboard_queries() + alert_expressions()


def selectors(expr: str) -> Parts:
    """The metric selectors of `expr` and the labels it groups or matches on."""
    text = _RANGE.sub(" ", expr)
    grouping: set[str] = set()

    def grouped(m: re.Match[str]) -> str:
        grouping.update(x.strip() for x in m.group(2).split(",") if x.strip())
        return " "

    text = _GROUPING.sub(grouped, text)
    text = _FUNCTION.sub(" ( ", text)
    found: list[Selector] = []

    def selector(m: re.Match[str]) -> str:
        body = m.group("matchers")
        matchers = tuple(Matcher(*x) for x in _MATCHER.findall(body))
        if _MATCHER.sub("", body).strip():
            raise ValueError(f"cannot read the matchers {body!r} of {expr!r}")
        name = m.group("name") or next(
            (x.value for x in matchers if x.label == "__name__" and x.op == "="), ""
        )
        found.append(Selector(name, tuple(x for x in matchers if x.label != "__name__")))
        return " "

    text = _SELECTOR.sub(selector, text)
    for ident in _IDENT.findall(text):
        if ident.lower() not in KEYWORDS:
            found.append(Selector(ident, ()))
    return Parts(tuple(found), frozenset(grouping))


@dataclass(frozen=True)
class Metric:
    name: str  # as docs/metrics.md names it (counters with _total)
    type: str
    labels: frozenset[str]


def catalogue(path: Path = METRICS_DOC) -> dict[str, Metric]:
    """docs/metrics.md's metrics, by name."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := _ROW.match(line):
            labels = frozenset(re.findall(r"`([a-z_]+)`", m.group("labels")))
            out[m.group("name")] = Metric(m.group("name"), m.group("type"), labels)
    return out


def family(series: str, metrics: dict[str, Metric]) -> Metric | None:
    """The catalogued metric a series name belongs to (a histogram's _bucket, _count, _sum)."""
    if series in metrics:
        return metrics[series]
    for suffix in HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and base in metrics and metrics[base].type == "histogram":
            return metrics[base]
    return None


def labels_of(series: str, metrics: dict[str, Metric]) -> frozenset[str]:
    """The labels a series of `series` may carry: its own, `le` on buckets, the target's."""
    metric = family(series, metrics)
    own = metric.labels if metric is not None else frozenset()
    le = {"le"} if series.endswith("_bucket") else set()
    return own | le | TARGET_LABELS


def static_problems(query: Shipped, metrics: dict[str, Metric]) -> list[str]:
    """What is wrong with a query without running it: a metric not in the catalogue, a label
    no metric of it has, a Grafana variable the tests do not know."""
    where = f"{query.kind} {query.name!r}: {query.expr}"
    problems = []
    if leftover := re.findall(r"\$\w+", query.promql()):
        problems.append(f"{where}: unknown variable(s) {leftover}")
    parts = selectors(query.promql())
    if not parts.selectors:
        problems.append(f"{where}: no metric selector")
    allowed: set[str] = set()
    for sel in parts.selectors:
        if family(sel.name, metrics) is None:
            problems.append(f"{where}: {sel.name} is no series of a metric of docs/metrics.md")
            continue
        labels = labels_of(sel.name, metrics)
        allowed |= labels
        for matcher in sel.matchers:
            if matcher.label not in labels:
                problems.append(f"{where}: {sel.name} has no label {matcher.label!r}")
    if unknown := sorted(parts.grouping - allowed):
        problems.append(f"{where}: grouped by label(s) no metric of it has: {unknown}")
    return problems
