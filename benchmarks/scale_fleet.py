"""bench_scale.py's processes: the simulated nodes' workers and eipctl's own children.

`Worker` speaks JSON lines with one `eipctl.sandbox.scale_worker` process (its nodes'
registration, samples, a node killed); `children` makes the allocator and the scheduler
replicas, each serving /metrics on a loopback port of its own; `seed_services` fills the
emulator with the Services the allocator serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from scale_phases import free_port


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
    n: int,
    count: int,
    *,
    kubeconfig: Path,
    key_file: Path,
    tmp: Path,
    real: bool,
    probe_silence: float | None = None,
) -> list[Worker]:
    workers = []
    for k, (first, size, is_real) in enumerate(worker_blocks(n, count, real)):
        spec: dict[str, Any] = {
            "kubeconfig": str(kubeconfig),
            "key_file": str(key_file),
            "first": first,
            "count": size,
            "real": is_real,
            "log": str(tmp / f"worker-{k}.log"),
        }
        if probe_silence is not None:
            spec["probe_silence"] = probe_silence
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
    kubeconfig: Path,
    key_file: Path,
    tmp: Path,
    replicas: int,
    extra: str,
    scheduler_extra: str = "",
) -> tuple[Any, dict[str, int]]:
    """The allocator and the scheduler replicas (not started), and the port each serves its
    /metrics on (loopback). ``extra``: flags for all of them; ``scheduler_extra``: for the
    scheduler replicas only."""
    from eipctl.sandbox.children import Children

    ports = {"allocator": free_port()}
    made = [allocator_child(kubeconfig, tmp / "alloc.log", ports["allocator"], extra)]
    for r in range(1, replicas + 1):
        name = f"scheduler-{r}"
        ports[name] = free_port()
        flags = f"{extra} {scheduler_extra}".strip()
        made.append(_child(name, "scheduler", kubeconfig, tmp, ports[name], flags, key_file))
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


def node_owners(workers: list[Worker], count: int, n: int, real_node: bool) -> dict[str, Worker]:
    """Each simulated node's worker (the real node is there to be compared, not killed)."""
    owner = {}
    for k, (first, size, real) in enumerate(worker_blocks(n, count, real_node)):
        for i in range(first, first + size):
            if not real:
                owner[f"node-{i}"] = workers[k]
    return owner
