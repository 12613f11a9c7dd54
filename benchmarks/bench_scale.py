"""What eipctl's own processes cost as the cluster grows ([scale], issue #32); prints figures.

For each cell of the grid (--nodes x --services; by default 10, 100, 1,000 nodes by 10,
1,000, 10,000 Services) a fresh process runs:

- the API emulator (kubemu, in that process and alone in it: its CPU is that process's; its
  heap settled every few seconds, as the sandbox's, `settle_heap`: with 10,000 claims, their
  Services and the event history in one Python heap, the collector's full passes held the
  emulator's loop for seconds, 2.4 s p99, and every client's Lease with it),
  seeded with the CRDs, one pool (10.200.0.0/16), one core v1 Node per simulated node
  and S Services annotated ``external-ip: auto`` (`eipctl.sandbox.boot`), each with its own
  cluster IP, and kubemu's O(S) walk of every Service on each Service write turned off
  (`seed_services`: an emulator shortcut a real API server does not have);
- N simulated nodes (`eipctl.sandbox.scale_nodes.ScaleNode`) in --workers processes
  (`python -m eipctl.sandbox.scale_worker`), started and registered before the schedulers;
- the real ``eipctl allocator`` and --replicas real ``eipctl scheduler`` processes with
  their default flags (probes every 100 ms per replica, liveness timeout 400 ms).

What a simulated node does: the real `LivenessResponder` (real UDP datagrams, wire format,
HMAC, kernel filter) on its own 127.1.x.y address; the real IpNode registration
(`controller.heartbeat.register`, through a real `SerializedWriter`, again every 30 s as the
controller's resync loop does) and the real `Heartbeat` at the production 10 s; the real
`ApiReachability` (a GET of its IpNode every second while the writer's digest does not
vouch for it, and its guard when probes stop),
fed by the real `Vouching`; claim status Bound and the IpNode's status.addresses written by
the real `StatusReporter` once a claim names the node. What it does not do: links, netlink,
announcements and duplicate-address probes (the address counts as added at once); fencing
(no `FenceWatch`); node keys and peer keys (the schedulers probe under the cluster key; a
controller POSTs its node key Secret once, and greets its peers over UDP once); the peer
list (a real node lists every IpNode after registering, a few times while the cluster boots
and every 10 minutes); the watch of IpClaimPools (`PoolCache`); Events. One watch of every
IpClaim per worker process replaces one label-selected watch per node (a real cluster
serves N watches; the emulator here serves --workers). In steady state none of these makes
a request: over a 60 s window a real controller makes what a simulated node makes (GET 0.067,
PATCH 0.100, UDP 40 a second at 2 replicas; --netns-node, docs/benchmarks.md). The nodes
of a worker share one loop and one API client, which counts their requests by verb (shown
per node per second).

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

With --netns-node (root) the last node is a real ``eipctl controller`` process instead, on
the netns bed (`scale_netns_node`: the sandbox's `NetnsFleet`, a namespace on the bed's
switch, the controller started by the CLI with deploy/'s node flags, its API through the
bed's relay, real netlink on eth0 and real ARP there; the pool is then 203.0.113.0/24).
The schedulers reach its responder through a UDP relay on its 127.1.x.y address (they run
in the host namespace, which gets no route to the bed). Its requests are counted by the
emulator (its kubeconfig's own token), by verb and resource, and its UDP both by the relay
and by its namespace's /proc/net/snmp; both are shown beside a simulated node's average with
the relative difference, and its requests since its start beside a simulated node's.

--heap traces the allocator's and the schedulers' heaps (`scale_heap`, tracemalloc through
`heap_trace/sitecustomize.py`) and prints, after the window, their largest holders by file
and by line (tracing slows them: a run for where the memory goes, not for the table).

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
        [--real-node | --netns-node] [--py-spy] [--json FILE] [--plots DIR]
        python benchmarks/bench_scale.py --plot-from FILE --plots DIR
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import logging
import os
import random
import secrets
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import scale_heap
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
from eipctl.sandbox.session import GC_THRESHOLDS
from eipctl.sandbox.testbed.processes import install_signal_handlers
from figures import machine, run_cell
from scale_fleet import (
    Worker,
    allocator_child,
    children,
    node_owners,
    seed_services,
    start_workers,
    worker_blocks,
)
from scale_netns_node import MAX_SERVICES, NetnsController, RequestTally
from scale_netns_node import POOL_CIDR as NETNS_POOL
from scale_netns_node import figures as netns_figures
from scale_netns_node import reap as reap_netns
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
from scale_report import spy_summary, start_spies, table

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
        "--heap",
        action="store_true",
        help="trace the allocator's and the schedulers' heaps (tracemalloc) and print their "
        "largest holders after the window (scale_heap; slows them: not for the table)",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="the last node a whole sandbox node (the real NodeController) in a process of its "
        "own, its requests and replies shown beside the simulated nodes'",
    )
    parser.add_argument(
        "--netns-node",
        action="store_true",
        help="the last node a real `eipctl controller` process on the netns bed (root; the "
        "pool then 203.0.113.0/24), its requests and UDP shown beside the simulated nodes'",
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
    parser.add_argument(
        "--scheduler-flags",
        default="",
        help="extra flags for every scheduler replica only, e.g. '--liveness-interval 125ms "
        "--liveness-timeout 500ms' (with --node-probe-silence 0.5)",
    )
    parser.add_argument(
        "--node-probe-silence",
        type=float,
        help="the simulated nodes' --probe-silence in seconds (default: the controller's, "
        "400ms); set it to the schedulers' --liveness-timeout when --scheduler-flags changes "
        "that",
    )
    parser.add_argument(
        "--steady-wait",
        type=float,
        default=0.0,
        help="seconds to wait for every claim Bound and every node Live before measuring "
        "anyway (0: 120 + 0.05 per Service + 0.1 per node)",
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
    if args.netns_node:  # SIGTERM too cleans up the namespaces (finally blocks run)
        install_signal_handlers()
    if args.plot_from:
        results = json.loads(Path(args.plot_from).read_text())
        for path in draw(results, Path(args.plots or ".")):
            print(f"plot: {path}")
        return 0
    if args.one:
        n, s = (int(x) for x in args.one.split(","))
        return one(n, s, args, window)
    if args.netns_node and (args.real_node or max(_ints(args.services)) > MAX_SERVICES):
        parser.error(f"--netns-node: without --real-node, at most {MAX_SERVICES} Services")
    print(f"machine: {machine()}", flush=True)
    print(
        f"window {window:g}s after {args.settle:g}s of steady state; {args.replicas} scheduler "
        "replica(s) and the allocator with default flags (probes every 100ms, timeout 400ms)"
        + (f" and {args.child_flags!r}" if args.child_flags else "")
        + (f"; schedulers {args.scheduler_flags!r}" if args.scheduler_flags else "")
        + (
            f"; nodes' --probe-silence {args.node_probe_silence:g}s"
            if args.node_probe_silence is not None
            else ""
        ),
        flush=True,
    )
    results = []
    grid = itertools.product(_ints(args.nodes), _ints(args.services))
    try:
        results = _grid(args, window, grid)
    finally:
        if args.netns_node:  # a cell killed before its own cleanup leaves its namespaces
            reap_netns()
    print()
    for line in table(results):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.plots:
        for path in draw(results, Path(args.plots)):
            print(f"plot: {path}")
    return 0


def _grid(args: argparse.Namespace, window: float, grid: Any) -> list[dict[str, Any]]:
    results = []
    for n, s in grid:
        print(f"\n--- {n} nodes, {s} Services (load {_load()})", flush=True)
        argv = [sys.executable, __file__, "--one", f"{n},{s}", "--window", str(window)]
        argv += ["--settle", str(args.settle), "--workers", str(args.workers)]
        argv += ["--replicas", str(args.replicas), "--failovers", str(args.failovers)]
        argv += ["--steady-wait", str(args.steady_wait)]
        argv += ["--keep"] if args.keep else []
        argv += ["--real-node"] if args.real_node else []
        argv += ["--netns-node"] if args.netns_node else []
        argv += ["--py-spy"] if args.py_spy else []
        argv += ["--heap"] if args.heap else []
        argv += [f"--child-flags={args.child_flags}"] if args.child_flags else []
        argv += [f"--scheduler-flags={args.scheduler_flags}"] if args.scheduler_flags else []
        if args.node_probe_silence is not None:
            argv += ["--node-probe-silence", str(args.node_probe_silence)]
        result = run_cell(argv, f"{n} nodes x {s} Services")
        if result is not None:
            results.append(result)
    return results


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _load() -> str:
    """The load averages (1, 5, 15 min) as /proc/loadavg has them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- a child: one cell, measured ---------------------------------------------------------------
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


async def settle_heap(every: float = 5.0) -> None:
    """Keep the emulator's heap out of the collector's sight (`gc.freeze`) as it grows, with
    the sandbox's thresholds: a real API server's collector does not stop it for seconds."""
    gc.set_threshold(*GC_THRESHOLDS)
    while True:
        gc.freeze()
        await asyncio.sleep(every)


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
    sim = n - args.netns_node  # the nodes in workers: all but a netns node
    netns: NetnsController | None = None
    kids, ports = children(
        kubeconfig, key_file, tmp, args.replicas, args.child_flags, args.scheduler_flags
    )
    started = False
    await server.start(host="127.0.0.1", port=0)
    settling = asyncio.create_task(settle_heap())
    try:
        seed(
            server,
            pool_cidr=NETNS_POOL if args.netns_node else POOL_CIDR,
            nodes=node_names(n),
            services=0,
        )
        seed_services(server, s)
        server.write_kubeconfig(kubeconfig)
        t0 = time.monotonic()
        workers = await start_workers(
            sim,
            count,
            kubeconfig=kubeconfig,
            key_file=key_file,
            tmp=tmp,
            real=args.real_node,
            probe_silence=args.node_probe_silence,
        )
        async with asyncio.timeout(60 + 0.2 * n):
            await asyncio.gather(*(w.registered for w in workers))
        if args.netns_node:  # after server.start(): the bed's relay needs the emulator's port
            netns = NetnsController(server, f"node-{n}", n, key_file, tmp)
            await netns.start()
            _, note = await _wait("the netns node", 60, lambda: (bool(netns.registered()), ""))
            print(f"  {netns.name}: a real controller on the netns bed {note}", flush=True)
        registered_s = time.monotonic() - t0
        print(f"  {n} nodes registered in {registered_s:.1f}s ({count} workers)", flush=True)
        heap_dir = scale_heap.arm(tmp) if args.heap else None
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

        patience = args.steady_wait or 120 + 0.05 * s + 0.1 * n
        _, unsteady = await _wait("steady state", patience, steady)
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
        netns0 = netns.sample() if netns else {}
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
        netns1 = netns.sample() if netns else {}
        rss = [rss_mb(p) for p in procs]
        leader = _leader(store)
        print(f"  window {elapsed:.1f}s done (load {load0} -> {_load()})", flush=True)
        if heap_dir is not None:
            scale_heap.disarm()
            for line in await scale_heap.report(heap_dir, {**pids}):
                print(line, flush=True)
        for r, (spy, out) in enumerate(spies, start=1):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    await spy.wait()
            for line in spy_summary(out, f"scheduler-{r}"):
                print(line, flush=True)
        owner = node_owners(workers, count, sim, args.real_node)
        fos = await failovers(store, owner, args.failovers)
        boot = startup(tmp, kids_started_at, args.replicas)
        restarted = RequestTally(server, f"restarted-allocator-{secrets.token_hex(8)}")
        server.write_kubeconfig(tmp / "alloc-2.kubeconfig", token=restarted.token)
        restart = await allocator_restart(
            kids,
            lambda: allocator_child(
                tmp / "alloc-2.kubeconfig", tmp / "alloc-2.log", free_port(), args.child_flags
            ),
            tally,
            tmp,
            _allocator_writes,
            lambda: _own_writes(restarted.by_verb),
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
        if netns is not None:
            await netns.stop()
        await server.stop()
        settling.cancel()
    passes = PassTimes.between(passes0, passes1)
    writes = after.writes - before.writes
    per_s = {k: v / elapsed for k, v in writes.items()}
    rest = sum(per_s.values()) - per_s.get(LEASES, 0.0) - sum(per_s.get(k, 0.0) for k in EVENTS)
    blocks_ = worker_blocks(sim, count, args.real_node)
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
    simulated = sim - args.real_node
    node_total = Counter[str]()  # since their start: requests per simulated node
    for (_, _, is_real), b in zip(blocks_, samples1, strict=True):
        node_total.update({} if is_real else b["requests"])
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
        "netns": netns_figures(netns0, netns1, elapsed) if netns else None,
        "node_requests_total": {k: v / simulated for k, v in sorted(node_total.items())},
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
        "scheduler_flags": args.scheduler_flags,
        "node_probe_silence": args.node_probe_silence,
        "term_starts": term_starts(tmp, args.replicas),
    }


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


def _allocator_writes(before: Tally, after: Tally) -> int:
    """Writes to Services and IpClaims between two tallies (the allocator's kinds)."""
    return sum(after.writes[k] - before.writes[k] for k in (SERVICES, IPCLAIMS))


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _own_writes(by_verb: Counter[str]) -> int:
    """One client's requests (`RequestTally`: "VERB resource[/sub]") that write a Service or
    an IpClaim, its status included."""
    total = 0
    for key, n in by_verb.items():
        verb, _, path = key.partition(" ")
        if verb in WRITE_VERBS and path.partition("/")[0] in ("services", "ipclaims"):
            total += n
    return total


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
