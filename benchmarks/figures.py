"""Figures for the benchmarks and the soak: percentiles, one-line summaries, the machine.

Imported by the scripts beside it (`python benchmarks/<script>.py` puts this folder first on
sys.path); `run_all.py` runs only `bench_*.py`, so this is never run as a benchmark.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from eipctl.sandbox.namespaces import why_unavailable


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(name: str, values: Sequence[float], target: str = "", unit: str = "s") -> str:
    if not values:
        return f"{name}: no samples"
    return (
        f"{name}: n={len(values)} p50={percentile(values, 50):.3f}{unit} "
        f"p95={percentile(values, 95):.3f}{unit} max={max(values):.3f}{unit} "
        f"mean={statistics.fmean(values):.3f}{unit}" + (f"  (target {target})" if target else "")
    )


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {sys.version.split()[0]}, load average {load}"
    )


def skip_unless_root(script: str) -> None:
    """Benchmarks on the bed need root; without it, say so and exit 0 (not a failure)."""
    if (reason := why_unavailable()) is not None:
        print(f"{script}: skipped ({reason})")
        raise SystemExit(0)


def run_cell(argv: Sequence[str], label: str) -> dict[str, object] | None:
    """Run one measurement in a child process (a fresh interpreter per size, so one size's
    leftovers never weigh on the next), echo what it prints, and return the last JSON
    object it printed as its figures; None (said in a line) if it failed or printed none."""
    proc = subprocess.run(list(argv), stdout=subprocess.PIPE, text=True, check=False)
    lines = proc.stdout.splitlines()
    for line in lines:
        if not line.startswith("{"):
            print(line, flush=True)
    found = [json.loads(line) for line in lines if line.startswith("{")]
    if proc.returncode != 0 or not found:
        print(f"{label}: run failed (exit {proc.returncode})", flush=True)
        return None
    result: dict[str, object] = found[-1]
    return result
