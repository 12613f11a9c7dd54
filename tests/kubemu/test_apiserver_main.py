"""`python -m kubemu` runs alone and writes a usable kubeconfig."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp
import yaml

from polling import within


async def test_module_runs_alone(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubemu",
        "--port",
        "0",
        "--kubeconfig-out",
        str(kc),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with within(20, "the emulator's kubeconfig and its namespaces"):
            while not (kc.exists() and kc.stat().st_size):
                await asyncio.sleep(0.05)
            url = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
            assert url.startswith("http://127.0.0.1:")
            async with aiohttp.ClientSession(url) as http, http.get("/api/v1/namespaces") as r:
                names = [n["metadata"]["name"] for n in (await r.json())["items"]]
            assert "default" in names
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            rc = await proc.wait()
    assert rc == 0
