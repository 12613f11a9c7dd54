"""API load in steady state against the node count, with node liveness on UDP; prints figures.

For each node count (10, 50, 200, 1,000 by default) one sandbox (`eipctl.sandbox.session.
Sandbox`, driven directly, without its live table) runs in a fresh process: the API emulator
and N simulated nodes (the real `NodeController`, in-memory links, each answering the
scheduler's authenticated liveness probes over real UDP on its own 127.1.x.y) in that
process's loop, the real `eipctl allocator` and `eipctl scheduler` as child processes with
their default flags (probe interval 100 ms, liveness timeout 400 ms). Once every Service has its
claim Bound and every IpNode is Live, after `--settle` seconds, it measures over `--window`
seconds (at least 10):

- API writes/s: every committed write at the emulator (its global resourceVersion), split
  into the Leases (a constant: two Lease holders, whatever the node count), the Events and
  the rest; the rest per node, against the goal of 0.2 writes per node per second. The IpNode
  writes are also broken down by what changed (the heartbeat, the addresses, the Live
  condition...).
- API requests/s by verb (reads cost the emulator too: the controllers' API checks are GETs).
- watch events/s delivered to the scheduler: the events on the four kinds it watches
  without a selector (IpClaims, IpNodes, IpClaimPools, Services; nobody else watches
  IpNodes), per node, IpNode events separately; goal at most 1 per node per second.
- the scheduler's CPU (% of one core) and RSS; the allocator's CPU; this process's CPU (the
  emulator and every simulated node) and its loop lag (p99, max), because on a small machine
  that process is the first to run out of CPU.
- health during the window: Live conditions that turned False (with no node killed: false
  deaths), claims moved, controllers that fenced, liveness replies sent per node per second
  (10 expected: one replica probing every 100 ms).
- failover: a node that holds a claim is killed (replies stop, controller stops, link gone);
  the time until its claim is placed on another node, and until it is Bound there.

Figures only; nothing is asserted. The emulator sharing one loop (one core) with N
controllers is the sandbox's design, not a cluster's: this process's CPU and loop lag are
reported so that a figure distorted by it can be told apart (docs/sandbox.md, "How many
nodes"). A run that reaches no steady state is measured all the same and flagged ``!``.

Past 300 nodes the sandbox runs its nodes in worker processes (`eipctl.sandbox.workers`, one
per core); `--workers N` chooses (0: all in the sandbox process), and the table shows their
CPU beside the sandbox process's (then the emulator's alone).

Run: python benchmarks/bench_api_load.py [--nodes 10,50,200,1000] [--window 20]
        [--settle 5] [--services 10] [--workers N] [--profile] [--keep] [--log-level info]
(`--profile` runs cProfile in the sandbox process during each window and prints the top
functions; it slows that process down, so its figures are not the unprofiled ones.
`--keep` keeps each run's logs and prints where.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from figures import machine, run_cell

GROUP = "eipctl.io"
IPNODES = (GROUP, "ipnodes")
IPCLAIMS = (GROUP, "ipclaims")
IPCLAIMPOOLS = (GROUP, "ipclaimpools")
SERVICES = ("", "services")
LEASES = ("coordination.k8s.io", "leases")
EVENTS = {("", "events"), ("events.k8s.io", "events")}
SCHEDULER_WATCHES = (IPCLAIMS, IPNODES, IPCLAIMPOOLS, SERVICES)
GOAL_WRITES = 0.2  # per node per second, Leases apart
GOAL_EVENTS = 1.0  # watch events per node per second at each scheduler replica
MIN_WINDOW = 10.0


# -- the parent: one child process per node count, then the table ---------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,50,200,1000", help="comma-separated node counts")
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured (>= 10)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after steady state")
    parser.add_argument("--services", type=int, default=10, help="demo Services (claims)")
    parser.add_argument("--profile", action="store_true", help="cProfile the sandbox process")
    parser.add_argument("--keep", action="store_true", help="keep each run's logs (path printed)")
    parser.add_argument("--log-level", default="warning", help="of the sandbox process's log")
    parser.add_argument(
        "--workers",
        type=int,
        help="node worker processes (0: the nodes in the sandbox process; default: the "
        "sandbox's choice, `session.node_workers`)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one run, JSON out
    args = parser.parse_args()
    window = max(MIN_WINDOW, args.window)
    if args.one is not None:
        return one(
            args.one,
            window=window,
            settle=args.settle,
            services=args.services,
            profile=args.profile,
            keep=args.keep,
            log_level=args.log_level,
            workers=args.workers,
        )
    print(f"machine: {machine()}", flush=True)
    print(
        f"window {window:g}s after {args.settle:g}s of steady state; {args.services} Services; "
        "scheduler and allocator with default flags (probes every 100ms, liveness timeout 400ms)",
        flush=True,
    )
    results = []
    for n in [int(x) for x in args.nodes.split(",") if x.strip()]:
        print(f"\n--- {n} nodes", flush=True)
        argv = [sys.executable, __file__, "--one", str(n), "--window", str(window)]
        argv += ["--settle", str(args.settle), "--services", str(args.services)]
        argv += ["--log-level", args.log_level]
        argv += ["--profile"] if args.profile else []
        argv += ["--keep"] if args.keep else []
        argv += [] if args.workers is None else ["--workers", str(args.workers)]
        result = run_cell(argv, f"{n} nodes")
        if result is not None:
            results.append(result)
    print()
    for line in table(results):
        print(line)
    return 0


def table(results: list[dict[str, Any]]) -> list[str]:
    cols = [
        ("nodes", "{nodes}"),
        ("writes/s", "{writes:.1f}"),
        ("leases/s", "{lease_writes:.1f}"),
        ("events/s", "{event_writes:.1f}"),
        ("rest/node/s", "{writes_per_node:.3f}"),
        ("sched ev/node/s", "{sched_events_per_node:.3f}"),
        ("IpNode ev/node/s", "{ipnode_events_per_node:.3f}"),
        ("sched CPU%", "{sched_cpu:.0f}"),
        ("sched RSS MB", "{sched_rss_mb:.0f}"),
        ("sandbox CPU%", "{self_cpu:.0f}"),
        ("workers CPU%", "{workers}: {workers_cpu:.0f}"),
        ("lag p99/max ms", "{lag_p99_ms:.0f}/{lag_max_ms:.0f}"),
        ("false deaths", "{false_deaths}"),
        ("fences", "{fences}"),
        ("replies/node/s", "{replies_per_node:.1f}"),
        ("failover placed/Bound s", "{failover}"),
    ]
    rows = [[name for name, _ in cols]]
    for r in results:
        fo = r.get("failover") or {}
        placed, bound = fo.get("placed"), fo.get("bound")
        shown = (
            "-" if placed is None else f"{placed:.2f}/" + ("-" if bound is None else f"{bound:.2f}")
        )
        rows.append([fmt.format(**{**r, "failover": shown}) for _, fmt in cols])
        if r.get("unsteady"):
            rows[-1][0] += "!"
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    out = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    out.append(
        f"goal: rest/node/s <= {GOAL_WRITES} (plus the Leases' constant), "
        f"sched ev/node/s <= {GOAL_EVENTS}"
    )
    if any(r.get("unsteady") for r in results):
        out.append("!: no steady state (see the run's lines): figures measured under overload")
    for r in results:
        kinds = ", ".join(f"{k} {v:.2f}/s" for k, v in r["writes_by_kind"].items())
        ipnode = ", ".join(f"{k} {v:.3f}" for k, v in r["ipnode_writes_per_node"].items())
        reqs = ", ".join(f"{k} {v:.0f}" for k, v in r["requests_per_s"].items())
        out.append(f"{r['nodes']} nodes: writes by kind: {kinds}")
        out.append(f"  IpNode writes per node per s by change: {ipnode or '-'}")
        out.append(f"  requests/s at the emulator: {reqs}")
        out.append(
            f"  boot {r['boot_s']:.1f}s (IpNodes registered), steady after {r['steady_s']:.1f}s; "
            f"allocator CPU {r['alloc_cpu']:.0f}%; claims moved in the window {r['moves']}"
        )
        g = r["gc"]
        out.append(
            f"  sandbox GC in the window: {g['collections']} collections ({g['full']} full), "
            f"{g['total_ms']:.0f} ms in all, longest {g['max_ms']:.0f} ms; "
            f"{g['tracked_objects']:,} objects tracked"
        )
    return out


# -- a child: one sandbox, measured -----------------------------------------------------------
@dataclass
class Tally:
    """What the emulator committed and served, counted as it happens."""

    writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    ipnode_changes: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    live_false: int = 0
    moves: int = 0

    def copy(self) -> Tally:
        return Tally(
            Counter(self.writes),
            Counter(self.ipnode_changes),
            Counter(self.requests),
            self.live_false,
            self.moves,
        )


def _live(obj: dict[str, Any] | None) -> str | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Live":
            return str(cond.get("status"))
    return None


def _ipnode_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What a write changed on an IpNode: the status fields, spec, labels (for the table)."""
    changed = []
    if old.get("spec") != new.get("spec"):
        changed.append("spec")
    if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
        changed.append("labels")
    os_, ns = old.get("status") or {}, new.get("status") or {}
    changed += sorted(k for k in set(os_) | set(ns) if os_.get(k) != ns.get(k))
    return "+".join(changed) or "nothing"


def instrument(box: Any, tally: Tally) -> None:
    """Count every committed event (by resource, and for IpNodes by change) and every request
    the emulator serves (by verb)."""
    hub = box.server.store.hub
    publish = hub.publish

    def counting(ev: Any) -> None:
        tally.writes[ev.key] += 1
        if ev.key == IPNODES and ev.type == "MODIFIED" and ev.old is not None:
            tally.ipnode_changes[_ipnode_change(ev.old, ev.obj)] += 1
            if _live(ev.old) == "True" and _live(ev.obj) == "False":
                tally.live_false += 1
        if ev.key == IPCLAIMS and ev.type == "MODIFIED" and ev.old is not None:
            before = (ev.old.get("spec") or {}).get("nodeName")
            if before and before != (ev.obj.get("spec") or {}).get("nodeName"):
                tally.moves += 1
        publish(ev)

    hub.publish = counting
    handlers = box.server._routes.handlers  # the emulator's resource verbs
    resource_handler = handlers.resource

    async def counted(request: Any) -> Any:
        tally.requests[verb_of(request)] += 1
        return await resource_handler(request)

    handlers.resource = counted


def verb_of(request: Any) -> str:
    """A request's verb as the API server names it: WATCH, LIST, GET, PATCH, PUT, POST..."""
    verb = str(request.method)
    if verb == "GET" and request.query.get("watch") in ("true", "1"):
        return "WATCH"
    if verb == "GET" and not _named(request.path):
        return "LIST"
    return verb


def _named(path: str) -> bool:
    """Whether a GET path names one object (a GET) rather than a collection (a LIST)."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return len(rest) >= 2


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def workers_cpu(box: Any) -> float:
    """CPU seconds of the node worker processes so far (0 when the nodes run in this one)."""
    total = 0.0
    for worker in getattr(box.fleet, "workers", []):
        if worker.proc is not None and worker.proc.returncode is None:
            with contextlib.suppress(OSError):
                total += cpu_seconds(worker.proc.pid)
    return total


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sample(name: str, **labels: str) -> float:
    from eipctl.metrics import REGISTRY

    return REGISTRY.get_sample_value(name, labels or None) or 0.0


class GcMeter:
    """The garbage collector's pauses: a full collection walks every object of the process
    (a thousand simulated nodes are millions), with the loop stopped."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((int(info["generation"]), time.perf_counter() - self._started))

    def start(self) -> None:
        self.pauses.clear()
        gc.callbacks.append(self._callback)

    def stop(self) -> dict[str, Any]:
        gc.callbacks.remove(self._callback)
        full = [p for g, p in self.pauses if g == 2]
        return {
            "collections": len(self.pauses),
            "full": len(full),
            "max_ms": 1000 * max((p for _, p in self.pauses), default=0.0),
            "total_ms": 1000 * sum(p for _, p in self.pauses),
            "tracked_objects": len(gc.get_objects()),
        }


class LagMeter:
    """How late this loop wakes a 50 ms sleeper: the loop's own overload."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.05)
            self.lags.append(loop.time() - t - 0.05)

    def start(self) -> None:
        self.lags.clear()
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> tuple[float, float]:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        lags = sorted(self.lags) or [0.0]
        return lags[int(0.99 * (len(lags) - 1))], lags[-1]


async def wait_steady(box: Any, services: int, within: float) -> str:
    """Every Service's claim Bound, every IpNode Live: "" once there, else what was seen when
    `within` seconds ran out (then the window is measured all the same, and flagged)."""
    store = box.server.store
    deadline = time.monotonic() + within
    while True:
        claims = store.scan(GROUP, "ipclaims")
        bound = sum(1 for c in claims if (c.get("status") or {}).get("phase") == "Bound")
        nodes = store.scan(GROUP, "ipnodes")
        live = sum(1 for n in nodes if _live(n) == "True")
        if bound >= services and live == len(box.fleet.nodes):
            return ""
        if time.monotonic() >= deadline:
            return (
                f"NOT STEADY after {within:g}s: {bound}/{services} claims Bound, "
                f"{live}/{len(box.fleet.nodes)} IpNodes Live, {len(nodes)} registered"
            )
        await asyncio.sleep(0.5)


async def failover(box: Any) -> dict[str, Any]:
    """Kill a node that holds a Bound claim; time its claim placed elsewhere, then Bound."""
    store = box.server.store
    claims = store.scan(GROUP, "ipclaims")
    claim = next((c for c in claims if (c.get("status") or {}).get("phase") == "Bound"), None)
    if claim is None:
        return {
            "claim": None,
            "from": None,
            "to": None,
            "kill_call": 0.0,
            "placed": None,
            "bound": None,
        }
    name, holder = claim["metadata"]["name"], claim["spec"]["nodeName"]
    started = time.monotonic()
    await box.fleet.get(holder).kill()
    killed = time.monotonic() - started
    placed = bound = None
    new = None
    while time.monotonic() - started < 30:
        c = store.find(GROUP, "ipclaims", name) or {}
        node = (c.get("spec") or {}).get("nodeName")
        if placed is None and node and node != holder:
            placed, new = time.monotonic() - started, node
        status = c.get("status") or {}
        if (
            placed is not None
            and status.get("phase") == "Bound"
            and (c.get("spec") or {}).get("nodeName") == new
            and box.fleet.holder_of(c["spec"]["ip"]) == new
        ):
            bound = time.monotonic() - started
            break
        await asyncio.sleep(0.005)
    return {
        "claim": name,
        "from": holder,
        "to": new,
        "kill_call": killed,
        "placed": placed,
        "bound": bound,
    }


def _s(seconds: float | None) -> str:
    return "never (30s)" if seconds is None else f"{seconds:.3f}s"


def one(
    n: int,
    *,
    window: float,
    settle: float,
    services: int,
    profile: bool,
    keep: bool,
    log_level: str,
    workers: int | None,
) -> int:
    import structlog

    from eipctl.runtime.config import SandboxSettings
    from eipctl.sandbox.limits import raise_file_limit

    raise_file_limit(n)
    prefix = f"bench-api-load-{n}-"
    where: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix=prefix))
        if keep
        else tempfile.TemporaryDirectory(prefix=prefix)
    )
    with where as tmp:
        log = Path(tmp) / "sandbox.log"
        stream = log.open("a", buffering=1, encoding="utf-8")
        import logging

        from eipctl.runtime.logsetup import configure_logging

        configure_logging("text", log_level, "sandbox")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))
        logging.basicConfig(level=logging.WARNING, stream=stream, force=True)
        settings = SandboxSettings(
            nodes=n,
            services=services,
            state_dir=str(Path(tmp) / "state"),
            kubeconfig_out=str(Path(tmp) / "sandbox.kubeconfig"),
            log_level="info",  # the scheduler's node.dead / liveness.stalled lines are counted
        )
        try:
            result = asyncio.run(
                _one(settings, window=window, settle=settle, profile=profile, workers=workers)
            )
        finally:
            stream.close()
        sched_log = (Path(tmp) / "state" / "scheduler.log").read_text(errors="replace")
        result["sched_log"] = {
            key: sched_log.count(f"event='{key}'")
            for key in ("node.dead", "liveness.stalled", "node.live")
        }
        warned: Counter[str] = Counter()
        for line in log.read_text(errors="replace").splitlines():
            if "level='warning'" in line and (found := re.search(r"event='([^']+)'", line)):
                warned[found.group(1)] += 1
        result["sandbox_warnings"] = dict(warned.most_common(6))
        if keep:
            print(f"  logs kept in {tmp}")
    print(f"  scheduler log: {result['sched_log']}; sandbox warnings {result['sandbox_warnings']}")
    print(json.dumps(result), flush=True)
    return 0


async def samples(box: Any) -> tuple[float, float]:
    """Fence transitions and liveness replies sent so far, by every simulated node (in this
    process, or summed over the worker processes)."""
    fences, replies = (
        "eipctl_controller_fence_transitions_total",
        "eipctl_liveness_replies_sent_total",
    )
    if hasattr(box.fleet, "samples"):
        found = await box.fleet.samples()
        return found.get(fences, 0.0), found.get(replies, 0.0)
    return sample(fences, kind="fence"), sample(replies)


async def _one(
    settings: Any, *, window: float, settle: float, profile: bool, workers: int | None
) -> dict[str, Any]:
    from eipctl.sandbox.session import Sandbox

    n = settings.nodes
    box = Sandbox(settings, out=io.StringIO(), tty=False, workers=workers)
    tally = Tally()
    instrument(box, tally)
    stop = asyncio.Event()
    t0 = time.monotonic()
    await box.boot(stop)
    try:
        boot = time.monotonic() - t0
        print(f"  booted in {boot:.1f}s", flush=True)
        unsteady = await wait_steady(box, settings.services, within=60 + n * 0.12)
        steady = time.monotonic() - t0
        if unsteady:
            print(f"  {unsteady}; measuring anyway", flush=True)
        else:
            print(f"  steady after {steady:.1f}s; settling {settle:g}s", flush=True)
        await asyncio.sleep(settle)
        pids = {c.name: c.pid for c in box.children.statuses()}
        sched, alloc = pids["scheduler"], pids["allocator"]
        assert sched is not None and alloc is not None
        lag = LagMeter()
        gcm = GcMeter()
        profiler = cProfile.Profile() if profile else None
        before = tally.copy()
        fences0, replies0 = await samples(box)
        cpu0 = (cpu_seconds(sched), cpu_seconds(alloc), self_cpu(), workers_cpu(box))
        started = time.monotonic()
        lag.start()
        gcm.start()
        if profiler is not None:
            profiler.enable()
        await asyncio.sleep(window)
        if profiler is not None:
            profiler.disable()
        elapsed = time.monotonic() - started
        cpu1 = (cpu_seconds(sched), cpu_seconds(alloc), self_cpu(), workers_cpu(box))
        lag_p99, lag_max = await lag.stop()
        gc_stats = gcm.stop()
        after = tally.copy()
        fences1, replies1 = await samples(box)
        fences, replies = fences1 - fences0, replies1 - replies0
        fenced_now = sum(
            1
            for node in box.fleet.nodes.values()
            if getattr(node, "controller", None) is not None and node.controller.fence.fenced
        )
        sched_rss = rss_mb(sched)
        fo = await failover(box)
        print(
            "  failover: no Bound claim to take away"
            if fo["claim"] is None
            else f"  failover: {fo['from']} killed ({fo['kill_call']:.3f}s to stop it) -> "
            f"{fo['claim']} placed on {fo['to']} after {_s(fo['placed'])}, "
            f"Bound there after {_s(fo['bound'])}",
            flush=True,
        )
    finally:
        await box.shutdown()
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(20)
        stats.sort_stats("cumulative").print_stats(
            r"eipctl|aiohttp/(web|client)\.py|kubernetes", 30
        )
        stats.print_callers(r"threading.py.*\(acquire\)|tasks.py.*\(current_task\)")
        print("  profile of the sandbox process (own time):")
        for line in out.getvalue().splitlines():
            if line.strip():
                print(f"    {line}")
    writes = after.writes - before.writes
    per_s = {k: v / elapsed for k, v in writes.items()}
    total = sum(per_s.values())
    leases = per_s.get(LEASES, 0.0)
    events = sum(per_s.get(k, 0.0) for k in EVENTS)
    rest = total - leases - events
    sched_events = sum(per_s.get(k, 0.0) for k in SCHEDULER_WATCHES)
    ipnode_changes = after.ipnode_changes - before.ipnode_changes
    requests = after.requests - before.requests
    return {
        "nodes": n,
        "unsteady": unsteady,
        "window": elapsed,
        "boot_s": boot,
        "steady_s": steady,
        "writes": total,
        "lease_writes": leases,
        "event_writes": events,
        "writes_per_node": rest / n,
        "writes_by_kind": {
            "/".join(filter(None, k)): v for k, v in sorted(per_s.items(), key=lambda kv: -kv[1])
        },
        "ipnode_writes_per_node": {
            k: v / elapsed / n for k, v in sorted(ipnode_changes.items(), key=lambda kv: -kv[1])
        },
        "requests_per_s": {k: v / elapsed for k, v in sorted(requests.items())},
        "sched_events_per_node": sched_events / n,
        "ipnode_events_per_node": per_s.get(IPNODES, 0.0) / n,
        "sched_cpu": 100 * (cpu1[0] - cpu0[0]) / elapsed,
        "alloc_cpu": 100 * (cpu1[1] - cpu0[1]) / elapsed,
        "self_cpu": 100 * (cpu1[2] - cpu0[2]) / elapsed,
        "workers": len(getattr(box.fleet, "workers", [])),
        "workers_cpu": 100 * (cpu1[3] - cpu0[3]) / elapsed,
        "sched_rss_mb": sched_rss,
        "lag_p99_ms": lag_p99 * 1000,
        "lag_max_ms": lag_max * 1000,
        "gc": gc_stats,
        "false_deaths": after.live_false - before.live_false,
        "moves": after.moves - before.moves,
        "fences": int(fences),
        "fenced_at_end": fenced_now,
        "replies_per_node": replies / elapsed / n,
        "failover": fo,
    }


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
