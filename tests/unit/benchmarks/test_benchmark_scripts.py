"""Every benchmark script still starts: imports resolve and its flags parse (`--help`).

CI does not run the benchmarks (they take minutes to hours and some need root); without
this a refactor that moves a name they import goes unnoticed until someone measures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
SCRIPTS = sorted(p.name for p in [*BENCHMARKS.glob("bench_*.py"), BENCHMARKS / "soak.py"])


def test_the_scripts_are_found() -> None:
    assert {"bench_failover.py", "soak.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_script_starts(script: str) -> None:
    done = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
