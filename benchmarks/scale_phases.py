"""bench_scale.py's measurements beyond the steady window: read from the children's /metrics
and logs, and the two events it causes after the window (issue #32).

- `PassTimes`: the scheduler's placement passes during the window, from the histogram
  ``eipctl_scheduler_placement_pass_seconds`` scraped before and after (count, mean, and
  the bucket bounds that hold the median and the longest: a histogram keeps no exact max).
- `startup`: each child's start to its caches synced (log line ``caches.synced``) and, for
  the leader, to its first keys done (``term.caught_up``), on the wall clock.
- `leader_with_node`: the scheduler leader SIGKILLed and a node killed at the same instant:
  the time until every claim that node held is Bound elsewhere (a standby's first pass).
- `allocator_restart`: the allocator stopped (SIGTERM; it releases its Lease) and started
  again: the time until its first keys are done (every Service checked) and the writes to
  Services and IpClaims from the restart to 15 s after it (0 expected).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

PASS_METRIC = "eipctl_scheduler_placement_pass_seconds"
GC_METRIC = "eipctl_gc_pause_seconds"
RESTART_QUIET = 15.0
"""Seconds after an allocator restart within which every Service must be checked, with 0
writes (the issue's target)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def scrape(port: int) -> dict[str, float]:
    """Every sample of a child's /metrics, keyed ``name{label=value,...}``; {} if it is gone."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"http://127.0.0.1:{port}/metrics", timeout=aiohttp.ClientTimeout(total=10)
            ) as resp,
        ):
            text = await resp.text()
    except (aiohttp.ClientError, TimeoutError):
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = float(sample.value)
    return out


def _buckets(metrics: dict[str, float], name: str, where: str = "") -> list[tuple[float, float]]:
    """(le, cumulative count) of a histogram, summed over the label sets matching ``where``."""
    sums: dict[float, float] = {}
    prefix = f"{name}_bucket{{"
    for key, value in metrics.items():
        if key.startswith(prefix) and where in key:
            le = key.split("le=", 1)[1].split(",", 1)[0].rstrip("}")
            bound = float("inf") if le == "+Inf" else float(le)
            sums[bound] = sums.get(bound, 0.0) + value
    return sorted(sums.items())


def _bound_of(buckets: list[tuple[float, float]], rank: float) -> float:
    """The upper bound of the bucket holding the ``rank``-th observation."""
    for bound, count in buckets:
        if count >= rank:
            return bound
    return float("inf")


@dataclass(frozen=True)
class PassTimes:
    count: int
    mean: float
    p50_le: float
    max_le: float

    @staticmethod
    def between(before: dict[str, float], after: dict[str, float]) -> PassTimes | None:
        b0 = dict(_buckets(before, PASS_METRIC))
        delta = [(le, n - b0.get(le, 0.0)) for le, n in _buckets(after, PASS_METRIC)]
        count = int(delta[-1][1]) if delta else 0
        if count <= 0:
            return None
        total = after.get(f"{PASS_METRIC}_sum{{}}", 0.0) - before.get(f"{PASS_METRIC}_sum{{}}", 0)
        return PassTimes(count, total / count, _bound_of(delta, count / 2), _bound_of(delta, count))

    def text(self) -> str:
        return (
            f"{self.count} passes, mean {self.mean * 1000:.1f} ms, p50 <= {_ms(self.p50_le)}, "
            f"max <= {_ms(self.max_le)}"
        )


def longest_gc_pause(metrics: dict[str, float]) -> float:
    """The bucket bound of the longest garbage collection so far (0: none seen)."""
    buckets = _buckets(metrics, GC_METRIC)
    total = buckets[-1][1] if buckets else 0.0
    return _bound_of(buckets, total) if total else 0.0


def _ms(seconds: float) -> str:
    return "inf" if seconds == float("inf") else f"{seconds * 1000:.0f} ms"


def log_times(path: Path, event: str) -> list[float]:
    """The wall-clock times (epoch seconds) of every log line of ``event`` in a child's log."""
    out = []
    needle = f"event='{event}'"
    for line in path.read_text(errors="replace").splitlines():
        if needle in line and line.startswith("ts='"):
            stamp = line[4 : line.index("'", 4)]
            out.append(datetime.fromisoformat(stamp).timestamp())
    return out


def startup(tmp: Path, started_at: float, replicas: int) -> dict[str, dict[str, float | None]]:
    """Per child: seconds from its start to caches synced and to its first term caught up."""
    logs = {"allocator": tmp / "alloc.log"}
    logs |= {f"scheduler-{r}": tmp / f"scheduler-{r}.log" for r in range(1, replicas + 1)}
    out: dict[str, dict[str, float | None]] = {}
    for name, path in logs.items():
        synced = [t for t in log_times(path, "caches.synced") if t >= started_at]
        caught = [t for t in log_times(path, "term.caught_up") if t >= started_at]
        out[name] = {
            "synced": synced[0] - started_at if synced else None,
            "caught_up": caught[0] - started_at if caught else None,
        }
    return out


async def leader_with_node(
    store: Any,
    kids: Any,
    leader: str,
    owner: dict[str, Any],
    bound_on: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """SIGKILL the scheduler leader and kill a node holding claims at the same instant; the
    time until every claim it held is Bound on another node."""
    child = next((c for c in kids.children if f"sandbox-{c.name}" == leader), None)
    holders: dict[str, list[str]] = {}
    for c in store.scan("eipctl.io", "ipclaims"):
        node = bound_on(c)
        if node in owner:
            holders.setdefault(node, []).append(c["metadata"]["name"])
    if child is None or not holders:
        return {"skipped": "no leader child or no node holding a claim"}
    node = max(sorted(holders), key=lambda n: len(holders[n]))
    names = holders[node]
    t0 = time.monotonic()
    await asyncio.gather(child.kill(), owner[node].ask("kill", node=node))
    done = None
    while time.monotonic() - t0 < 60:
        claims = [store.find("eipctl.io", "ipclaims", n) or {} for n in names]
        if all(bound_on(c) not in ("", node) for c in claims):
            done = time.monotonic() - t0
            break
        await asyncio.sleep(0.02)
    return {"leader": leader, "node": node, "claims": len(names), "all_bound": done}


async def allocator_restart(
    kids: Any,
    make_child: Callable[[], Any],
    tally: Any,
    tmp: Path,
    writes_of: Callable[..., int],
    own_writes: Callable[[], int],
) -> dict[str, Any]:
    """Stop the allocator, start it again: seconds to synced and to every key done, and the
    Service and IpClaim writes from the restart to `RESTART_QUIET` seconds after it: the new
    allocator's own (``own_writes``: it runs as a user of its own) and everyone's (the
    schedulers and nodes may still be writing claims after the failovers)."""
    old = next(c for c in kids.children if c.name == "allocator")
    before = tally.copy()
    own_before = own_writes()
    await old.stop(5.0)
    fresh = make_child()
    started = time.time()
    t0 = time.monotonic()
    kids.add(fresh)
    caught: list[float] = []
    while time.monotonic() - t0 < 120 and not caught:
        await asyncio.sleep(0.2)
        caught = [t for t in log_times(fresh.log_path, "term.caught_up") if t >= started]
    await asyncio.sleep(max(0.0, RESTART_QUIET - (time.monotonic() - t0)))
    synced = [t for t in log_times(fresh.log_path, "caches.synced") if t >= started]
    return {
        "synced": synced[0] - started if synced else None,
        "caught_up": caught[0] - started if caught else None,
        "writes": writes_of(before, tally.copy()),
        "own_writes": own_writes() - own_before,
        "within": time.monotonic() - t0,
    }
