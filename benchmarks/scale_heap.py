"""What the allocator's and the schedulers' heaps hold (`bench_scale.py --heap`).

`arm` makes the children started after it trace their allocations (`heap_trace/
sitecustomize.py`: tracemalloc, one frame); `report`, after the window, asks each for its
heap (SIGUSR2) and returns the lines it wrote: the traced total, the largest holders by file
and by line. Tracing slows a process (~1.5-2x in allocations) and adds its own bookkeeping to
RSS, so a run with --heap is for where the memory goes, not for the table's CPU and RSS.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

TRACE_PATH = Path(__file__).resolve().parent / "heap_trace"


def arm(tmp: Path) -> Path:
    """Children started from now on trace their heaps into the directory returned."""
    out = tmp / "heap"
    out.mkdir(exist_ok=True)
    os.environ["EIPCTL_HEAP_TRACE_DIR"] = str(out)
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{TRACE_PATH}{os.pathsep}{path}" if path else str(TRACE_PATH)
    return out


def disarm() -> None:
    """Children started from now on do not trace (the allocator restarted after the window)."""
    os.environ.pop("EIPCTL_HEAP_TRACE_DIR", None)


async def report(out: Path, pids: dict[str, int], patience: float = 120.0) -> list[str]:
    """Each named child's heap, as it wrote it on SIGUSR2 (a snapshot of a large heap takes
    seconds: wait up to ``patience`` for all)."""
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR2)
    files = {name: out / f"{pid}.txt" for name, pid in pids.items()}
    waited = 0.0
    while waited < patience and not all(f.exists() for f in files.values()):
        await asyncio.sleep(0.5)
        waited += 0.5
    lines: list[str] = []
    for name, path in files.items():
        if not path.exists():
            lines.append(f"  {name}: no heap written within {patience:.0f}s")
            continue
        lines.append(f"  {name} heap:")
        lines.extend(f"    {line}" for line in path.read_text(encoding="utf-8").splitlines())
    return lines
