"""bench_scale.py's plots: what each process costs against nodes and against Services.

Two PNG files from the cells' figures (the --json file): ``scale-nodes.png`` (x: nodes, a
line per Service count) and ``scale-services.png`` (x: Services, a line per node count),
each with four panels: scheduler CPU (% of a core, the leader), scheduler RSS (MB),
allocator CPU (%), the emulator's requests per second (what an API server would serve).
A cell that never reached a steady state is drawn hollow. matplotlib (the ``bench`` extra)
with the Agg backend: no screen needed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

PANELS: list[tuple[str, Callable[[dict[str, Any]], float]]] = [
    ("scheduler CPU, % of a core (leader)", lambda r: r["sched_cpus"][0]),
    ("scheduler RSS, MB (leader)", lambda r: r["sched_rsss"][0]),
    ("allocator CPU, % of a core", lambda r: r["alloc_cpu"]),
    ("API requests per second (all clients)", lambda r: r["emu_requests"]),
]


def draw(results: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Both plots into ``folder``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    return [
        _plot(results, "nodes", "services", folder / "scale-nodes.png"),
        _plot(results, "services", "nodes", folder / "scale-services.png"),
    ]


def _plot(results: list[dict[str, Any]], x: str, series: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    groups = sorted({r[series] for r in results})
    for ax, (title, value) in zip(axes.flat, PANELS, strict=True):
        for group in groups:
            cells = sorted((r for r in results if r[series] == group), key=lambda r: r[x])
            xs = [r[x] for r in cells]
            ys = [value(r) for r in cells]
            (line,) = ax.plot(xs, ys, marker="o", label=f"{group:,} {series}")
            for r, xv, yv in zip(cells, xs, ys, strict=True):
                if r.get("unsteady"):
                    ax.plot(
                        [xv],
                        [yv],
                        marker="o",
                        markersize=11,
                        fillstyle="none",
                        color=line.get_color(),
                    )
        ax.set_title(title, fontsize=10)
        ax.set_xscale("log")
        ax.set_xlabel(x)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"eipctl's cost against {x} (bench_scale.py; hollow ring: no steady state)", fontsize=11
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
