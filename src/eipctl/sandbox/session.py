"""`Sandbox`: one run of `eipctl sandbox`, from boot to the final summary.

Boot order: the API emulator (in this process), CRDs, pool, Nodes and demo Services, the
kubeconfigs and the liveness key (a random one per run, ``<state dir>/liveness.key``), the
control socket, the simulated nodes' controllers (tasks in this loop, on in-memory links,
answering liveness probes on loopback; past `NODES_PER_PROCESS` nodes the same in worker
processes; with --netns, processes in namespaces), then the
allocator and scheduler (child processes; the scheduler probes the nodes with the same key,
from the control namespace with --netns). Shutdown runs the other way round: no more
control requests, children stopped (SIGTERM, then SIGKILL), controllers stopped, emulator
stopped, socket removed.

With --metrics every process serves /metrics on a loopback port of its own: the allocator and
the scheduler (their --metrics-bind-address), and this process, whose registry holds the
metrics of the simulated nodes' controllers it runs (all of them summed on one registry, as
one controller would count; the nodes of worker processes or namespaces are not in it). The
addresses are in ``<state dir>/metrics.json`` (``{"allocator": "127.0.0.1:PORT", ...}``) and
in `status`: point a Prometheus at them (docs/metrics.md, "Dashboard").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import TextIO

import structlog

from eipctl.core.liveness_wire import Keyring
from eipctl.kube.client import IPCLAIMS, IPNODES, SERVICES, KubeApi, connect
from eipctl.kube.errors import ApiError
from eipctl.runtime.config import SandboxSettings
from eipctl.runtime.health import Health
from eipctl.runtime.values import BindAddress
from eipctl.sandbox.boot import LOCAL_DEMO, NODE_PREFIX, move_local_endpoint, node_names, seed
from eipctl.sandbox.children import Child, Children, component_argv
from eipctl.sandbox.control import ControlServer, Reply, Request
from eipctl.sandbox.netns import NetnsFleet, write_node_kubeconfig
from eipctl.sandbox.nodes import Fleet, NodeError, NodeState
from eipctl.sandbox.view import LiveView, NodeLine, Snapshot, render, rows_from
from eipctl.sandbox.workers import WorkerFleet
from kubemu import ApiServer

log = structlog.get_logger(__name__)

REFRESH_INTERVAL = 0.5
CHILD_GRACE = 5.0
NODES_READY_TIMEOUT = 20.0
NODES_READY_PER_NODE = 0.05  # the nodes that stalled a boot wave may still be registering
NODES_READY_POLL = 0.1  # per 100 nodes
NODES_READY_POLL_MAX = 1.0
LIVENESS_KEY = "liveness.key"
METRICS_FILE = "metrics.json"
METRICS_HOST = "127.0.0.1"
HISTORY_WINDOW = 5000
HISTORY_PER_NODE = 10  # boot writes a few events per node; a watch should not fall out
GC_THRESHOLDS = (10_000, 20, 100)
"""The collector's thresholds while a sandbox runs (Python's are 700, 10, 10): a full
collection walks every object with the loop stopped, and with hundreds of nodes it came
several times a minute and took up to 0.75 s; a reply that late makes a node look dead
(benchmarks/bench_api_load.py, 300 nodes: GC 4.2 s of every 20 s -> 0.3 s)."""
NODES_PER_PROCESS = 300
"""Simulated nodes one process (one core) carries with room to spare (~1.5 ms of CPU per
node per second, docs/benchmarks.md); beyond, the nodes move to worker processes."""


def node_workers(nodes: int, cpus: int | None = None) -> int:
    """Worker processes for `nodes` simulated nodes: none (this process) up to
    `NODES_PER_PROCESS`, else enough for that many each, at most one per CPU and at least
    two (this process keeps the API emulator)."""
    if nodes <= NODES_PER_PROCESS:
        return 0
    cpus = cpus if cpus is not None else os.cpu_count() or 1
    return max(2, min(cpus, -(-nodes // NODES_PER_PROCESS)))


def free_port(host: str = METRICS_HOST) -> int:
    """A TCP port nobody listens on now (a child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def write_key(path: Path, text: str) -> None:
    """`text` into `path`, readable by its owner only (also when the file was there)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text + "\n")


class Sandbox:
    def __init__(
        self, settings: SandboxSettings, *, out: TextIO, tty: bool, workers: int | None = None
    ) -> None:
        """``workers``: processes for the simulated nodes (0: this one); None chooses
        (`node_workers`). Not used with --netns, whose nodes are processes already."""
        self.settings = settings
        self.state_dir = Path(settings.state_dir).absolute()
        self.kubeconfig = self.state_dir / "kubeconfig"
        # the scheduler signs its probes with it, the simulated nodes answer with it
        self.liveness_key = self.state_dir / LIVENESS_KEY
        self._key_text = secrets.token_urlsafe(32)
        # plain HTTP on loopback, no token: kubectl sends no bearer token over plain HTTP,
        # and TLS would need the openssl binary (see docs/sandbox.md)
        self.server = ApiServer(
            history_window=max(HISTORY_WINDOW, HISTORY_PER_NODE * settings.nodes),
            bookmark_interval=5.0,
        )
        self.fleet: Fleet | NetnsFleet | WorkerFleet
        if settings.netns:
            self.fleet = NetnsFleet(
                node_names(settings.nodes),
                state_dir=self.state_dir,
                upstream=("127.0.0.1", 0),  # the API's port, once it listens
                log_level=settings.log_level,
            )
        elif (count := node_workers(settings.nodes) if workers is None else workers) > 0:
            self.fleet = WorkerFleet(
                node_names(settings.nodes),
                workers=count,
                kubeconfig=self.kubeconfig,
                key_file=self.liveness_key,
                state_dir=self.state_dir,
                log_level=settings.log_level,
            )
        else:
            self.fleet = Fleet(
                node_names(settings.nodes),
                kubeconfig=self.kubeconfig,
                keyring=Keyring.from_text(self._key_text),
            )
        # where each process serves /metrics (--metrics); "controllers" is this process
        self.metrics: dict[str, str] = {}
        if settings.metrics:
            self.metrics = {
                name: f"{METRICS_HOST}:{free_port()}" for name in ("allocator", "scheduler")
            }
        self._metrics_server: Health | None = None
        self.children = Children(
            [
                Child(
                    name,
                    component_argv(
                        name,
                        self.kubeconfig,
                        settings.log_level,
                        liveness_key_file=self.liveness_key if name == "scheduler" else None,
                        metrics_bind_address=self.metrics.get(name, "0"),
                    ),
                    self.state_dir / f"{name}.log",
                )
                for name in ("allocator", "scheduler")
            ]
        )
        self.scheduler = next(c for c in self.children.children if c.name == "scheduler")
        self.control = ControlServer(self.state_dir, self.handle)
        self.out = out
        self.view = LiveView(out, tty=tty)
        self.started = time.monotonic()
        self.kills = 0
        self.revives = 0
        self._api: KubeApi | None = None
        self._kubeconfig_out = Path(settings.kubeconfig_out)
        self._key_tasks: set[asyncio.Task[Reply]] = set()
        self._gc_before: tuple[int, int, int] | None = None

    # -- boot and shutdown ---------------------------------------------------------------
    async def boot(self, stop: asyncio.Event) -> None:
        """Everything up; on failure, whatever was started is stopped again. `stop` cuts
        the wait for the nodes short."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)
        write_key(self.liveness_key, self._key_text)
        await self.control.start()
        try:
            await self.server.start(host="127.0.0.1", port=self.settings.port)
            seed(
                self.server,
                pool_cidr=self.settings.pool_cidr,
                nodes=list(self.fleet.nodes),
                services=self.settings.services,
            )
            self.server.write_kubeconfig(self.kubeconfig)
            out = self.server.write_kubeconfig(self.settings.kubeconfig_out)
            self._api = api = await connect(str(self.kubeconfig), request_timeout=5.0)
            if isinstance(self.fleet, NetnsFleet):
                self.fleet.upstream = (self.server.host, self.server.port)
                write_node_kubeconfig(self.server, self.fleet.node_kubeconfig)
            # what boot builds lives as long as the sandbox: out of the collector's sight
            # (gc.freeze), a full collection no longer walks every node's controller and
            # clients (~400 ms at 200 nodes); and collections come less often
            self._gc_before = gc.get_threshold()
            gc.set_threshold(*GC_THRESHOLDS)
            if isinstance(self.fleet, Fleet):
                await self.fleet.start(stop, after_wave=gc.freeze)
            elif isinstance(self.fleet, WorkerFleet):
                await self.fleet.start(stop)
            else:
                await self.fleet.start()
            await self._wait_for_nodes(api, stop)
            gc.freeze()
            if isinstance(self.fleet, NetnsFleet):  # probes reach the nodes from there only
                self.fleet.adopt_scheduler(self.scheduler)
            self.children.start()
            if self.settings.metrics:
                await self._serve_metrics()
        except BaseException:
            await self.shutdown()
            raise
        self.started = time.monotonic()
        self._kubeconfig_out = out
        self.set_header(keys=False)
        log.info("sandbox.started", api=self.server.url, kubeconfig=str(out), pid=os.getpid())

    async def _serve_metrics(self) -> None:
        """This process' /metrics (its simulated nodes' controllers), then metrics.json."""
        self._metrics_server = Health()
        off = BindAddress("", 0, enabled=False)
        await self._metrics_server.start(BindAddress(METRICS_HOST, 0), off)
        self.metrics["controllers"] = f"{METRICS_HOST}:{self._metrics_server.ports()[0]}"
        path = self.state_dir / METRICS_FILE
        path.write_text(json.dumps(self.metrics, indent=2, sort_keys=True) + "\n")

    def set_header(self, *, keys: bool) -> None:
        """The lines above the table on a terminal: where things are, what to try."""
        self.view.header = [
            f"eipctl sandbox: API {self.server.url}, {len(self.fleet.nodes)} nodes, "
            f"pool {self.settings.pool_cidr}, logs in {self.state_dir}",
            f"  try: kubectl --kubeconfig {self._kubeconfig_out} get ipclaims",
            f"       eipctl sandbox kill-node NODE{self._state_flag()}  (or revive-node)",
            f"       eipctl sandbox move-endpoint NODE{self._state_flag()}  (a Local Service)",
            "  keys: 1-9 kill or revive node-1..9, q stops" if keys else "  Ctrl-C stops",
            "",
        ]

    def on_key(self, key: str, stop: asyncio.Event) -> None:
        """`q` stops; a digit kills node-N if it is up, revives it otherwise."""
        if key in ("q", "Q"):
            stop.set()
            return
        name = f"{NODE_PREFIX}{key}"
        if not key.isdigit() or name not in self.fleet.nodes:
            return
        up = self.fleet.get(name).state is NodeState.UP
        req = {"action": "kill-node" if up else "revive-node", "node": name}
        task = asyncio.create_task(self.handle(req), name=f"key-{key}")
        self._key_tasks.add(task)
        task.add_done_callback(self._key_tasks.discard)

    async def _wait_for_nodes(self, api: KubeApi, stop: asyncio.Event) -> None:
        """Give the nodes time to register their IpNodes before the scheduler starts, so
        the first placements spread over all of them (claims never move back by design)."""
        want = set(self.fleet.nodes)
        timeout = max(NODES_READY_TIMEOUT, NODES_READY_PER_NODE * len(want))
        # a list of every IpNode is not free for the emulator, which the booting nodes need
        poll = min(NODES_READY_POLL_MAX, NODES_READY_POLL * max(1, len(want) / 100))
        try:
            async with asyncio.timeout(timeout):
                while not stop.is_set():
                    with contextlib.suppress(ApiError):
                        items = (await api.list(IPNODES)).items
                        beating = {
                            str(n["metadata"]["name"])
                            for n in items
                            if (n.get("status") or {}).get("heartbeat")
                        }
                        if want <= beating:
                            return
                    await asyncio.sleep(poll)
        except TimeoutError:
            log.warning("sandbox.nodes.slow", waited=timeout)

    def _state_flag(self) -> str:
        default = SandboxSettings().state_dir
        return (
            "" if self.settings.state_dir == default else f" --state-dir {self.settings.state_dir}"
        )

    async def shutdown(self) -> None:
        await self.control.close()
        await asyncio.gather(*self._key_tasks, return_exceptions=True)
        await self.children.stop(CHILD_GRACE)
        if self._metrics_server is not None:
            await self._metrics_server.stop()
            self._metrics_server = None
            (self.state_dir / METRICS_FILE).unlink(missing_ok=True)
        await self.fleet.stop()
        if self._api is not None:
            with contextlib.suppress(Exception):
                await self._api.close()
            self._api = None
        await self.server.stop()
        if self._gc_before is not None:  # the process may go on (tests, benchmarks)
            gc.unfreeze()
            gc.set_threshold(*self._gc_before)
            self._gc_before = None
        log.info("sandbox.stopped")

    # -- the live loop -------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Refresh the view until `stop` is set or --duration has passed."""
        duration = self.settings.duration
        deadline = self.started + duration if duration > 0 else None
        while not stop.is_set():
            await self.refresh()
            wait = REFRESH_INTERVAL
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await stop.wait()
        await self.refresh()

    async def snapshot(self) -> Snapshot | None:
        """The state as the API and the simulated links show it; None if the API did not
        answer (the previous view stays)."""
        if self._api is None:
            return None
        try:
            services = await self._api.list(SERVICES)
            claims = await self._api.list(IPCLAIMS)
        except ApiError as exc:
            log.info("view.refresh.failed", error=repr(exc))
            return None
        nodes = tuple(
            NodeLine(s.name, s.state.value, len(s.addresses)) for s in await self.fleet.statuses()
        )
        rows = rows_from(services.items, claims.items, self.fleet.holder_of)
        return Snapshot(time.monotonic() - self.started, rows, nodes, self._child_notes())

    def _child_notes(self) -> tuple[str, ...]:
        """A line per child process that has exited since the sandbox started it."""
        return tuple(
            f"{c.name} exited {c.starts - 1 + (not c.running)} time(s), see {c.log_path}"
            for c in self.children.statuses()
            if c.starts > 1 or (c.starts == 1 and not c.running)
        )

    async def refresh(self) -> None:
        snap = await self.snapshot()
        if snap is not None:
            self.view.update(snap)

    def summary(self) -> list[str]:
        """The final words: the last table and one line of totals."""
        snap = self.view.last
        lines = [] if snap is None or self.view.tty else render(snap)
        elapsed = time.monotonic() - self.started
        if snap is None:
            lines.append(f"sandbox stopped after {elapsed:.1f}s")
            return lines
        up = sum(1 for n in snap.nodes if n.state == NodeState.UP.value)
        lines.append(
            f"sandbox stopped after {elapsed:.1f}s: {snap.with_ip}/{snap.services} services "
            f"had an IP, {snap.bound} claims Bound, {up}/{len(snap.nodes)} nodes up, "
            f"{self.kills} kill(s), {self.revives} revive(s)"
        )
        return lines

    # -- control requests ------------------------------------------------------------------
    async def handle(self, req: Request) -> Reply:
        action = req.get("action")
        if action == "status":
            return {"ok": True, "message": "\n".join(await self.status_lines())}
        if action == "move-endpoint":
            return self._move_endpoint(str(req.get("node") or ""))
        if action not in ("kill-node", "revive-node"):
            return {"ok": False, "message": f"unknown action {action!r}"}
        try:
            node = self.fleet.get(str(req.get("node") or ""))
            if action == "kill-node":
                dropped = await node.kill()
                self.kills += 1
                held = ", ".join(dropped) or "no addresses"
                message = f"{node.name} killed: liveness replies stopped, dropped {held}"
            else:
                await node.revive()
                self.revives += 1
                message = f"{node.name} revived: controller started, answering probes again"
        except NodeError as exc:
            return {"ok": False, "message": str(exc)}
        self.view.message(f"[{time.monotonic() - self.started:6.1f}s] {message}")
        return {"ok": True, "message": message}

    def _move_endpoint(self, name: str) -> Reply:
        """The Local demo Service's pod now runs on node ``name``: its IP follows."""
        if name not in self.fleet.nodes:
            return {
                "ok": False,
                "message": f"no node {name!r} (nodes: {', '.join(self.fleet.nodes)})",
            }
        made = move_local_endpoint(self.server, name)
        message = (
            f"{LOCAL_DEMO} (externalTrafficPolicy: Local) "
            + ("created, its pod on " if made else "pod moved to ")
            + f"{name}: its IP follows (kubectl get ipclaims)"
        )
        self.view.message(f"[{time.monotonic() - self.started:6.1f}s] {message}")
        return {"ok": True, "message": message}

    async def status_lines(self) -> list[str]:
        lines = [f"API {self.server.url}, kubeconfig {self.settings.kubeconfig_out}"]
        snap = await self.snapshot() or self.view.last
        if snap is not None:
            lines += render(snap)
        for n in await self.fleet.statuses():
            held = ", ".join(n.addresses) or "-"
            lines.append(f"  {n.name}: {n.state.value}, mac {n.mac}, boots {n.boots}, holds {held}")
        for c in self.children.statuses():
            state = f"running, pid {c.pid}" if c.running else f"exited {c.last_exit}"
            lines.append(f"  {c.name}: {state}, starts {c.starts}, log {c.log_path}")
        for name, address in sorted(self.metrics.items()):
            lines.append(f"  metrics of {name}: http://{address}/metrics")
        return lines
