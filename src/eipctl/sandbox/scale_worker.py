"""`python -m eipctl.sandbox.scale_worker PARENT_PID SPEC`: a process of `ScaleNode`s.

SPEC is a JSON object: ``{"kubeconfig", "key_file", "first", "count", "log", "real"?,
"probe_silence"?}`` (nodes ``node-<first>`` .. ``node-<first+count-1>``, each on
`nodes.liveness_address(index)`; ``probe_silence``: the controllers' --probe-silence in
seconds, to match schedulers run with another --liveness-timeout). The
process dies with its parent (PR_SET_PDEATHSIG, as `eipctl.sandbox.child`). With ``"real"``
the nodes are whole sandbox nodes (`RealNodes`) instead of `ScaleNode`s, for comparison. The
`ScaleNode`s run under uvloop, the whole nodes under asyncio's loop (as the controller).

It speaks JSON lines: on stdout ``{"event": "registered", "nodes": n}`` once every node has
registered its IpNode; on stdin requests ``{"id", "op", "node"?}`` answered on stdout by
``{"id", "ok", "result"}`` (or ``"error"``):

- ``kill`` ``node``: the node powers off (replies, heartbeat and API checks stop);
- ``samples``: ``{"replies", "requests": {verb: n}, "watches", "vouched", "registered"}``,
  counters since the start (the bench takes differences over its window);
- ``stop``: every node stops and the process exits.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import structlog
import uvloop

from eipctl.core.liveness_wire import Keyring
from eipctl.runtime.config import ControllerSettings
from eipctl.sandbox.child import die_with_parent
from eipctl.sandbox.limits import raise_file_limit
from eipctl.sandbox.scale_nodes import RequestCounts, ScaleFleet, replies_sent, shared_client
from eipctl.sandbox.workers import blocks

__all__ = ["blocks", "main", "node_flags", "serve", "spec_names"]

GC_THRESHOLDS = (10_000, 20, 100)  # as the sandbox's (`session.GC_THRESHOLDS`)


def node_flags(spec: dict[str, Any]) -> ControllerSettings | None:
    """The controllers' flags a spec asks for (None: their defaults)."""
    silence = spec.get("probe_silence")
    return None if silence is None else ControllerSettings(probe_silence=float(silence))


def spec_names(first: int, count: int) -> list[tuple[int, str]]:
    """(index, name) of the nodes of a worker whose block starts at `first`."""
    return [(i, f"node-{i}") for i in range(first, first + count)]


class RealNodes:
    """Whole sandbox nodes (`nodes.Fleet`: the real `NodeController` on an in-memory link) in
    place of `ScaleNode`s, behind the same interface and on the same counting client: what
    the benchmark compares its cheap nodes with (``"real": true`` in the spec)."""

    def __init__(self, kubeconfig: Path, keyring: Keyring, names: list[tuple[int, str]]) -> None:
        from eipctl.sandbox.nodes import Fleet

        self.counts = RequestCounts()
        self.kubeconfig = kubeconfig
        self.fleet = Fleet(
            [n for _, n in names], kubeconfig=kubeconfig, keyring=keyring, first=names[0][0]
        )

    async def start(self) -> None:
        # the fleet's shared client, made here with the counting session
        self.fleet.kube._client = await shared_client(self.kubeconfig, self.counts)
        await self.fleet.start()
        await asyncio.gather(*(n.wait_registered(30.0) for n in self.fleet.nodes.values()))

    def registered(self) -> int:
        return sum(
            1
            for n in self.fleet.nodes.values()
            if n.controller is not None and n.controller.registered.is_set()
        )

    def replies(self) -> float:
        return replies_sent()

    def vouched(self) -> int:
        return sum(
            1
            for n in self.fleet.nodes.values()
            if n.controller is not None and n.controller.fence.vouched_recently()
        )

    async def kill(self, name: str) -> None:
        await self.fleet.get(name).kill()

    async def stop(self) -> None:
        await self.fleet.stop()


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def _answer(fleet: ScaleFleet | RealNodes, req: dict[str, Any]) -> tuple[Any, bool]:
    """The result of one request, and whether the worker should stop."""
    op = req.get("op")
    if op == "kill":
        await fleet.kill(str(req["node"]))
        return None, False
    if op == "samples":
        return {
            "replies": fleet.replies(),
            "requests": dict(fleet.counts.by_verb),
            "watches": 1 if isinstance(fleet, ScaleFleet) else len(fleet.fleet.nodes),
            "vouched": fleet.vouched(),
            "registered": fleet.registered(),
        }, False
    if op == "stop":
        return None, True
    raise ValueError(f"unknown op {op!r}")


async def serve(spec: dict[str, Any], keyring: Keyring) -> None:
    names = spec_names(int(spec["first"]), int(spec["count"]))
    fleet: ScaleFleet | RealNodes
    if spec.get("real"):
        fleet = RealNodes(Path(spec["kubeconfig"]), keyring, names)
    else:
        fleet = ScaleFleet(Path(spec["kubeconfig"]), keyring, names, node_flags(spec))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        gc.set_threshold(*GC_THRESHOLDS)
        await fleet.start()
        gc.freeze()
        _emit({"event": "registered", "nodes": fleet.registered()})
        while line := await reader.readline():
            req = json.loads(line)
            try:
                result, done = await _answer(fleet, req)
                _emit({"id": req.get("id"), "ok": True, "result": result})
            except Exception as exc:
                _emit({"id": req.get("id"), "ok": False, "error": repr(exc)})
                continue
            if done:
                break
    finally:
        await fleet.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m eipctl.sandbox.scale_worker PARENT_PID SPEC\n")
        return 2
    if not die_with_parent(int(argv[0])):
        return 1
    spec = json.loads(argv[1])
    raise_file_limit(int(spec["count"]))
    stream = open(spec["log"], "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    logging.basicConfig(level=logging.WARNING, stream=stream, force=True)
    try:
        key = Path(spec["key_file"]).read_text(encoding="utf-8").strip()
        # uvloop, as the scheduler's: a worker answers ~10,000 probes a second for its nodes,
        # and asyncio's selector loop spent ~20 % of that in its own dispatch. Not for whole
        # sandbox nodes (``"real"``): the controller's netlink fails under uvloop (pyroute2#1335)
        run = asyncio.run if spec.get("real") else uvloop.run
        run(serve(spec, Keyring.from_text(key)))
    except KeyboardInterrupt:
        return 130
    finally:
        stream.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
