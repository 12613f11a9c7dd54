"""What eipctl's own processes cost as the cluster grows ([scale], issue #32); prints figures.

For each cell of the grid (--nodes x --services; by default 10, 100, 1,000 nodes by 10,
1,000, 10,000 Services) a fresh process runs:

- the API emulator (kubemu, in that process and alone in it: its CPU is that process's),
  seeded with the CRDs, one pool (10.200.0.0/16), one core v1 Node per simulated node
  and S Services annotated ``external-ip: auto`` (`eipctl.sandbox.boot`), each with its own
  cluster IP, and kubemu's O(S) walk of every Service on each Service write turned off
  (`seed_services`: an emulator shortcut a real API server does not have);
- N simulated nodes (`eipctl.sandbox.scale_nodes.ScaleNode`) in --workers processes
  (`python -m eipctl.sandbox.scale_worker`), started and registered before the schedulers;
- the real ``eipctl allocator`` and --replicas real ``eipctl scheduler`` processes with
  their default flags (probes every 100 ms per replica, node timeout 400 ms).

What a simulated node does: the real `LivenessResponder` (real UDP datagrams, wire format,
HMAC, kernel filter) on its own 127.1.x.y address; the real IpNode registration
(`controller.heartbeat.register`, through a real `SerializedWriter`, again every 30 s as the
controller's resync loop does) and the real `Heartbeat` at the production 10 s; the real
`ApiReachability` (a GET of its IpNode every second while the writer's digest does not
vouch for it, and its guard when probes stop),
fed by the real `Vouching`; claim status Bound and the IpNode's status.addresses written by
the real `StatusReporter` once a claim names the node. What it does not do: links, netlink,
announcements and duplicate-address probes (the address counts as added at once); fencing
(no `FenceWatch`); node keys and peer keys (the schedulers probe under the cluster key);
the peer list (a real node lists every IpNode after registering, a few times while the
cluster boots and every 10 minutes); Events. One watch of every
IpClaim per worker process replaces one label-selected watch per node (a real cluster
serves N watches; the emulator here serves --workers). The nodes of a worker share one
loop and one API client, which counts their requests by verb (shown per node per second).

Once every Service's claim is Bound and every IpNode Live, after --settle seconds, it
measures over --window seconds: each process's CPU (% of one core) and RSS (the scheduler
per replica, the leader marked), the emulator's requests per second by verb (all clients)
and the nodes' own (per node per second), API writes per node per second (Leases and
Events apart), watch events per second at each scheduler replica (the writes to IpClaims,
IpNodes, IpClaimPools and Services, which every replica watches), liveness replies per node
per second (each a probe in and a reply out: 2 datagrams), Live conditions turned False
(false deaths) and claims moved. Then --failovers times: a node holding a Bound claim is
killed (responder closed, heartbeat and checks stopped) and the time until its claim is
placed on, then Bound by, another node (p50, max). Start-up: from the children's start, the
time until every claim exists (allocator) and is Bound (scheduler + nodes).

With --real-node the last node is a whole sandbox node instead (`eipctl.sandbox.nodes`: the
real `NodeController` on an in-memory link) in a process of its own, on the same counting
client: its requests by verb and its datagrams per second are shown beside the simulated
nodes' average, the check that a simulated node makes what a controller makes (a sandbox
node, not an ``eipctl controller`` process on the netns bed: no netlink, no real ARP).

--py-spy samples each scheduler replica during the window (py-spy record --nonblocking,
100 Hz; it must be installed beside this Python) and prints the functions its time goes to.

After the failovers (`scale_phases`): the placement passes at the leader during the window
(from its /metrics: count, mean, the buckets of the median and the longest), the longest
collector pause, each child's start to a synced cache and to its first term caught up
(``term.caught_up``), the allocator restarted (SIGTERM, then a new one: every Service checked,
and its Service and IpClaim writes in the 15 s after, 0 expected), and with 2 replicas the
scheduler leader SIGKILLed with a node at the same instant (every claim of that node Bound
elsewhere). --json keeps the figures, --plots draws them (`scale_plots`, matplotlib).

Figures only; nothing is asserted.

Run: python benchmarks/bench_scale.py [--nodes 10,100,1000] [--services 10,1000,10000]
        [--window 30] [--settle 5] [--workers N] [--replicas 2] [--failovers 3] [--keep]
        [--real-node] [--py-spy] [--json FILE] [--plots DIR]
        python benchmarks/bench_scale.py --plot-from FILE --plots DIR
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import secrets
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_api_load import (
    EVENTS,
    IPCLAIMS,
    LEASES,
    SCHEDULER_WATCHES,
    SERVICES,
    LagMeter,
    Tally,
    cpu_seconds,
    instrument,
    rss_mb,
    self_cpu,
)
from figures import machine, run_cell
from scale_phases import (
    PassTimes,
    allocator_restart,
    free_port,
    leader_with_node,
    longest_gc_pause,
    scrape,
    startup,
)
from scale_plots import draw

GROUP = "eipctl.io"
POOL_CIDR = "10.200.0.0/16"
MIN_WINDOW = 5.0


def _live(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Live":
            return cond.get("status") == "True"
    return False


def _bound_on(claim: dict[str, Any]) -> str:
    status = claim.get("status") or {}
    return str(status.get("boundNode") or "") if status.get("phase") == "Bound" else ""


# -- the parent: one child process per cell, then the table ------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,100,1000", help="comma-separated node counts")
    parser.add_argument("--services", default="10,1000,10000", help="comma-separated counts")
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after steady state")
    parser.add_argument("--workers", type=int, default=0, help="node processes (0: choose)")
    parser.add_argument("--replicas", type=int, default=2, help="scheduler replicas")
    parser.add_argument("--failovers", type=int, default=3, help="nodes killed after the window")
    parser.add_argument("--keep", action="store_true", help="keep each run's logs")
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="the last node a whole sandbox node (the real NodeController) in a process of its "
        "own, its requests and replies shown beside the simulated nodes'",
    )
    parser.add_argument(
        "--py-spy",
        action="store_true",
        help="sample each scheduler replica with py-spy (--nonblocking) during the window and "
        "print where its time goes",
    )
    parser.add_argument(
        "--child-flags",
        default="",
        help="extra flags for the allocator and every scheduler replica (default: none, their "
        "defaults), e.g. '--renew-deadline 4s --lease-duration 5s'",
    )
    parser.add_argument("--json", help="write every cell's figures to this file")
    parser.add_argument(
        "--plots",
        help="draw the plots (matplotlib) into this folder, e.g. docs/ (with --plot-from: "
        "from a --json file of an earlier run, without running anything)",
    )
    parser.add_argument("--plot-from", help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: "N,S", JSON out
    args = parser.parse_args()
    window = max(MIN_WINDOW, args.window)
    if args.plot_from:
        results = json.loads(Path(args.plot_from).read_text())
        for path in draw(results, Path(args.plots or ".")):
            print(f"plot: {path}")
        return 0
    if args.one:
        n, s = (int(x) for x in args.one.split(","))
        return one(n, s, args, window)
    print(f"machine: {machine()}", flush=True)
    print(
        f"window {window:g}s after {args.settle:g}s of steady state; {args.replicas} scheduler "
        "replica(s) and the allocator with default flags (probes every 100ms, timeout 400ms)"
        + (f" and {args.child_flags!r}" if args.child_flags else ""),
        flush=True,
    )
    results = []
    grid = itertools.product(_ints(args.nodes), _ints(args.services))
    for n, s in grid:
        print(f"\n--- {n} nodes, {s} Services (load {_load()})", flush=True)
        argv = [sys.executable, __file__, "--one", f"{n},{s}", "--window", str(window)]
        argv += ["--settle", str(args.settle), "--workers", str(args.workers)]
        argv += ["--replicas", str(args.replicas), "--failovers", str(args.failovers)]
        argv += ["--keep"] if args.keep else []
        argv += ["--real-node"] if args.real_node else []
        argv += ["--py-spy"] if args.py_spy else []
        argv += [f"--child-flags={args.child_flags}"] if args.child_flags else []
        result = run_cell(argv, f"{n} nodes x {s} Services")
        if result is not None:
            results.append(result)
    print()
    for line in table(results):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.plots:
        for path in draw(results, Path(args.plots)):
            print(f"plot: {path}")
    return 0


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _load() -> str:
    """The load averages (1, 5, 15 min) as /proc/loadavg has them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
        f"{_s(a['caught_up'])}, Service and IpClaim writes in {a['within']:.0f}s: {a['writes']}"
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


# -- a child: one cell, measured ---------------------------------------------------------------
class Worker:
    """One `scale_worker` process: JSON-line requests and answers."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.registered = asyncio.get_running_loop().create_future()
        self._ids = itertools.count()
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            if msg.get("event") == "registered" and not self.registered.done():
                self.registered.set_result(msg["nodes"])
            elif (fut := self._waiting.pop(msg.get("id", -1), None)) is not None:
                if msg.get("ok"):
                    fut.set_result(msg.get("result"))
                else:
                    fut.set_exception(RuntimeError(msg.get("error")))
        for fut in [self.registered, *self._waiting.values()]:
            if not fut.done():
                fut.set_exception(RuntimeError(f"worker {self.proc.pid} exited"))

    async def ask(self, op: str, **kw: Any) -> Any:
        assert self.proc.stdin is not None
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self.proc.stdin.write((json.dumps({"id": rid, "op": op, **kw}) + "\n").encode())
        await self.proc.stdin.drain()
        async with asyncio.timeout(20):
            return await fut

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(10):
                await self.ask("stop")
                await self.proc.wait()
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()


def worker_blocks(n: int, count: int, real: bool) -> list[tuple[int, int, bool]]:
    """(first, size, real) of each worker: `count` of simulated nodes, and with `real` the
    last node alone in one more."""
    from eipctl.sandbox.scale_worker import blocks

    made = [(first, size, False) for first, size in blocks(n - real, count)] if n > real else []
    return [*made, (n, 1, True)] if real else made


async def start_workers(
    n: int, count: int, *, kubeconfig: Path, key_file: Path, tmp: Path, real: bool
) -> list[Worker]:
    workers = []
    for k, (first, size, is_real) in enumerate(worker_blocks(n, count, real)):
        spec = {
            "kubeconfig": str(kubeconfig),
            "key_file": str(key_file),
            "first": first,
            "count": size,
            "real": is_real,
            "log": str(tmp / f"worker-{k}.log"),
        }
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "eipctl.sandbox.scale_worker", str(os.getpid())),
            json.dumps(spec),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        workers.append(Worker(proc))
    return workers


def children(
    kubeconfig: Path, key_file: Path, tmp: Path, replicas: int, extra: str
) -> tuple[Any, dict[str, int]]:
    """The allocator and the scheduler replicas (not started), and the port each serves its
    /metrics on (loopback)."""
    from eipctl.sandbox.children import Children

    ports = {"allocator": free_port()}
    made = [allocator_child(kubeconfig, tmp / "alloc.log", ports["allocator"], extra)]
    for r in range(1, replicas + 1):
        name = f"scheduler-{r}"
        ports[name] = free_port()
        made.append(_child(name, "scheduler", kubeconfig, tmp, ports[name], extra, key_file))
    return Children(made), ports


def allocator_child(kubeconfig: Path, log: Path, port: int, extra: str) -> Any:
    return _child("allocator", "allocator", kubeconfig, log.parent, port, extra, log=log)


def _child(
    name: str,
    command: str,
    kubeconfig: Path,
    tmp: Path,
    port: int,
    extra: str,
    key_file: Path | None = None,
    log: Path | None = None,
) -> Any:
    from eipctl.sandbox.children import Child, component_argv

    argv = component_argv(command, kubeconfig, "info", liveness_key_file=key_file)
    argv[argv.index("--metrics-bind-address") + 1] = f"127.0.0.1:{port}"
    if command == "scheduler":
        argv[argv.index("--identity") + 1] = f"sandbox-{name}"
    return Child(name, [*argv, *shlex.split(extra)], log or tmp / f"{name}.log")


def seed_services(server: Any, count: int) -> None:
    """`count` demo Services (``external-ip: auto``), each with a distinct cluster IP of its
    own, and kubemu's walk of every other Service on each Service write turned off.

    kubemu defaults a Service by collecting every other Service's cluster IPs and node ports
    (`strategies._other_service_specs`), on every create and update: O(S) per Service write,
    O(S^2) to create S of them (10,000 took minutes), where a real API server's allocators
    are bitmaps. With explicit, distinct cluster IPs and no node ports the walk finds
    nothing to avoid, so this process (the emulator) skips it: its CPU is then the cost of
    eipctl's requests, not of an emulator shortcut."""
    import kubemu.strategies
    from eipctl.sandbox.boot import DEMO_NAMESPACE, demo_service

    kubemu.strategies._other_service_specs = lambda _store, _obj: []  # type: ignore[attr-defined]
    for i in range(1, count + 1):
        svc = demo_service(i)
        svc["spec"]["clusterIP"] = f"10.{96 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}"
        server.store.create("", "services", svc, DEMO_NAMESPACE)


def one(n: int, s: int, args: argparse.Namespace, window: float) -> int:
    from eipctl.sandbox.limits import raise_file_limit

    raise_file_limit(n)
    where: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(tempfile.mkdtemp(prefix=f"bench-scale-{n}-{s}-"))
        if args.keep
        else tempfile.TemporaryDirectory(prefix=f"bench-scale-{n}-{s}-")
    )
    with where as tmp:
        import structlog

        stream = (Path(tmp) / "emulator.log").open("a", buffering=1, encoding="utf-8")
        structlog.configure(
            logger_factory=structlog.PrintLoggerFactory(file=stream),
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        )
        logging.basicConfig(level=logging.WARNING, stream=stream, force=True)
        try:
            result = asyncio.run(_one(n, s, args, window, Path(tmp)))
        finally:
            stream.close()
        if args.keep:
            print(f"  logs kept in {tmp}")
    print(json.dumps(result), flush=True)
    return 0


async def _wait(what: str, within: float, ready: Any) -> tuple[float, str]:
    """Poll `ready()` (-> (done, note)) every 0.2 s; (seconds taken, "" or what was seen)."""
    t0 = time.monotonic()
    while True:
        done, note = ready()
        if done:
            return time.monotonic() - t0, ""
        if time.monotonic() - t0 > within:
            return time.monotonic() - t0, f"{what} NOT reached after {within:g}s: {note}"
        await asyncio.sleep(0.2)


async def _one(n: int, s: int, args: argparse.Namespace, window: float, tmp: Path) -> dict:
    from eipctl.sandbox.boot import node_names, seed
    from eipctl.sandbox.session import write_key
    from kubemu import ApiServer

    server = ApiServer(history_window=max(5000, 10 * n + 5 * s), bookmark_interval=5.0)
    tally = Tally()
    instrument(SimpleNamespace(server=server), tally)
    store = server.store
    kubeconfig, key_file = tmp / "kubeconfig", tmp / "liveness.key"
    write_key(key_file, secrets.token_urlsafe(32))
    count = args.workers or max(1, min(os.cpu_count() or 1, -(-n // 500)))
    workers: list[Worker] = []
    kids, ports = children(kubeconfig, key_file, tmp, args.replicas, args.child_flags)
    started = False
    await server.start(host="127.0.0.1", port=0)
    try:
        seed(server, pool_cidr=POOL_CIDR, nodes=node_names(n), services=0)
        seed_services(server, s)
        server.write_kubeconfig(kubeconfig)
        t0 = time.monotonic()
        workers = await start_workers(
            n, count, kubeconfig=kubeconfig, key_file=key_file, tmp=tmp, real=args.real_node
        )
        async with asyncio.timeout(60 + 0.2 * n):
            await asyncio.gather(*(w.registered for w in workers))
        registered_s = time.monotonic() - t0
        print(f"  {n} nodes registered in {registered_s:.1f}s ({count} workers)", flush=True)
        kids_started_at = time.time()
        kids.start()
        started = True
        t1 = time.monotonic()

        def created() -> tuple[bool, str]:
            have = len(store.scan(GROUP, "ipclaims"))
            return have >= s, f"{have}/{s} claims"

        created_after, note = await _wait("claims", 120 + 0.05 * s, created)

        def steady() -> tuple[bool, str]:
            claims = store.scan(GROUP, "ipclaims")
            bound = sum(1 for c in claims if _bound_on(c))
            live = sum(1 for x in store.scan(GROUP, "ipnodes") if _live(x))
            return bound >= s and live >= n, f"{bound}/{s} Bound, {live}/{n} Live"

        _, unsteady = await _wait("steady state", 120 + 0.05 * s + 0.1 * n, steady)
        bound_after = time.monotonic() - t1
        print(
            f"  claims created after {created_after:.1f}s, "
            + (unsteady or f"all Bound, all Live after {bound_after:.1f}s")
            + (f"; {note}" if note else ""),
            flush=True,
        )
        await asyncio.sleep(args.settle)
        pids = {c.name: c.pid for c in kids.statuses()}
        scheds = [pids[f"scheduler-{r}"] for r in range(1, args.replicas + 1)]
        alloc = pids["allocator"]
        procs = [*scheds, alloc]
        wpids = [w.proc.pid for w in workers]
        samples0 = await asyncio.gather(*(w.ask("samples") for w in workers))
        before = tally.copy()
        cpu0 = [cpu_seconds(p) for p in procs], self_cpu(), sum(cpu_seconds(p) for p in wpids)
        lag = LagMeter()
        lag.start()
        w0 = time.monotonic()
        load0 = _load()
        spies = await start_spies(scheds, window, tmp) if args.py_spy else []
        leader0 = _leader(store)
        leader_port = ports.get(leader0.removeprefix("sandbox-"), 0)
        passes0 = await scrape(leader_port) if leader_port else {}
        await asyncio.sleep(window)
        passes1 = await scrape(leader_port) if leader_port else {}
        alloc_metrics = await scrape(ports["allocator"])
        elapsed = time.monotonic() - w0
        cpu1 = [cpu_seconds(p) for p in procs], self_cpu(), sum(cpu_seconds(p) for p in wpids)
        lag_p99, lag_max = await lag.stop()
        after = tally.copy()
        samples1 = await asyncio.gather(*(w.ask("samples") for w in workers))
        rss = [rss_mb(p) for p in procs]
        leader = _leader(store)
        print(f"  window {elapsed:.1f}s done (load {load0} -> {_load()})", flush=True)
        for r, (spy, out) in enumerate(spies, start=1):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    await spy.wait()
            for line in spy_summary(out, f"scheduler-{r}"):
                print(line, flush=True)
        owner = node_owners(workers, count, n, args.real_node)
        fos = await failovers(store, owner, args.failovers)
        boot = startup(tmp, kids_started_at, args.replicas)
        restart = await allocator_restart(
            kids,
            lambda: allocator_child(kubeconfig, tmp / "alloc-2.log", free_port(), args.child_flags),
            tally,
            tmp,
            _allocator_writes,
        )
        both = (
            await leader_with_node(store, kids, _leader(store), owner, _bound_on)
            if args.replicas > 1
            else {"skipped": "one replica"}
        )
    finally:
        if started:
            await kids.stop(5.0)
        await asyncio.gather(*(w.stop() for w in workers), return_exceptions=True)
        await server.stop()
    passes = PassTimes.between(passes0, passes1)
    writes = after.writes - before.writes
    per_s = {k: v / elapsed for k, v in writes.items()}
    rest = sum(per_s.values()) - per_s.get(LEASES, 0.0) - sum(per_s.get(k, 0.0) for k in EVENTS)
    blocks_ = worker_blocks(n, count, args.real_node)
    node_req: dict[str, float] = {}
    real_req: dict[str, float] = {}
    replies = real_replies = 0.0
    for (_, _, is_real), a, b in zip(blocks_, samples0, samples1, strict=True):
        into = real_req if is_real else node_req
        for verb, v in b["requests"].items():
            into[verb] = into.get(verb, 0.0) + (v - a["requests"].get(verb, 0)) / elapsed
        if is_real:
            real_replies += b["replies"] - a["replies"]
        else:
            replies += b["replies"] - a["replies"]
    simulated = n - args.real_node
    requests = after.requests - before.requests
    order = sorted(range(args.replicas), key=lambda i: f"sandbox-scheduler-{i + 1}" != leader)
    return {
        "nodes": n,
        "services": s,
        "unsteady": unsteady,
        "window": elapsed,
        "load": load0,
        "registered_s": registered_s,
        "created_after": created_after,
        "bound_after": bound_after,
        "sched_cpus": [100 * (cpu1[0][i] - cpu0[0][i]) / elapsed for i in order],
        "sched_rsss": [rss[i] for i in order],
        "leader": leader,
        "alloc_cpu": 100 * (cpu1[0][-1] - cpu0[0][-1]) / elapsed,
        "alloc_rss": rss[-1],
        "emu_cpu": 100 * (cpu1[1] - cpu0[1]) / elapsed,
        "workers": count,
        "workers_cpu": 100 * (cpu1[2] - cpu0[2]) / elapsed,
        "emu_requests": sum(requests.values()) / elapsed,
        "requests_per_s": {k: v / elapsed for k, v in sorted(requests.items())},
        "node_requests": {k: v / simulated for k, v in sorted(node_req.items())},
        "node_requests_per_node": sum(node_req.values()) / simulated,
        "real_node": args.real_node,
        "real_requests": dict(sorted(real_req.items())),
        "real_udp": 2 * real_replies / elapsed,
        "writes_per_node": rest / n,
        "writes_by_kind": {
            "/".join(filter(None, k)): v for k, v in sorted(per_s.items(), key=lambda kv: -kv[1])
        },
        "sched_events": sum(per_s.get(k, 0.0) for k in SCHEDULER_WATCHES),
        "udp_per_node": 2 * replies / elapsed / simulated,
        "false_deaths": after.live_false - before.live_false,
        "moves": after.moves - before.moves,
        "vouched": sum(x["vouched"] for x in samples1),
        "lag_p99_ms": 1000 * lag_p99,
        "lag_max_ms": 1000 * lag_max,
        "failovers": fos,
        "passes": passes.text() if passes else "none in the window",
        "gc_max": {
            "scheduler": longest_gc_pause(passes1),
            "allocator": longest_gc_pause(alloc_metrics),
        },
        "startup": boot,
        "allocator_restart": restart,
        "leader_with_node": both,
        "child_flags": args.child_flags,
        "term_starts": term_starts(tmp, args.replicas),
    }


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


def term_starts(tmp: Path, replicas: int) -> dict[str, int]:
    """How many leadership terms each child began (1 each when nothing went wrong): a term
    lost under load shows as more."""
    out = {"allocator": (tmp / "alloc.log").read_text(errors="replace").count("leader.acquired")}
    for r in range(1, replicas + 1):
        log_text = (tmp / f"scheduler-{r}.log").read_text(errors="replace")
        out[f"scheduler-{r}"] = log_text.count("leader.acquired")
    return out


def _leader(store: Any) -> str:
    for lease in store.scan(*LEASES):
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if "scheduler" in holder:
            return holder
    return ""


def node_owners(workers: list[Worker], count: int, n: int, real_node: bool) -> dict[str, Worker]:
    """Each simulated node's worker (the real node is there to be compared, not killed)."""
    owner = {}
    for k, (first, size, real) in enumerate(worker_blocks(n, count, real_node)):
        for i in range(first, first + size):
            if not real:
                owner[f"node-{i}"] = workers[k]
    return owner


def _allocator_writes(before: Tally, after: Tally) -> int:
    """Writes to Services and IpClaims between two tallies (the allocator's kinds)."""
    return sum(after.writes[k] - before.writes[k] for k in (SERVICES, IPCLAIMS))


async def failovers(store: Any, owner: dict[str, Worker], times: int) -> list[dict[str, Any]]:
    """Kill `times` nodes that hold a Bound claim, one after the other; each: the time until
    its claim (the first of its claims) is placed on another node, and Bound there."""
    n = len(owner)
    out: list[dict[str, Any]] = []
    killed: set[str] = set()
    rng = random.Random(32)
    for _ in range(times):
        alive = owner.keys() - killed
        claims = [c for c in store.scan(*IPCLAIMS) if _bound_on(c) in alive]
        if not claims or len(killed) >= n - 1:
            break
        claim = rng.choice(claims)
        name, holder = claim["metadata"]["name"], _bound_on(claim)
        killed.add(holder)
        t0 = time.monotonic()
        await owner[holder].ask("kill", node=holder)
        placed = bound = None
        to = None
        while time.monotonic() - t0 < 30:
            c = store.find(*IPCLAIMS, name) or {}
            node = (c.get("spec") or {}).get("nodeName")
            if placed is None and node and node != holder:
                placed, to = time.monotonic() - t0, node
            if placed is not None and _bound_on(c) == to:
                bound = time.monotonic() - t0
                break
            await asyncio.sleep(0.005)
        out.append({"claim": name, "from": holder, "to": to, "placed": placed, "bound": bound})
        await asyncio.sleep(1.0)
    return out


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
