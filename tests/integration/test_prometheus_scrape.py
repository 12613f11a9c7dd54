"""A real Prometheus scrapes a real eipctl sandbox and answers every query eipctl ships.

`eipctl sandbox --metrics` runs as a process (the emulator, three simulated nodes, the
allocator and the scheduler as its children) and serves /metrics for the allocator, the
scheduler and its simulated nodes' controllers (`<state dir>/metrics.json`). Debian's
`/usr/bin/prometheus` (package `prometheus`, which README's test command installs) scrapes the
three every second, as static targets labelled like the ServiceMonitors' (`namespace`, `pod`;
`node` on the controllers), and evaluates rules.yaml's alerts every second.

Then every query of tests/promql.py's `shipped()` (each target of dashboard.json, with
`$__rate_interval` = 1m, and each alert's `expr`) goes through /api/v1/query. Every query:

- evaluates without an error (the syntax, a function, a vector matching);
- names only metrics this Prometheus knows: each selector's metric has series here, or (a
  labelled metric nothing has happened to yet, e.g. `eipctl_controller_outage_hold`) its
  family is in /api/v1/metadata, which lists what the targets' `# HELP`/`# TYPE` lines
  declare, samples or not: a misspelt name is in neither and fails;
- uses only labels the metric has (docs/metrics.md) or the targets add (`static_problems`).

A dashboard query must return series. Where it returns none, each of its selectors must be of
a metric that has no series at all yet (known from its metadata); a selector whose matchers
match none of a metric's existing series fails (a misspelt label value). An alert expression
returns series only when it fires (or, with `absent`, when it should): where it returns none,
its selectors are evaluated alone, each must return series or be of a metric with no series
yet, or, for an alert, match none of the metric's existing series by a label value that has
not happened in a quiet sandbox (`result="expired"`, `reason="owner"`); the label name is
still checked. Every alerting rule is also `health: ok` in /api/v1/rules.

Then node holding a claim is killed in the sandbox (`eipctl sandbox kill-node`), and the
failover panel's first query (p50 of eipctl_failover_duration_seconds) must turn from NaN to
a value, and the histogram's count grow. Prometheus, the sandbox and the temporary directory
are gone afterwards, also on failure. Without /usr/bin/prometheus the test skips, except under
CI (CI=true), where it fails.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

import promql

PROMETHEUS = Path("/usr/bin/prometheus")
NODES = 3
SERVICES = 3
SANDBOX_DURATION = 300  # s: a cap in case the test dies without stopping it
T = TypeVar("T")

pytestmark = pytest.mark.timeout(240)  # a sandbox boot, a few scrapes, ~60 queries, a failover


def until(check: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout}s: {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes] | None, grace: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> tuple[list[dict[str, Any]], str | None]:
        """The result vector of an instant query, or its error."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=30) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:  # 400/422: a bad query
            body = json.load(exc)
        if body["status"] != "success":
            return [], f"{body.get('errorType')}: {body.get('error')}"
        result = body["data"]["result"]
        return (result if isinstance(result, list) else [result]), None

    def count(self, selector: str) -> int:
        result, error = self.query(f"count({selector})")
        assert error is None, f"{selector}: {error}"
        return int(float(result[0]["value"][1])) if result else 0


@pytest.fixture
def prometheus_binary() -> Path:
    if not PROMETHEUS.exists():
        reason = f"{PROMETHEUS} not installed (apt-get install --no-install-recommends prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}: CI must run this test, README's test command installs it")
        pytest.skip(reason)
    return PROMETHEUS


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A scratch directory removed afterwards, pass or fail (pytest's tmp_path is kept)."""
    path = Path(tempfile.mkdtemp(prefix="eipctl-prom-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Sandbox:
    def __init__(self, workdir: Path) -> None:
        self.state_dir = workdir / "state"
        self.state_arg = ["--state-dir", str(self.state_dir)]
        self.log = workdir / "sandbox.out"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "eipctl", "sandbox", "--metrics",
                    "--duration", f"{SANDBOX_DURATION}s",
                    "--nodes", str(NODES), "--services", str(SERVICES),
                    "--kubeconfig-out", str(self.state_dir.parent / "sandbox.kubeconfig"),
                    *self.state_arg,
                ],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def eipctl(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "eipctl", "sandbox", *args, *self.state_arg],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def endpoints(self) -> dict[str, str] | None:
        assert self.proc is not None and self.proc.poll() is None, self.logs()
        path = self.state_dir / "metrics.json"
        return json.loads(path.read_text()) if path.exists() else None

    def holders(self) -> dict[str, list[str]]:
        """Each up node's addresses, from `eipctl sandbox status`."""
        held = re.findall(r"^  (node-\d+): up, .*holds (.+)$", self.eipctl("status"), re.M)
        return {node: [a for a in ips.split(", ") if a != "-"] for node, ips in held}

    def logs(self) -> str:
        parts = [self.log, *sorted(self.state_dir.glob("*.log"))]
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in parts if p.exists())


def prometheus_config(workdir: Path, endpoints: dict[str, str]) -> Path:
    promrules = promql.tool("promrules")
    rules = workdir / "eipctl-rules.yaml"
    rules.write_text(yaml.safe_dump(promrules.rule_groups(promql.RULES), sort_keys=False))
    scrape = []
    for name, address in sorted(endpoints.items()):
        labels = {"namespace": "eipctl-system", "pod": f"eipctl-{name}"}
        if name == "controllers":
            labels["node"] = "sandbox"
        scrape.append(
            {
                "job_name": f"eipctl-{name}",
                "static_configs": [{"targets": [address], "labels": labels}],
            }
        )
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": scrape,
    }
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def problems_of(
    prom: Prometheus, query: promql.Shipped, metrics: dict[str, promql.Metric], known: set[str]
) -> list[str]:
    """What is wrong with one shipped query, evaluated (the module's docstring)."""
    where = f"{query.kind} {query.name!r}: {query.expr}"
    problems = promql.static_problems(query, metrics)
    result, error = prom.query(query.promql())
    if error is not None:
        return [*problems, f"{where}: {error}"]
    for sel in promql.selectors(query.promql()).selectors:
        family = promql.family(sel.name, metrics)
        # OpenMetrics (what Prometheus asks the client library for) names a counter's
        # family without `_total` in its metadata, a histogram's without the suffixes
        names = {sel.name} | (
            {family.name, family.name.removesuffix("_total")} if family is not None else set()
        )
        if not names & known:
            problems.append(f"{where}: Prometheus knows no metric {sel.name}")
    if result:
        return problems
    quiet = True
    for sel in promql.selectors(query.promql()).selectors:
        if prom.count(sel.promql()) > 0:
            continue
        quiet = False
        if prom.count(f'{{__name__="{sel.name}"}}') > 0 and query.kind == "panel":
            problems.append(f"{where}: {sel.promql()} matches none of {sel.name}'s series")
    if quiet and query.kind == "panel":
        problems.append(f"{where}: no series, although each of its selectors has some")
    return problems


def test_prometheus_scrapes_the_sandbox_and_answers_every_shipped_query(
    prometheus_binary: Path, workdir: Path
) -> None:
    started = time.monotonic()
    sandbox = Sandbox(workdir)
    prom_proc: subprocess.Popen[bytes] | None = None
    prom_log = workdir / "prometheus.log"
    try:
        sandbox.start()
        endpoints = until(sandbox.endpoints, "the sandbox's metrics.json", timeout=90)
        assert sorted(endpoints) == ["allocator", "controllers", "scheduler"], endpoints
        port = free_port()
        with prom_log.open("wb") as out:
            prom_proc = subprocess.Popen(
                [
                    str(prometheus_binary),
                    f"--config.file={prometheus_config(workdir, endpoints)}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        prom = Prometheus(f"http://127.0.0.1:{port}")

        def ready() -> bool:
            assert prom_proc is not None and prom_proc.poll() is None, prom_log.read_text()
            try:
                with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=5) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        until(ready, "Prometheus ready", timeout=60)

        def targets_up() -> list[str]:
            active = prom.get("/api/v1/targets", state="active")["activeTargets"]
            up = [t["labels"]["job"] for t in active if t["health"] == "up"]
            return up if len(up) == len(endpoints) else []

        until(targets_up, "every sandbox target scraped and up", timeout=60)

        # the sandbox settled: the claims Bound, the pools counted, every rule evaluated
        until(
            lambda: (
                prom.count('eipctl_claims{phase="Bound"} > 0')
                and prom.count("eipctl_pool_addresses")
            ),
            "the scheduler's claims Bound and the allocator's pool counted",
            timeout=90,
        )
        time.sleep(3)  # a few more scrapes: rates need two samples

        def rules_evaluated() -> list[dict[str, Any]]:
            groups = prom.get("/api/v1/rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            done = all(r.get("lastEvaluation", "").startswith("20") for r in rules)
            return rules if done and rules else []

        rules = until(rules_evaluated, "every rule group evaluated", timeout=30)
        unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert unhealthy == [], unhealthy
        assert len(rules) == len(promql.alert_expressions())

        metrics = promql.catalogue()
        known = set(prom.get("/api/v1/label/__name__/values")) | set(prom.get("/api/v1/metadata"))
        queries = promql.shipped()
        assert {q.kind for q in queries} == {"panel", "alert"}
        problems = [p for q in queries for p in problems_of(prom, q, metrics, known)]
        assert problems == [], "\n".join(problems)

        # a failover: the failover panel's query shows it
        failover = next(q for q in queries if q.name == "Failover time")
        before, error = prom.query(failover.promql())
        assert error is None and before, (error, before)
        assert all(math.isnan(float(s["value"][1])) for s in before), before
        count_before = prom.query("sum(eipctl_failover_duration_seconds_count)")[0]
        holders = until(
            lambda: {n: ips for n, ips in sandbox.holders().items() if ips},
            "a node holding an address",
        )
        victim = sorted(holders)[0]
        assert f"{victim} killed" in sandbox.eipctl("kill-node", victim)

        def failover_shown() -> list[float]:
            result, error = prom.query(failover.promql())
            assert error is None, error
            values = [float(s["value"][1]) for s in result]
            return [v for v in values if not math.isnan(v)]

        shown = until(failover_shown, f"the failover of {victim}'s claims on the panel", 60)
        assert all(0 <= v < 60 for v in shown), shown
        count_after = prom.query("sum(eipctl_failover_duration_seconds_count)")[0]
        assert float(count_after[0]["value"][1]) >= float(count_before[0]["value"][1]) + 1
        print(f"prometheus scrape test: {len(queries)} queries, {time.monotonic() - started:.0f}s")
    except BaseException:
        print(sandbox.logs(), file=sys.stderr)
        if prom_log.exists():
            print(f"--- prometheus.log\n{prom_log.read_text()[-3000:]}", file=sys.stderr)
        raise
    finally:
        stop(prom_proc)
        stop(sandbox.proc, grace=20)
