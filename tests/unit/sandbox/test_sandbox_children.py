"""Supervised children: restarted when they exit, stopped with SIGTERM, dead with the parent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from eipctl.sandbox.boot import install_crds
from eipctl.sandbox.children import Child, Children, component_argv
from kubemu import ApiServer
from polling import within


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def test_child_that_exits_is_started_again(tmp_path: Path) -> None:
    child = Child("version", ["version"], tmp_path / "version.log")
    children = Children([child])
    children.start()
    try:
        async with within(30, "the child started again"):
            while child.starts < 2:
                await asyncio.sleep(0.05)
    finally:
        await children.stop(grace=5)
    log = (tmp_path / "version.log").read_text()
    assert log.count("--- start") >= 2
    assert "eipctl " in log  # the command's own output is in the log


async def test_a_child_added_later_is_supervised_and_stopped_with_the_rest(
    tmp_path: Path,
) -> None:
    children = Children([])
    children.start()
    late = Child("late", ["version"], tmp_path / "late.log")
    children.add(late)
    try:
        async with within(30, "the late child started again"):
            while late.starts < 2:  # exits at once, and is started again
                await asyncio.sleep(0.05)
    finally:
        await children.stop(grace=5)
    assert [s.name for s in children.statuses()] == ["late"]
    assert not children.statuses()[0].running


async def test_stop_terminates_a_running_component(apiserver: ApiServer, tmp_path: Path) -> None:
    install_crds(apiserver)
    config = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    key = tmp_path / "liveness.key"
    key.write_text("sandbox-test-key-0123456789\n")
    argv = component_argv("scheduler", config, "info", liveness_key_file=key)
    assert argv[:3] == ["scheduler", "--liveness-key-file", str(key)]
    assert "--liveness-key-file" not in component_argv("allocator", config, "info")
    child = Child("scheduler", argv, tmp_path / "s.log")
    children = Children([child])
    children.start()
    try:
        async with within(30, "scheduler.leading in its log"):
            while "scheduler.leading" not in read(tmp_path / "s.log"):
                await asyncio.sleep(0.1)
        status = children.statuses()[0]
        assert status.running and status.pid is not None
    finally:
        started = time.monotonic()
        await children.stop(grace=10)
    assert time.monotonic() - started < 10  # SIGTERM was enough
    assert child.last_exit == 0
    assert not alive(status.pid)
    assert child.starts == 1


def test_child_refuses_to_run_for_a_parent_that_is_gone() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eipctl.sandbox.child", "1", "version"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b""


async def test_child_dies_with_its_parent(apiserver: ApiServer, tmp_path: Path) -> None:
    install_crds(apiserver)
    config = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    argv = component_argv("allocator", config, "info")
    script = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-m', 'eipctl.sandbox.child', str(os.getpid()),"
        f" *{argv!r}], stdout=open(sys.argv[1], 'wb'), stderr=subprocess.STDOUT)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(tmp_path / "a.log"), stdout=asyncio.subprocess.PIPE
    )
    assert parent.stdout is not None
    pid = int(await asyncio.wait_for(parent.stdout.readline(), 60))
    try:
        async with within(30, "the allocator's Lease"):  # the allocator is up and holds its Lease
            while (
                apiserver.store.find("coordination.k8s.io", "leases", "eipctl-allocator", "default")
                is None
            ):
                await asyncio.sleep(0.1)
        parent.send_signal(signal.SIGKILL)
        await parent.wait()
        async with within(30, "the orphaned child gone"):
            while alive(pid):
                await asyncio.sleep(0.05)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
