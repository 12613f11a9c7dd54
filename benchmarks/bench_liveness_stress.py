"""Liveness settings: detection time against false deaths with both cores saturated.

For each setting (scheduler `--liveness-interval I --liveness-timeout T`, controller
`--probe-silence T`), on a fresh bed of 3 nodes with eipctl's other defaults and 6 Services:

1. Detection: the node holding a Service's claim is killed (controller SIGKILLed, link down)
   `--trials` times; kill -> the claim Bound on another node (p50 / max). The node is revived
   and back in service before the next trial. No CPU stress here.
2. False deaths: `stress-ng --cpu <workers>` (default one per core) saturates every core for
   `--stress-seconds`, no fault injected. Counted in that window (and one timeout + 1 s after
   it): the schedulers' `node.dead` lines (both replicas; the leader's in brackets: only it
   moves claims), `liveness.stalled` lines, the controllers' `liveness.probes_stopped` and
   `node.fenced` lines, claims whose spec.nodeName changed (polled every 0.5 s) and IPMoved
   Events. Target ([liveness]): 0 claims moved in 10 minutes at the defaults.

Prints one row per setting, then the log lines around the first false deaths (each
scheduler line and the dead node's controller, 1.5 s before to 0.5 s after). Figures
only; nothing is asserted. Root and stress-ng needed (skipped cleanly without either).

    python benchmarks/bench_liveness_stress.py [--settings 50ms/200ms,100ms/400ms]
        [--trials 5] [--stress-seconds 120] [--minutes-default 10] [--services 6] [--workers N]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.checks import bound, wait_bound
from eipctl.sandbox.testbed.processes import Process
from figures import machine, percentile, skip_unless_root

SETTINGS = ["50ms/200ms", "100ms/300ms", "100ms/400ms", "200ms/800ms"]
DEFAULT = "100ms/400ms"  # eipctl's defaults (docs/liveness.md)
POLL = 0.5  # s between reads of the claims during the stress window
BEFORE, AFTER = 1.5, 0.5  # s of log shown around a false death
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None)


@dataclass
class Row:
    setting: str
    detection: list[float] = field(default_factory=list)
    stress_seconds: float = 0.0
    busy: float = 0.0  # share of all CPU time busy during the window (incl. steal)
    steal: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)  # 1-min load average at start and end
    dead: int = 0
    dead_leader: int = 0
    stalled: int = 0
    probes_stopped: int = 0
    fenced: int = 0
    moved: int = 0
    ipmoved: int = 0


# ---- stress-ng ----


def _die_with_parent() -> None:  # in the child between fork and exec
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@contextlib.contextmanager
def stressed(seconds: float, workers: int) -> Iterator[subprocess.Popen[bytes]]:
    """stress-ng with `workers` CPU workers, in its own process group, which is killed on
    the way out (normal end, exception, Ctrl-C / SIGTERM via install_signal_handlers, and at
    interpreter exit); if this process is SIGKILLed, its own --timeout ends it."""
    proc = subprocess.Popen(
        ["stress-ng", "--cpu", str(workers), "--timeout", f"{int(seconds) + 5}s", "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl, no locks taken
    )

    def stop() -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # its group: the workers too
            proc.wait()

    atexit.register(stop)
    try:
        yield proc
    finally:
        stop()
        atexit.unregister(stop)


def cpu_times() -> tuple[int, int, int]:
    """(busy, steal, total) jiffies over all cores, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, fields[7], total


# ---- the two measurements ----


def detection(bed: LocalBed, ips: list[str], trials: int) -> list[float]:
    """Kill the holder of one IP after another; kill -> its claim Bound elsewhere."""
    took = []
    for trial in range(trials):
        ip = ips[trial % len(ips)]
        holder = wait_bound(bed, ips)[ip]
        killed_at = time.monotonic()
        bed.kill_node(holder)
        new = wait_for(
            lambda i=ip, h=holder: (n := bound(bed.kube.claim_for(i))) not in (None, h) and n,
            30,
            interval=0.02,
            what="the claim bound elsewhere",
        )
        took.append(time.monotonic() - killed_at)
        print(f"    kill {trial + 1}: {holder} -> {new} bound after {took[-1]:.3f}s", flush=True)
        bed.revive_node(holder)
        bed.wait_in_service([holder])
    return took


def ipmoved_events(bed: LocalBed, services: list[str]) -> int:
    return sum(
        int(e.get("count") or 1)
        for name in services
        for e in bed.kube.events_for(name)
        if e.get("reason") == "IPMoved"
    )


def placements(bed: LocalBed) -> dict[str, str | None]:
    return {c["metadata"]["name"]: c["spec"].get("nodeName") for c in bed.kube.claims()}


def stress_window(
    bed: LocalBed, row: Row, services: list[str], seconds: float, timeout: float, workers: int
) -> dict[str, int]:
    """Saturate the CPU for `seconds`, fault-free; fill in `row`'s counts. Returns the log
    offsets at the start (for `false_death_context`)."""
    bed.wait_in_service(bed.node_names)
    events_before = ipmoved_events(bed, services)
    last = placements(bed)
    since = {p.name: p.log_size() for p in bed.processes()}
    load_start = os.getloadavg()[0]
    busy0, steal0, total0 = cpu_times()
    started = time.monotonic()
    with stressed(seconds, workers):
        while time.monotonic() - started < seconds:
            time.sleep(POLL)
            for name, node in placements(bed).items():
                if name in last and node != last[name]:
                    row.moved += 1
                    print(f"    claim {name} moved {last[name]} -> {node}", flush=True)
                last[name] = node
    busy1, steal1, total1 = cpu_times()
    row.stress_seconds = time.monotonic() - started
    row.busy = (busy1 - busy0) / max(1, total1 - total0)
    row.steal = (steal1 - steal0) / max(1, total1 - total0)
    row.load = (load_start, os.getloadavg()[0])
    time.sleep(timeout + 1.0)  # a death at the very end is still judged and acted on
    for name, node in placements(bed).items():
        if name in last and node != last[name]:
            row.moved += 1
            print(f"    claim {name} moved {last[name]} -> {node} (after the window)")
    row.ipmoved = ipmoved_events(bed, services) - events_before
    dead = bed.log_lines(since, "event='node.dead'")
    row.dead = len(dead)
    row.dead_leader = sum("leader=True" in line for line in dead)
    row.stalled = len(bed.log_lines(since, "event='liveness.stalled'"))
    row.probes_stopped = len(bed.log_lines(since, "event='liveness.probes_stopped'"))
    row.fenced = len(bed.log_lines(since, "event='node.fenced'"))
    return since


# ---- what the logs say around a false death ----


def stamp(line: str) -> float | None:
    """The ts='...' of a structlog line, as a POSIX time."""
    start = line.find("ts='")
    if start < 0:
        return None
    end = line.find("'", start + 4)
    try:
        return datetime.fromisoformat(line[start + 4 : end]).timestamp()
    except ValueError:
        return None


def around(proc: Process, offset: int, at: float, limit: int = 40) -> list[str]:
    lines = [
        line
        for line in proc.log_since(offset).splitlines()
        if (t := stamp(line)) is not None and at - BEFORE <= t <= at + AFTER
    ]
    return lines[:limit]


def false_death_context(bed: LocalBed, since: dict[str, int], most: int) -> None:
    deaths = []
    for proc in bed.schedulers:
        for line in proc.log_since(since[proc.name]).splitlines():
            if "event='node.dead'" in line and (at := stamp(line)) is not None:
                node = line.split("node='", 1)[1].split("'", 1)[0]
                deaths.append((at, proc, node, line))
    for at, proc, node, line in sorted(deaths, key=lambda d: d[0])[:most]:
        print(f"\n  false death: {proc.name}: {line}")
        for other in [proc, bed.controllers[node]]:
            print(f"  --- {other.name}, {BEFORE}s before to {AFTER}s after:")
            for text in around(other, since[other.name], at):
                print(f"    {text}")


# ---- the table ----


def table(rows: list[Row]) -> str:
    head = (
        "| interval | timeout | detect p50 | detect max | stress | CPU busy (steal) | load 1m "
        "| node.dead (leader) | stalled | probes_stopped | fenced | claims moved | IPMoved |"
    )
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        interval, timeout = r.setting.split("/")
        p50 = f"{percentile(r.detection, 50):.3f}s" if r.detection else "-"
        top = f"{max(r.detection):.3f}s" if r.detection else "-"
        out.append(
            f"| {interval} | {timeout} | {p50} | {top} | {r.stress_seconds:.0f}s "
            f"| {r.busy:.0%} ({r.steal:.0%}) | {r.load[0]:.1f}->{r.load[1]:.1f} "
            f"| {r.dead} ({r.dead_leader}) | {r.stalled} | {r.probes_stopped} | {r.fenced} "
            f"| {r.moved} | {r.ipmoved} |"
        )
    return "\n".join(out)


def run_setting(setting: str, args: argparse.Namespace, seconds: float) -> Row:
    interval, timeout = setting.split("/")
    row = Row(setting)
    options = BedOptions(
        nodes=3,
        fast=False,
        log_level="info",
        scheduler_flags=["--liveness-interval", interval, "--liveness-timeout", timeout],
        controller_flags=["--probe-silence", timeout],
    )
    print(
        f"\n== {setting}: detection ({args.trials} kills), then {seconds:.0f}s under "
        f"stress-ng --cpu {args.workers}"
    )
    with LocalBed(options) as bed:
        bed.reset()
        services = [f"stress-{i}" for i in range(args.services)]
        for name in services:
            bed.kube.create_service(name)
        ips = [bed.wait_for_ip(name) for name in services]
        wait_bound(bed, ips)
        row.detection = detection(bed, ips, args.trials)
        since = stress_window(bed, row, services, seconds, bed_seconds(timeout), args.workers)
        print(table([row]).splitlines()[-1], flush=True)
        if row.dead:
            false_death_context(bed, since, args.contexts)
        print(f"  logs: {bed.run_dir}")
    return row


def bed_seconds(duration: str) -> float:
    """'400ms' / '1s' -> seconds (only the forms the settings use)."""
    if duration.endswith("ms"):
        return float(duration[:-2]) / 1000
    return float(duration.removesuffix("s"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--settings", default=",".join(SETTINGS), help="interval/timeout pairs, comma-separated"
    )
    parser.add_argument("--trials", type=int, default=5, help="kills per setting")
    parser.add_argument("--stress-seconds", type=float, default=120.0)
    parser.add_argument(
        "--minutes-default",
        type=float,
        default=None,
        help=f"stress the default setting ({DEFAULT}) this long instead",
    )
    parser.add_argument("--services", type=int, default=6)
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="stress-ng CPU workers"
    )
    parser.add_argument("--contexts", type=int, default=3, help="false deaths shown per setting")
    args = parser.parse_args()
    skip_unless_root("bench_liveness_stress")
    if shutil.which("stress-ng") is None:
        print("bench_liveness_stress: skipped (stress-ng not installed)")
        return 0
    install_signal_handlers()
    print(f"machine: {machine()}")
    print(
        "settings: scheduler --liveness-interval/--liveness-timeout as listed, controller "
        "--probe-silence = the liveness timeout; other flags eipctl's defaults"
    )
    rows = []
    for setting in [s.strip() for s in args.settings.split(",") if s.strip()]:
        seconds = args.stress_seconds
        if setting == DEFAULT and args.minutes_default is not None:
            seconds = args.minutes_default * 60
        rows.append(run_setting(setting, args, seconds))
    print("\n" + table(rows))
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed and stress-ng are already gone
        raise SystemExit(130) from None
