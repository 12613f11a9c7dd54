"""Simulated nodes in worker processes, for fleets one loop cannot carry (a thousand nodes).

A simulated node costs ~1.5 ms of CPU per second (ten liveness replies, an API check, its
reconcile passes, the emulator's share): a thousand need more than the one core a Python
process gets. `WorkerFleet` splits the nodes into blocks, each a `Fleet` in a process of its
own (``python -m eipctl.sandbox.workers PARENT_PID``): the same `SimulatedNode`s (the real
`NodeController`, in-memory links, liveness over real UDP on 127.1.x.y from the node's
index), talking to the sandbox's API over HTTP like every other process. Each worker's
nodes share one link segment: duplicate-address probes and announcements reach the nodes of
the same worker only (a node that dies takes its addresses with it, so a failover never
needs the other worker's segment).

The worker's spec (names, first index, kubeconfig, key file, log) is its second argument.
The parent speaks to it over its stdin and stdout, one JSON object a line: requests
(``{"id", "op", "node"}``: kill, revive, samples) answered by ``{"id", "ok", "result"}``
or ``{"id", "ok", "error"}``; the worker also sends ``{"event": "booted"}`` once its nodes
have registered and ``{"event": "held", "node", "addresses"}`` when a node's addresses
change (looked at every `HELD_INTERVAL`), which is what `holder_of` and the view read.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from eipctl.core.liveness_wire import Keyring
from eipctl.sandbox.nodes import Fleet, NodeError, NodeState, NodeStatus, unknown_node

log = structlog.get_logger(__name__)

HELD_INTERVAL = 0.05
GC_THRESHOLDS = (10_000, 20, 100)  # as the session's (`session.GC_THRESHOLDS`)
STOP_TIMEOUT = 10.0
SAMPLES: tuple[tuple[str, dict[str, str]], ...] = (
    ("eipctl_liveness_replies_sent_total", {}),
    ("eipctl_controller_fence_transitions_total", {"kind": "fence"}),
)
"""The metrics a worker reports on request (`WorkerFleet.samples`): bench_api_load's."""


def blocks(count: int, workers: int) -> list[tuple[int, int]]:
    """`count` nodes in `workers` contiguous blocks as (first index, size), sizes within one
    of each other; fewer blocks when there are fewer nodes than workers."""
    workers = max(1, min(workers, count))
    size, extra = divmod(count, workers)
    out, first = [], 1
    for k in range(workers):
        n = size + (k < extra)
        out.append((first, n))
        first += n
    return out


# -- the parent's side ---------------------------------------------------------------------
class WorkerNode:
    """A node of a worker, as the session sees it (what `SimulatedNode` offers it)."""

    def __init__(self, worker: Worker, name: str, index: int) -> None:
        self.worker = worker
        self.name = name
        self.index = index
        self.state = NodeState.KILLED
        self.boots = 0
        self.held: list[str] = []
        self._lock = asyncio.Lock()

    @property
    def mac(self) -> str:
        return f"02:e1:00:00:{(self.index >> 8) & 0xFF:02x}:{self.index & 0xFF:02x}"

    async def addresses(self) -> list[str]:
        return list(self.held) if self.state is NodeState.UP else []

    async def status(self) -> NodeStatus:
        return NodeStatus(self.name, self.state, await self.addresses(), self.boots, self.mac)

    async def kill(self) -> list[str]:
        async with self._lock:
            if self.state is not NodeState.UP:
                raise NodeError(f"{self.name} is not running")
            self.state = NodeState.KILLED
            held: list[str] = await self.worker.call("kill", self.name)
            self.held = []
            return held

    async def revive(self) -> None:
        async with self._lock:
            if self.state is NodeState.UP:
                raise NodeError(f"{self.name} is already up")
            await self.worker.call("revive", self.name)
            self.state = NodeState.UP
            self.boots += 1


class Worker:
    """One worker process and the requests in flight to it."""

    def __init__(self, spec: dict[str, Any], log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.nodes: dict[str, WorkerNode] = {}
        self.booted = asyncio.Event()
        self.proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next = 0
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        with self.log_path.open("ab") as err:  # the child keeps its own copy of the fd
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "eipctl.sandbox.workers",
                str(os.getpid()),
                json.dumps(self.spec),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                limit=2**20,
            )
        self._reader = asyncio.create_task(self._read(), name=f"worker-{self.spec['first']}")

    def _send(self, obj: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")

    async def call(self, op: str, node: str | None = None) -> Any:
        if self.proc is None or self.proc.returncode is not None:
            raise NodeError(f"the worker of {node or 'these nodes'} is not running")
        self._next += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        self._send({"id": self._next, "op": op, "node": node})
        return await future

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                msg = json.loads(line)
                if msg.get("event") == "held":
                    node = self.nodes.get(msg["node"])
                    if node is not None:
                        node.held = list(msg["addresses"])
                elif msg.get("event") == "booted":
                    self.booted.set()
                elif (future := self._pending.pop(int(msg.get("id", 0)), None)) is not None:
                    if future.done():
                        continue
                    if msg.get("ok"):
                        future.set_result(msg.get("result"))
                    else:
                        future.set_exception(NodeError(str(msg.get("error"))))
        finally:
            self.booted.set()  # a worker that died booted nothing more
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(NodeError("the worker process exited"))
            self._pending.clear()

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()  # end of requests: the worker stops its nodes and exits
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await self._reader


class WorkerFleet:
    """The simulated nodes in `workers` processes; the interface of `Fleet`."""

    def __init__(
        self,
        names: list[str],
        *,
        workers: int,
        kubeconfig: Path,
        key_file: Path,
        state_dir: Path,
        log_level: str,
    ) -> None:
        self.workers: list[Worker] = []
        self.nodes: dict[str, WorkerNode] = {}
        for first, size in blocks(len(names), workers):
            mine = names[first - 1 : first - 1 + size]
            spec = {
                "names": mine,
                "first": first,
                "kubeconfig": str(kubeconfig),
                "key_file": str(key_file),
                "log": str(state_dir / f"nodes-{first}-{first + size - 1}.log"),
                "log_level": log_level,
            }
            worker = Worker(spec, state_dir / f"nodes-{first}-{first + size - 1}.err")
            for index, name in enumerate(mine, start=first):
                worker.nodes[name] = self.nodes[name] = WorkerNode(worker, name, index)
            self.workers.append(worker)

    def get(self, name: str) -> WorkerNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise unknown_node(name, list(self.nodes)) from None

    async def start(
        self, stop: asyncio.Event | None = None, *, after_wave: Callable[[], None] | None = None
    ) -> None:
        """Start the workers; each boots its nodes a wave at a time (`Fleet.start`).
        Returns once every worker has booted its nodes (or `stop` is set)."""
        for worker in self.workers:
            await worker.start()
            for node in worker.nodes.values():
                node.state = NodeState.UP
                node.boots = 1
        waits = [asyncio.ensure_future(w.booted.wait()) for w in self.workers]
        stopped = asyncio.ensure_future((stop or asyncio.Event()).wait())
        try:
            while not stopped.done() and not all(w.done() for w in waits):
                await asyncio.wait([*waits, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in [*waits, stopped]:
                waiting.cancel()

    def holder_of(self, ip: str) -> str | None:
        for node in self.nodes.values():
            if node.state is NodeState.UP and ip in node.held:
                return node.name
        return None

    async def statuses(self) -> list[NodeStatus]:
        return [await n.status() for n in self.nodes.values()]

    async def samples(self) -> dict[str, float]:
        """The workers' `SAMPLES`, summed (metric name -> value)."""
        total: dict[str, float] = {}
        for worker in self.workers:
            with contextlib.suppress(NodeError):
                for name, value in (await worker.call("samples")).items():
                    total[name] = total.get(name, 0.0) + float(value)
        return total

    async def stop(self) -> None:
        await asyncio.gather(*(w.stop() for w in self.workers), return_exceptions=True)
        for node in self.nodes.values():
            node.state = NodeState.KILLED
            node.held = []


# -- the worker's side ---------------------------------------------------------------------
class Channel:
    """Lines to the parent on stdout (nothing else may write there)."""

    def __init__(self) -> None:
        self._out = os.fdopen(os.dup(1), "wb", buffering=0)

    def send(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj).encode() + b"\n")


async def _watch_held(fleet: Fleet, channel: Channel) -> None:
    """Tell the parent whenever a node's addresses change (added, removed, expired). Only
    the nodes that added an address since they were last seen empty are looked at (with
    ten Services, ten or so of the worker's hundreds)."""
    last: dict[str, list[str]] = {}
    while True:
        for name in fleet.holding | last.keys():
            held = await fleet.nodes[name].addresses()
            if held != last.get(name, []):
                channel.send({"event": "held", "node": name, "addresses": held})
            if held:
                last[name] = held
            else:
                last.pop(name, None)
                fleet.holding.discard(name)
        await asyncio.sleep(HELD_INTERVAL)


async def _handle(fleet: Fleet, msg: dict[str, Any]) -> Any:
    from eipctl.metrics import REGISTRY

    op = msg.get("op")
    if op == "kill":
        return await fleet.get(str(msg.get("node"))).kill()
    if op == "revive":
        await fleet.get(str(msg.get("node"))).revive()
        return None
    if op == "samples":
        return {name: REGISTRY.get_sample_value(name, labels) or 0.0 for name, labels in SAMPLES}
    raise NodeError(f"unknown request {op!r}")


async def serve(
    spec: dict[str, Any], keyring: Keyring, lines: asyncio.StreamReader, channel: Channel
) -> None:
    """Boot the nodes, answer the parent until it closes our stdin, stop the nodes."""
    fleet = Fleet(
        list(spec["names"]),
        kubeconfig=Path(spec["kubeconfig"]),
        keyring=keyring,
        first=int(spec["first"]),
    )
    gc.set_threshold(*GC_THRESHOLDS)
    held = asyncio.create_task(_watch_held(fleet, channel))
    tasks: set[asyncio.Task[None]] = set()

    async def answer(msg: dict[str, Any]) -> None:
        try:
            channel.send({"id": msg.get("id"), "ok": True, "result": await _handle(fleet, msg)})
        except NodeError as exc:
            channel.send({"id": msg.get("id"), "ok": False, "error": str(exc)})

    async def boot() -> None:
        await fleet.start(after_wave=gc.freeze)
        gc.freeze()
        channel.send({"event": "booted"})

    booting = asyncio.create_task(boot())
    try:
        while line := await lines.readline():
            task = asyncio.create_task(answer(json.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        booting.cancel()
        held.cancel()
        await asyncio.gather(booting, held, *tasks, return_exceptions=True)
        await fleet.stop()


async def _serve_stdin(spec: dict[str, Any], keyring: Keyring, channel: Channel) -> int:
    lines = asyncio.StreamReader(limit=2**20)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(lines), sys.stdin)
    await serve(spec, keyring, lines, channel)
    return 0


def main(argv: list[str]) -> int:
    """``PARENT_PID SPEC``: SPEC is the JSON object `WorkerFleet` writes."""
    import logging

    from eipctl.runtime.logsetup import configure_logging
    from eipctl.sandbox.child import die_with_parent
    from eipctl.sandbox.limits import raise_file_limit

    if len(argv) != 2 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m eipctl.sandbox.workers PARENT_PID SPEC\n")
        return 2
    if not die_with_parent(int(argv[0])):
        return 1
    spec = json.loads(argv[1])
    keyring = Keyring.from_text(Path(spec["key_file"]).read_text(encoding="utf-8"))
    raise_file_limit(len(spec["names"]))
    channel = Channel()
    with Path(spec["log"]).open("a", buffering=1, encoding="utf-8") as stream:
        os.dup2(stream.fileno(), 1)  # a stray print must not corrupt the channel
        configure_logging("text", spec["log_level"], "sandbox-nodes")
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=stream))
        logging.basicConfig(level=logging.WARNING, stream=stream, force=True)
        return asyncio.run(_serve_stdin(spec, keyring, channel))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
