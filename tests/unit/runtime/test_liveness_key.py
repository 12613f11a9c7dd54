"""runtime/liveness_key.py: the process waits for its key file instead of crash-looping
(the Secret is made in the cluster after the pod starts, and the kubelet writes the file at
its next sync): a file that appears later is read and the process goes on; while it is
missing the helper (the scheduler's create) runs once; a file without a usable key is an
error and waited on too; a stop ends the wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from eipctl.core.cluster_key import new_cluster_key_text
from eipctl.core.liveness_wire import Keyring
from eipctl.runtime.liveness_key import KeyFile

POLL = 0.02


async def test_a_file_there_at_start_is_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "key"
    text = new_cluster_key_text()
    path.write_text(text)
    calls = []

    async def helper() -> None:
        calls.append(1)

    key_file = KeyFile(str(path), poll=POLL)
    with structlog.testing.capture_logs() as logs:
        keyring = await key_file.wait(asyncio.Event(), while_missing=helper)
    assert keyring is not None and keyring.key_ids == Keyring.from_text(text).key_ids
    assert calls == [] and logs == [] and key_file.not_ready() is None


async def test_a_file_that_appears_later_is_read_and_the_helper_ran_once(tmp_path: Path) -> None:
    path = tmp_path / "key"
    key_file = KeyFile(str(path), poll=POLL)
    runs: list[str] = []
    helper_cancelled = asyncio.Event()

    async def helper() -> None:  # the scheduler's create: runs until the file comes
        runs.append("started")
        try:
            await asyncio.Event().wait()
        finally:
            helper_cancelled.set()

    with structlog.testing.capture_logs() as logs:
        waiting = asyncio.create_task(key_file.wait(asyncio.Event(), while_missing=helper))
        await asyncio.sleep(POLL * 10)
        assert not waiting.done()
        assert key_file.not_ready() == f"{path}: missing"
        text = new_cluster_key_text()
        path.write_text(text)  # the kubelet's sync
        keyring = await asyncio.wait_for(waiting, 2)
    assert keyring is not None and keyring.key_ids == Keyring.from_text(text).key_ids
    assert runs == ["started"] and helper_cancelled.is_set()
    assert key_file.not_ready() is None
    events = [e["event"] for e in logs]
    assert events == ["liveness.key_waiting", "liveness.key_read"]  # told once, not per look


async def test_a_file_without_a_usable_key_is_an_error_and_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("short\n")
    key_file = KeyFile(str(path), poll=POLL)
    with structlog.testing.capture_logs() as logs:
        waiting = asyncio.create_task(key_file.wait(asyncio.Event()))
        await asyncio.sleep(POLL * 10)
        assert not waiting.done()
        assert "invalid: liveness key 1 is 5 bytes" in (key_file.not_ready() or "")
        path.write_text(new_cluster_key_text())  # the operator's fix
        assert await asyncio.wait_for(waiting, 2) is not None
    (error,) = [e for e in logs if e["event"] == "liveness.key_invalid"]
    assert error["log_level"] == "error"


async def test_a_stop_ends_the_wait(tmp_path: Path) -> None:
    key_file = KeyFile(str(tmp_path / "key"), poll=POLL)
    stop = asyncio.Event()
    waiting = asyncio.create_task(key_file.wait(stop))
    await asyncio.sleep(POLL * 3)
    stop.set()
    assert await asyncio.wait_for(waiting, 2) is None
