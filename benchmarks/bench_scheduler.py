"""Scheduler failover and throughput: real `eipctl scheduler` processes, default flags.

    python benchmarks/bench_scheduler.py [--claims 1000] [--nodes 50] [--deaths 5]
                                         [--leader-deaths 3] [--liveness-timeout SECONDS]

The API emulator runs in this process with N simulated IpNodes whose heartbeat counter is
bumped every 250 ms (the controller default) straight in the emulator's store; 100 Services
use the claims' IPs (as the allocator would leave them), so nothing is an orphan. Schedulers
run as subprocesses (`python -m eipctl scheduler`, uvloop, default timing flags) and are seen
only through the API, all times on this process's monotonic clock.

Prints:
- placements/s: 1,000 new claims created at once -> all placed (spec) / all Scheduled (status);
- node death: a node's last heartbeat -> every claim it held placed elsewhere
  (target: liveness-timeout + < 200 ms);
- leader on the dead node: the scheduler leader is SIGKILLed when the node's heartbeat stops,
  a standby takes over (target: < 2 s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from eipctl.core.naming import claim_name_for
from eipctl.runtime.config import SchedulerSettings
from kubemu import ApiServer

GROUP = "eipctl.io"
CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"
HEARTBEAT = 0.25


class Bed:
    def __init__(
        self, srv: ApiServer, kubeconfig: Path, n_nodes: int, extra_flags: list[str]
    ) -> None:
        self.extra_flags = extra_flags
        self.srv = srv
        self.kubeconfig = kubeconfig
        self.nodes = [f"node-{i:02d}" for i in range(n_nodes)]
        self.alive = set(self.nodes)
        self.last_beat: dict[str, float] = {}
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self._beats: asyncio.Task[None] | None = None
        self._serial = 0
        self.log_file: Any = asyncio.subprocess.DEVNULL

    # --- nodes --------------------------------------------------------------------------
    def beat(self, name: str) -> None:
        obj = self.srv.store.get(GROUP, "ipnodes", name)
        status = obj.setdefault("status", {})
        status["heartbeat"] = int(status.get("heartbeat") or 0) + 1
        self.srv.store.update(GROUP, "ipnodes", obj, status=True)
        self.last_beat[name] = time.monotonic()

    async def _heartbeats(self) -> None:
        # each node on its own phase, like independent controllers
        offsets = {n: i * HEARTBEAT / len(self.nodes) for i, n in enumerate(self.nodes)}
        start = time.monotonic()
        tick = 0
        while True:
            tick += 1
            for name in sorted(self.nodes, key=offsets.__getitem__):
                due = start + tick * HEARTBEAT + offsets[name]
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if name in self.alive:
                    self.beat(name)

    def start_nodes(self) -> None:
        for name in self.nodes:
            self.srv.store.create(
                GROUP,
                "ipnodes",
                {"metadata": {"name": name, "labels": {}}, "spec": {"link": "eth0"}},
            )
            self.beat(name)
        self._beats = asyncio.create_task(self._heartbeats())

    # --- claims and Services ------------------------------------------------------------
    def create_claims(self, n: int) -> list[str]:
        ips = [f"198.51.{100 + i // 250}.{1 + i % 250}" for i in range(n)]
        for ip in ips:
            self.srv.store.create(
                GROUP,
                "ipclaims",
                {"metadata": {"name": claim_name_for(ip)}, "spec": {"ip": ip, "prefixLength": 32}},
            )
        for s in range(0, n, 10):
            chunk = ips[s : s + 10]
            self.srv.store.create(
                "",
                "services",
                {
                    "metadata": {
                        "name": f"svc-{s // 10}",
                        "namespace": "default",
                        "annotations": {"eipctl.io/allocated-ips": ",".join(chunk)},
                    },
                    "spec": {"ports": [{"port": 80}], "externalIPs": chunk},
                },
                "default",
            )
        return [claim_name_for(ip) for ip in ips]

    def placements(self) -> dict[str, tuple[str, str]]:
        return {
            c["metadata"]["name"]: (
                (c.get("spec") or {}).get("nodeName") or "",
                (c.get("status") or {}).get("phase") or "",
            )
            for c in self.srv.store.scan(GROUP, "ipclaims")
        }

    def node_of(self, name: str) -> str:
        obj = self.srv.store.find(GROUP, "ipclaims", name) or {}
        return str((obj.get("spec") or {}).get("nodeName") or "")

    def leader(self) -> str:
        lease = self.srv.store.find("coordination.k8s.io", "leases", "eipctl-scheduler", "default")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    # --- schedulers ---------------------------------------------------------------------
    async def start_scheduler(self) -> str:
        self._serial += 1
        identity = f"sched-{self._serial}"
        self.procs[identity] = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "eipctl",
            "scheduler",
            "--kubeconfig",
            str(self.kubeconfig),
            "--identity",
            identity,
            "--lease-namespace",
            "default",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--log-level",
            os.environ.get("BENCH_LOG_LEVEL", "warning"),
            *self.extra_flags,
            stdout=self.log_file,
            stderr=self.log_file,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return identity

    def kill(self, identity: str) -> None:
        self.procs[identity].send_signal(signal.SIGKILL)

    async def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._beats is not None:
            self._beats.cancel()


async def until(check: Any, limit: float, interval: float = 0.002) -> float:
    """Poll until check() is true (the state lives in another process: no Event to wait
    on); returns the monotonic time it first was."""
    async with asyncio.timeout(limit):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(interval)
    return time.monotonic()


async def node_death(bed: Bed, node: str, *, kill_leader: bool) -> tuple[float, int]:
    """Stop ``node``'s heartbeat (and SIGKILL the leader with it); seconds until its claims
    are all elsewhere, and how many there were."""
    held = {n for n, (node_, _) in bed.placements().items() if node_ == node}
    leader = bed.leader()
    bed.alive.discard(node)
    if kill_leader:
        bed.kill(leader)
    last = bed.last_beat[node]

    def moved() -> bool:
        return all(bed.node_of(n) not in ("", node) for n in held)

    done = await until(moved, limit=20)
    return done - last, len(held)


async def bench(args: argparse.Namespace) -> None:
    srv = ApiServer(history_window=200_000, bookmark_interval=5.0)
    await srv.start(host="127.0.0.1", port=0)
    await srv.load_crds_from_dir(CRDS)
    tmp = tempfile.TemporaryDirectory()
    flags = [f"--liveness-timeout={args.liveness_timeout}s"] if args.liveness_timeout else []
    bed = Bed(srv, srv.write_kubeconfig(Path(tmp.name) / "kubeconfig"), args.nodes, flags)
    liveness_timeout = args.liveness_timeout or SchedulerSettings().liveness_timeout
    if os.environ.get("BENCH_LOG"):
        bed.log_file = open(os.environ["BENCH_LOG"], "w")  # noqa: SIM115, ASYNC230
    try:
        bed.start_nodes()
        first = await bed.start_scheduler()
        await until(lambda: bed.leader() == first, limit=30, interval=0.02)
        await asyncio.sleep(1.5)  # informers synced, liveness settled

        t0 = time.monotonic()
        names = bed.create_claims(args.claims)
        created = time.monotonic()
        # listing 1,000 claims copies them all: poll gently so the emulator keeps its pace
        t_spec = await until(lambda: all(p[0] for p in bed.placements().values()), 120, 0.1)
        t_status = await until(
            lambda: all(p[1] == "Scheduled" for p in bed.placements().values()), 120, 0.1
        )
        print(
            f"initial placement of {len(names)} claims on {args.nodes} nodes "
            f"(created in {created - t0:.2f}s): all placed {t_spec - t0:.2f}s "
            f"({len(names) / (t_spec - t0):.0f} placements/s), all Scheduled "
            f"{t_status - t0:.2f}s ({len(names) / (t_status - t0):.0f} claims/s)"
        )

        await bed.start_scheduler()  # the standby
        await asyncio.sleep(3.0)  # its start-up (imports, lists) competes for the 2 cores
        deaths: list[float] = []
        for i in range(args.deaths):
            seconds, count = await node_death(bed, bed.nodes[i], kill_leader=False)
            deaths.append(seconds)
            print(
                f"  node death {i + 1}: {count} claims re-placed {seconds * 1000:.0f} ms "
                "after the last heartbeat"
            )
            await asyncio.sleep(1.0)
        over = statistics.median(deaths) - liveness_timeout
        print(
            f"node death -> claims re-placed (liveness-timeout {liveness_timeout:g}s): "
            f"median {statistics.median(deaths) * 1000:.0f} ms, max {max(deaths) * 1000:.0f} ms; "
            f"over the timeout: median {over * 1000:.0f} ms "
            f"(target < 200 ms)"
        )

        failovers: list[float] = []
        for i in range(args.leader_deaths):
            node = bed.nodes[args.deaths + i]
            seconds, count = await node_death(bed, node, kill_leader=True)
            failovers.append(seconds)
            print(
                f"  leader+node death {i + 1}: {count} claims re-placed "
                f"{seconds * 1000:.0f} ms after the last heartbeat"
            )
            await bed.start_scheduler()  # a new standby, as the Deployment would
            await asyncio.sleep(3.0)
        if failovers:
            print(
                "leader on the dead node -> claims re-placed: "
                f"median {statistics.median(failovers) * 1000:.0f} ms, "
                f"max {max(failovers) * 1000:.0f} ms (target < 2000 ms)"
            )
    finally:
        await bed.stop_all()
        await srv.stop()
        tmp.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--deaths", type=int, default=5)
    parser.add_argument("--leader-deaths", type=int, default=3)
    parser.add_argument(
        "--liveness-timeout", type=float, default=0.0, help="seconds; 0 = the scheduler's default"
    )
    args = parser.parse_args()
    uvloop.run(bench(args))


if __name__ == "__main__":
    main()
