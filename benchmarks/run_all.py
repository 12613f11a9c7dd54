"""Run every benchmarks/bench_*.py in turn; each prints its own figures.

Benchmarks never fail on speed: a figure is printed and compared with its target by a reader
(targets live next to each figure). A script that crashes does make this run fail.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    only = set(argv)
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        if only and script.stem not in only and script.stem.removeprefix("bench_") not in only:
            continue
        print(f"\n=== {script.stem} ===", flush=True)
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(script)], check=False)
        print(f"--- {script.stem}: exit {result.returncode} in {time.monotonic() - started:.1f}s")
        if result.returncode != 0:
            failed.append(script.stem)
    if failed:
        print("failed: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
