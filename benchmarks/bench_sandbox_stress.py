"""The sandbox with 200 simulated nodes under CPU saturation: false deaths, fences, claims moved.

The sandbox half of [liveness]'s "no false deaths" goal (bench_liveness_stress.py is the netns
bed's half). `eipctl sandbox run --nodes N --services S --log-level info` runs as a child
process, as a user would run it: the API emulator and N simulated nodes (the real
`NodeController`, answering the scheduler's authenticated UDP liveness probes on its own
127.1.x.y; past 300 nodes in worker processes) in one process, the real `eipctl allocator`
and `eipctl scheduler` (one replica each) as its children, with their default flags (probes
every 100 ms, liveness timeout 400 ms). Once every Service's claim is Bound and every IpNode Live,
after `--settle` seconds, `stress-ng --cpu <workers>` (default one per core, default nice)
saturates every core for `--stress-seconds`, no fault injected. Counted in that window and
`--after` seconds past it:

- claims whose spec.nodeName changed (read every 0.5 s through the sandbox's kubeconfig),
- the scheduler's `node.dead` lines (the liveness timeout passed without a reply: its dead-node
  count; the scheduler runs without a metrics port in the sandbox, so its log is the
  record), `liveness.stalled` and `node.fenced_reply` lines,
- the simulated controllers' `node.fenced` / `node.restored` / `liveness.probes_stopped`
  lines (their fence transitions: in ``sandbox.log``, or the worker processes' logs),
- the scheduler's `leader.lost` lines (its Lease lives in the same emulator) and the
  controllers' `heartbeat.failed` lines,
- IPMoved Events on the Services (NodeDead on the IpClaims), and children that exited.

Also: the share of CPU busy (and stolen) over the window, the 1-minute load average before
and after, and the CPU the sandbox process and the scheduler got. Target ([liveness]): 0
claims moved in 10 minutes. Figures only; nothing is asserted. Root and stress-ng needed
(skipped cleanly without either). stress-ng and the sandbox are stopped on the way out, also
on Ctrl-C, SIGTERM or a failure.

    python benchmarks/bench_sandbox_stress.py [--nodes 200] [--services 150]
        [--stress-seconds 600] [--workers N] [--settle 5] [--after 2] [--keep]
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import functools
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench_api_load import _live, cpu_seconds
from bench_liveness_stress import POLL, cpu_times, stressed
from eipctl.sandbox.boot import node_names
from eipctl.sandbox.testbed import Process, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.kube import Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from figures import machine

STOP_GRACE = 20.0  # s for the sandbox to stop its children, nodes and emulator on SIGTERM
COUNTED = (  # log events counted in the window, in every log of the state directory
    "node.dead",
    "liveness.stalled",
    "node.fenced_reply",
    "node.fenced",
    "node.restored",
    "liveness.probes_stopped",
    "leader.lost",
    "heartbeat.failed",
    "child.exited",
)
SHOWN = ("node.dead", "node.fenced", "liveness.stalled", "child.exited")
MOST_SHOWN = 5  # lines shown per event kind
MOVES_SHOWN = 20
MOVE_REASONS = ("IPMoved", "NodeDead")  # Events on the Services, on the IpClaims


@dataclass
class Window:
    seconds: float = 0.0
    busy: float = 0.0  # share of all CPU time busy in the window (steal included)
    steal: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average at the start and the end
    sandbox_cpu: float = 0.0  # % of one core
    scheduler_cpu: float = 0.0
    polls: int = 0
    poll_errors: int = 0
    moved: int = 0  # spec.nodeName changes
    claims_moved: set[str] = field(default_factory=set)
    events_posted: Counter[str] = field(default_factory=Counter)  # by reason
    started: str = ""  # UTC, to find the window in the logs
    events: Counter[str] = field(default_factory=Counter)
    lines: dict[str, list[str]] = field(default_factory=dict)


# ---- the sandbox, as a child process ----


@contextlib.contextmanager
def sandbox(where: Path, nodes: int, services: int) -> Iterator[Process]:
    """`eipctl sandbox run`, its output in `where`/sandbox-run.log, its logs in `where`/state.
    Stopped on the way out (SIGTERM, SIGKILL after STOP_GRACE; also at interpreter exit); its
    allocator and scheduler die with it (`eipctl.sandbox.child`), and it with this process."""
    argv = [sys.executable, "-m", "eipctl", "sandbox", "run", "--nodes", str(nodes)]
    argv += ["--services", str(services), "--state-dir", str(where / "state")]
    argv += ["--kubeconfig-out", str(where / "sandbox.kubeconfig"), "--log-level", "info"]
    proc = Process("sandbox-run", argv, where)
    stop = functools.partial(proc.terminate, STOP_GRACE)
    atexit.register(stop)
    try:
        proc.start()
        yield proc
    finally:
        stop()
        atexit.unregister(stop)


def alive(proc: Process) -> None:
    if not proc.alive:
        raise RuntimeError(f"the sandbox exited; see {proc.log_path}")


def scheduler_pid(state: Path) -> int | None:
    """The scheduler's pid, from the sandbox's last `child.started` line for it."""
    found = None
    for line in (state / "sandbox.log").read_text(errors="replace").splitlines():
        if (
            "event='child.started'" in line
            and "child='scheduler'" in line
            and (match := re.search(r"pid=(\d+)", line))
        ):
            found = int(match.group(1))
    return found


def steady(kube: Kube, services: int, nodes: list[str]) -> str:
    """'' once every Service's claim is Bound and every IpNode Live, else what is missing."""
    claims = kube.claims()
    bound = sum(1 for c in claims if (c.get("status") or {}).get("phase") == "Bound")
    if bound < services:
        return f"{bound}/{services} claims Bound"
    live = sum(1 for n in kube.ipnodes() if _live(n) == "True")
    if live < len(nodes):
        return f"{live}/{len(nodes)} IpNodes Live"
    return ""


# ---- what is counted ----


def placements(kube: Kube) -> dict[str, str | None]:
    return {c["metadata"]["name"]: c["spec"].get("nodeName") for c in kube.claims()}


def move_events(kube: Kube) -> Counter[str]:
    """MOVE_REASONS Events in every namespace (one kubectl call; `count` folds repeats)."""
    found: Counter[str] = Counter()
    for e in kube.kubectl_json("get", "events", "--all-namespaces")["items"]:
        if e.get("reason") in MOVE_REASONS:
            found[e["reason"]] += int(e.get("count") or 1)
    return found


def log_sizes(state: Path) -> dict[Path, int]:
    return {path: path.stat().st_size for path in state.glob("*.log")}


def log_events(state: Path, since: dict[Path, int]) -> tuple[Counter[str], dict[str, list[str]]]:
    """The COUNTED events logged in every log of `state` past `since`, and the first lines of
    the SHOWN ones."""
    counts: Counter[str] = Counter()
    lines: dict[str, list[str]] = {}
    for path in sorted(state.glob("*.log")):
        with path.open("rb") as f:
            f.seek(since.get(path, 0))
            text = f.read().decode(errors="replace")
        for line in text.splitlines():
            match = re.search(r"event='([^']+)'", line)
            if match is None or (event := match.group(1)) not in COUNTED:
                continue
            counts[event] += 1
            if event in SHOWN and len(lines.setdefault(event, [])) < MOST_SHOWN:
                lines[event].append(f"{path.name}: {line}")
    return counts, lines


def count_moves(window: Window, last: dict[str, str | None], now: dict[str, str | None]) -> None:
    for name, node in now.items():
        if name in last and node != last[name]:
            window.moved += 1
            window.claims_moved.add(name)
            if window.moved <= MOVES_SHOWN:
                print(f"    claim {name} moved {last[name]} -> {node}", flush=True)
        last[name] = node


def cpu_of(pid: int | None) -> float:
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError):
        return cpu_seconds(pid)
    return 0.0


def stress_window(kube: Kube, proc: Process, state: Path, args: argparse.Namespace) -> Window:
    window = Window()
    sched = scheduler_pid(state)
    events0 = move_events(kube)
    last = placements(kube)
    since = log_sizes(state)
    load0 = os.getloadavg()[0]
    busy0, steal0, total0 = cpu_times()
    own0, sched0 = cpu_of(proc.pid), cpu_of(sched)
    started = time.monotonic()
    window.started = time.strftime("%H:%M:%S", time.gmtime())
    with stressed(args.stress_seconds, args.workers):
        while time.monotonic() - started < args.stress_seconds:
            time.sleep(POLL)
            alive(proc)
            window.polls += 1
            try:
                now = placements(kube)
            except Exception as exc:  # an API too slow to answer is a figure, not an end
                window.poll_errors += 1
                print(f"    poll failed: {exc!r}", flush=True)
                continue
            count_moves(window, last, now)
    window.seconds = time.monotonic() - started
    busy1, steal1, total1 = cpu_times()
    window.busy = (busy1 - busy0) / max(1, total1 - total0)
    window.steal = (steal1 - steal0) / max(1, total1 - total0)
    window.sandbox_cpu = 100 * (cpu_of(proc.pid) - own0) / window.seconds
    window.scheduler_cpu = 100 * (cpu_of(sched) - sched0) / window.seconds
    window.load = (load0, os.getloadavg()[0])
    time.sleep(args.after)  # a death at the very end is still judged and acted on
    alive(proc)
    count_moves(window, last, placements(kube))
    window.events_posted = move_events(kube) - events0
    if window.moved > MOVES_SHOWN:
        print(f"    ... {window.moved - MOVES_SHOWN} more moves", flush=True)
    window.events, window.lines = log_events(state, since)
    return window


def summary(window: Window, args: argparse.Namespace, holders: int) -> str:
    e = window.events
    return (
        f"sandbox {args.nodes} nodes, {args.services} Services on {holders} nodes, "
        f"{window.seconds:.0f}s from {window.started} UTC under stress-ng --cpu {args.workers}: "
        f"CPU busy {window.busy:.0%} (steal {window.steal:.0%}), "
        f"load 1m {window.load[0]:.2f}->{window.load[1]:.2f}; "
        f"claims moved {len(window.claims_moved)} ({window.moved} nodeName changes), "
        f"node.dead {e['node.dead']}, scheduler leader.lost {e['leader.lost']}, "
        f"liveness.stalled {e['liveness.stalled']}, fenced_reply {e['node.fenced_reply']}, "
        f"controller fences {e['node.fenced']} (restored {e['node.restored']}, "
        f"probes_stopped {e['liveness.probes_stopped']}, heartbeat.failed "
        f"{e['heartbeat.failed']}), IPMoved Events {window.events_posted['IPMoved']} "
        f"(NodeDead {window.events_posted['NodeDead']}), children exited {e['child.exited']}; "
        f"sandbox process CPU {window.sandbox_cpu:.0f}%, "
        f"scheduler CPU {window.scheduler_cpu:.0f}%; "
        f"polls {window.polls} ({window.poll_errors} failed)"
    )


def run(args: argparse.Namespace, where: Path) -> int:
    state = where / "state"
    kubeconfig = where / "sandbox.kubeconfig"
    names = node_names(args.nodes)
    print(f"  logs in {state}", flush=True)
    with sandbox(where, args.nodes, args.services) as proc:
        t0 = time.monotonic()
        wait_for(lambda: alive(proc) or kubeconfig.exists(), 120, 0.2, "the sandbox's API")
        loop = BackgroundLoop("bench-sandbox-stress")
        kube = Kube(loop, kubeconfig)
        try:
            missing = ""

            def ready() -> bool:
                nonlocal missing
                alive(proc)
                with contextlib.suppress(Exception):  # the API busy booting the nodes
                    missing = steady(kube, args.services, names)
                    return not missing
                return False

            try:
                wait_for(ready, args.steady_timeout, 1.0, "steady state")
            except TimeoutError:
                print(f"  NOT STEADY after {args.steady_timeout:g}s: {missing}", flush=True)
                return 1
            print(f"  steady after {time.monotonic() - t0:.1f}s; settling {args.settle:g}s")
            time.sleep(args.settle)
            holders = len({n for n in placements(kube).values() if n})
            print(
                f"  {holders} of {args.nodes} nodes hold a claim; load average "
                f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; "
                f"stress-ng --cpu {args.workers} for {args.stress_seconds:g}s",
                flush=True,
            )
            window = stress_window(kube, proc, state, args)
        finally:
            kube.close()
            loop.stop()
    for event in SHOWN:
        for line in window.lines.get(event, []):
            print(f"  {line}")
    print(
        f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
        f"(before the window: {window.load[0]:.2f} 1m)"
    )
    print(summary(window, args, holders), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200, help="simulated nodes")
    parser.add_argument(
        "--services", type=int, default=150, help="Services (claims; most nodes hold one)"
    )
    parser.add_argument("--stress-seconds", type=float, default=600.0)
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="stress-ng CPU workers"
    )
    parser.add_argument("--settle", type=float, default=5.0, help="s after steady state")
    parser.add_argument("--after", type=float, default=2.0, help="s counted past the window")
    parser.add_argument("--steady-timeout", type=float, default=None, help="s (default by nodes)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the sandbox's logs (kept after a failure)"
    )
    args = parser.parse_args()
    if args.steady_timeout is None:
        args.steady_timeout = 60 + 0.12 * args.nodes
    missing = [
        why
        for why, lacking in (
            ("needs root", os.geteuid() != 0),
            ("stress-ng not installed", shutil.which("stress-ng") is None),
        )
        if lacking
    ]
    if missing:
        print(f"bench_sandbox_stress: skipped ({', '.join(missing)})")
        return 0
    install_signal_handlers()
    print(f"machine: {machine()}")
    print(
        f"eipctl sandbox run --nodes {args.nodes} --services {args.services} --log-level info "
        "(scheduler and allocator with default flags: probes 100ms, liveness timeout 400ms)",
        flush=True,
    )
    where = Path(tempfile.mkdtemp(prefix="bench-sandbox-stress-"))
    code = 1
    try:
        code = run(args, where)
        return code
    finally:
        if args.keep or code != 0:  # a failed run's logs are what is left to read
            print(f"logs kept in {where}")
        else:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: stress-ng and the sandbox are already gone
        raise SystemExit(130) from None
