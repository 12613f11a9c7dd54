"""A whole sandbox in the test's loop: boot, Services bound, control requests, shutdown."""

from __future__ import annotations

import asyncio
import gc
import io
from pathlib import Path

from eipctl.runtime.config import SandboxSettings
from eipctl.sandbox.control import request
from eipctl.sandbox.session import GC_THRESHOLDS, Sandbox
from polling import within


async def test_boot_serve_and_shut_down(tmp_path: Path) -> None:
    settings = SandboxSettings(
        nodes=2,
        services=3,
        state_dir=str(tmp_path / "state"),
        kubeconfig_out=str(tmp_path / "sandbox.kubeconfig"),
    )
    out = io.StringIO()
    box = Sandbox(settings, out=out, tty=False)
    stop = asyncio.Event()
    collector = gc.get_threshold()
    await box.boot(stop)
    try:
        assert gc.get_threshold() == GC_THRESHOLDS
        assert (tmp_path / "sandbox.kubeconfig").exists()
        assert (tmp_path / "state").stat().st_mode & 0o077 == 0
        key = tmp_path / "state" / "liveness.key"
        assert key.stat().st_mode & 0o077 == 0 and len(key.read_text().strip()) >= 32
        scheduler = next(c for c in box.children.children if c.name == "scheduler")
        assert scheduler.argv[1:3] == ["--liveness-key-file", str(key)]
        async with within(60, "three claims bound, each on a link"):
            while True:
                snap = await box.snapshot()
                if snap and snap.bound == 3 and all(r.on_link for r in snap.rows):
                    break
                await asyncio.sleep(0.2)
        nodes = {r.node for r in snap.rows}
        assert nodes == {"node-1", "node-2"}

        status = await request(settings.state_dir, {"action": "status"})
        assert status["ok"] and "allocator: running" in status["message"]
        unknown = await request(settings.state_dir, {"action": "explode"})
        assert unknown == {"ok": False, "message": "unknown action 'explode'"}
        missing = await request(settings.state_dir, {"action": "kill-node", "node": "node-7"})
        assert missing["ok"] is False and "no node 'node-7'" in missing["message"]

        killed = await request(settings.state_dir, {"action": "kill-node", "node": "node-1"})
        assert killed["ok"] and killed["message"].startswith("node-1 killed")
        async with within(30, "the three claims bound, all on node-2"):
            while True:
                snap = await box.snapshot()
                if snap and snap.bound == 3 and {r.on_link for r in snap.rows} == {"node-2"}:
                    break
                await asyncio.sleep(0.2)
        revived = await request(settings.state_dir, {"action": "revive-node", "node": "node-1"})
        assert revived["ok"]
        await box.refresh()

        box.on_key("9", stop)  # no node-9: nothing happens
        box.on_key("x", stop)
        assert not stop.is_set()
        box.on_key("q", stop)
        assert stop.is_set()
    finally:
        await box.shutdown()
    assert not (tmp_path / "state" / "control.sock").exists()
    assert all(not c.running for c in box.children.statuses())
    assert gc.get_threshold() == collector and gc.get_freeze_count() == 0
    summary = box.summary()[-1]
    assert "3/3 services had an IP" in summary and "1 kill(s), 1 revive(s)" in summary
    assert "node-1 killed: liveness replies stopped" in out.getvalue()
