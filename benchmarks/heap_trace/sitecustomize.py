"""The heap of a benchmark's child processes, by the lines that allocated it
(`bench_scale.py --heap`).

Python imports ``sitecustomize`` at start-up from the path; with this directory first on
PYTHONPATH and EIPCTL_HEAP_TRACE_DIR set, a child starts `tracemalloc` (1 frame per trace:
the allocating line) and, on SIGUSR2, writes what it holds to ``<dir>/<pid>.txt``: the total,
then the largest holders by line and by file. Nothing else changes in the child.
"""

from __future__ import annotations

import os

_DIR = os.environ.get("EIPCTL_HEAP_TRACE_DIR")

if _DIR:
    import signal
    import sys
    import tracemalloc

    tracemalloc.start(1)

    def _dump(_signum: int, _frame: object) -> None:
        snap = tracemalloc.take_snapshot()
        by_line = snap.statistics("lineno")
        total = sum(s.size for s in by_line)
        lines = [f"argv {' '.join(sys.argv[:2])}", f"traced {total / 1e6:.1f} MB"]
        lines.append("by file:")
        for stat in snap.statistics("filename")[:15]:
            lines.append(f"  {stat.size / 1e6:7.1f} MB {stat.count:>9} {stat.traceback[0]}")
        lines.append("by line:")
        for stat in by_line[:25]:
            lines.append(f"  {stat.size / 1e6:7.1f} MB {stat.count:>9} {stat.traceback[0]}")
        path = os.path.join(_DIR, f"{os.getpid()}.txt")
        with open(path + ".tmp", "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(path + ".tmp", path)

    signal.signal(signal.SIGUSR2, _dump)
