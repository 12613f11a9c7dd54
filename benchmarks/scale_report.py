"""bench_scale.py's printed figures: the table of every cell, each cell's details, and the
py-spy summary of a replica."""

from __future__ import annotations

import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

from scale_netns_node import compare_lines


def table(results: list[dict[str, Any]]) -> list[str]:
    cols = [
        ("nodes", "{nodes}"),
        ("Services", "{services}"),
        ("sched CPU% (leader/other)", "{sched_cpu}"),
        ("sched RSS MB", "{sched_rss}"),
        ("alloc CPU%", "{alloc_cpu:.1f}"),
        ("alloc RSS MB", "{alloc_rss:.0f}"),
        ("emu CPU%", "{emu_cpu:.0f}"),
        ("emu req/s", "{emu_requests:.0f}"),
        ("nodes CPU%", "{workers}: {workers_cpu:.0f}"),
        ("writes/node/s", "{writes_per_node:.3f}"),
        ("node req/node/s", "{node_requests_per_node:.3f}"),
        ("sched ev/s", "{sched_events:.1f}"),
        ("UDP/node/s", "{udp_per_node:.1f}"),
        ("false deaths", "{false_deaths}"),
        ("moved", "{moves}"),
        ("failover p50/max s", "{failover}"),
        ("all Bound after s", "{bound_after:.1f}"),
        ("load", "{load}"),
    ]
    rows = [[name for name, _ in cols]]
    for r in results:
        shown = dict(r)
        shown["sched_cpu"] = "/".join(f"{x:.1f}" for x in r["sched_cpus"])
        shown["sched_rss"] = "/".join(f"{x:.0f}" for x in r["sched_rsss"])
        bound = [f["bound"] for f in r["failovers"] if f["bound"] is not None]
        shown["failover"] = (
            f"{statistics.median(bound):.2f}/{max(bound):.2f}" if bound else "-"
        ) + ("" if len(bound) == len(r["failovers"]) else f" ({len(bound)}/{len(r['failovers'])})")
        rows.append([fmt.format(**shown) for _, fmt in cols])
        if r.get("unsteady"):
            rows[-1][0] += "!"
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    out = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    if any(r.get("unsteady") for r in results):
        out.append("!: no steady state before the window (see the run's lines)")
    for r in results:
        out.append(f"{r['nodes']} nodes x {r['services']} Services (window {r['window']:.0f}s):")
        out.append("  emulator requests/s by verb: " + _by(r["requests_per_s"], "{:.1f}"))
        out.append("  nodes' requests per node per s: " + _by(r["node_requests"], "{:.3f}"))
        if r.get("real_node"):
            out.append(
                "  the real node (NodeController) per s: "
                + _by(r["real_requests"], "{:.3f}")
                + f"; UDP {r['real_udp']:.1f}"
            )
        if r.get("netns"):
            out += compare_lines(r)
        out.append("  writes/s by kind: " + _by(r["writes_by_kind"], "{:.2f}"))
        out.append(
            f"  claims all created after {r['created_after']:.1f}s, all Bound after "
            f"{r['bound_after']:.1f}s (from the children's start); nodes registered in "
            f"{r['registered_s']:.1f}s; emulator loop lag p99/max "
            f"{r['lag_p99_ms']:.0f}/{r['lag_max_ms']:.0f} ms; vouched nodes {r['vouched']}"
        )
        out.append(
            "  leadership terms begun (from start to the end of the failovers): "
            + _by(r["term_starts"], "{}")
            + (f"; child flags {r['child_flags']!r}" if r["child_flags"] else "")
            + (f"; schedulers {r['scheduler_flags']!r}" if r.get("scheduler_flags") else "")
        )
        for f in r["failovers"]:
            out.append(
                f"  failover {f['from']} ({f['claim']}): placed {_s(f['placed'])}, "
                f"Bound on {f['to']} {_s(f['bound'])}"
            )
        out += phase_lines(r)
    return out


def phase_lines(r: dict[str, Any]) -> list[str]:
    """The cell's figures from scale_phases: passes, collector, start-up, the two events."""
    out = [f"  placement passes at the leader in the window: {r['passes']}"]
    gc_max = r["gc_max"]
    out.append(
        f"  longest collector pause so far <= {gc_max['scheduler'] * 1000:.0f} ms (scheduler "
        f"leader), <= {gc_max['allocator'] * 1000:.0f} ms (allocator)"
    )
    for name, t in r["startup"].items():
        caught = "(did not lead)" if t["caught_up"] is None else _s(t["caught_up"])
        out.append(
            f"  {name}: start -> caches synced {_s(t['synced'])}, -> first term caught up {caught}"
        )
    a = r["allocator_restart"]
    out.append(
        f"  allocator restarted: caches synced {_s(a['synced'])}, every Service checked "
        f"{_s(a['caught_up'])}, Service and IpClaim writes in {a['within']:.0f}s: "
        f"{a.get('own_writes', '?')} by the allocator ({a['writes']} by every client)"
    )
    b = r["leader_with_node"]
    out.append(
        f"  leader and node killed: {b['skipped']}"
        if "skipped" in b
        else f"  leader {b['leader']} and {b['node']} killed together: its {b['claims']} "
        f"claims all Bound elsewhere after {_s(b['all_bound'])}"
    )
    return out


def _by(d: dict[str, float], fmt: str) -> str:
    return ", ".join(f"{k} {fmt.format(v)}" for k, v in d.items() if v) or "-"


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.3f}s"


async def start_spies(
    pids: list[int], window: float, tmp: Path
) -> list[tuple[asyncio.subprocess.Process, Path]]:
    """py-spy sampling each pid (100 Hz, without stopping it) for `window` seconds."""
    spy = Path(sys.executable).with_name("py-spy")
    out = []
    for k, pid in enumerate(pids, start=1):
        path = tmp / f"scheduler-{k}.folded"
        proc = await asyncio.create_subprocess_exec(
            *(str(spy), "record", "--nonblocking", "--format", "raw", "-r", "100"),
            *("-d", str(int(window)), "-p", str(pid), "-o", str(path)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out.append((proc, path))
    return out


def _frame(frame: str) -> str:
    """``func (path/file.py:123)`` -> ``func (file.py)``: one key per function."""
    func, _, where = frame.partition(" (")
    return f"{func} ({where.rsplit('/', 1)[-1].split(':')[0]})"


def spy_summary(path: Path, name: str, top: int = 15) -> list[str]:
    """The functions a py-spy raw (folded) profile spends its samples in: own and within."""
    own: dict[str, int] = {}
    within: dict[str, int] = {}
    total = 0
    if not path.exists():
        return [f"  {name}: no py-spy profile"]
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        total += n
        leaf = _frame(frames[-1])
        own[leaf] = own.get(leaf, 0) + n
        for key in {_frame(f) for f in frames if "eipctl" in f}:
            within[key] = within.get(key, 0) + n
    if not total:
        return [f"  {name}: empty py-spy profile"]
    lines = [f"  {name}: py-spy, {total} samples; own time:"]
    for key, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"    {100 * n / total:5.1f}%  {key}")
    lines.append(f"  {name}: within eipctl functions (inclusive):")
    for key, n in sorted(within.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"    {100 * n / total:5.1f}%  {key}")
    return lines
