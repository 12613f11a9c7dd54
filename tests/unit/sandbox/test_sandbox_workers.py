"""Simulated nodes in worker processes: the split, and a whole sandbox whose nodes run in
two workers (boot, Services bound, a node killed and revived, the workers' metrics)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from eipctl.runtime.config import SandboxSettings
from eipctl.sandbox.nodes import NodeError, NodeState
from eipctl.sandbox.session import NODES_PER_PROCESS, Sandbox, node_workers
from eipctl.sandbox.workers import WorkerFleet, blocks
from polling import within


def test_blocks_split_the_nodes_evenly_and_contiguously() -> None:
    assert blocks(1000, 2) == [(1, 500), (501, 500)]
    assert blocks(7, 3) == [(1, 3), (4, 2), (6, 2)]
    assert blocks(2, 4) == [(1, 1), (2, 1)]  # never an empty worker
    assert blocks(5, 0) == [(1, 5)]


def test_nodes_move_to_workers_beyond_what_one_process_carries() -> None:
    assert node_workers(NODES_PER_PROCESS, cpus=8) == 0
    assert node_workers(NODES_PER_PROCESS + 1, cpus=8) == 2
    assert node_workers(1000, cpus=2) == 2
    assert node_workers(1000, cpus=8) == 4
    assert node_workers(1000, cpus=1) == 2  # this process keeps the emulator


@pytest.mark.timeout(120)  # two worker processes, scheduler and allocator start
async def test_a_sandbox_with_its_nodes_in_two_workers(tmp_path: Path) -> None:
    settings = SandboxSettings(
        nodes=2,
        services=2,
        state_dir=str(tmp_path / "state"),
        kubeconfig_out=str(tmp_path / "sandbox.kubeconfig"),
    )
    box = Sandbox(settings, out=io.StringIO(), tty=False, workers=2)
    fleet = box.fleet
    assert isinstance(fleet, WorkerFleet)
    assert [len(w.nodes) for w in fleet.workers] == [1, 1]
    await box.boot(asyncio.Event())
    try:
        async with within(60, "two claims bound, each on a link"):
            while True:
                snap = await box.snapshot()
                if snap and snap.bound == 2 and all(r.on_link for r in snap.rows):
                    break
                await asyncio.sleep(0.2)
        holder = next(r.node for r in snap.rows)
        node = fleet.get(holder)
        assert (await node.status()).mac == f"02:e1:00:00:00:0{node.index}"
        dropped = await node.kill()
        assert dropped and node.state is NodeState.KILLED
        with pytest.raises(NodeError, match="not running"):
            await node.kill()
        other = "node-2" if holder == "node-1" else "node-1"
        async with within(
            30, "the other node holding the dropped IP"
        ):  # the scheduler saw the silence, the other took over
            while fleet.holder_of(dropped[0]) != other:
                await asyncio.sleep(0.05)
        await node.revive()
        assert node.state is NodeState.UP and node.boots == 2
        samples = await fleet.samples()
        assert samples["eipctl_liveness_replies_sent_total"] > 0
    finally:
        await box.shutdown()
    assert all(w.proc is not None and w.proc.returncode is not None for w in fleet.workers)
    assert fleet.holder_of(dropped[0]) is None
