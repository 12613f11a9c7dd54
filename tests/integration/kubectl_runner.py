"""The real kubectl (v1.37, from the venv), run without blocking the loop the emulator
serves on: for the integration stories that read or write as a user would."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from eipctl.sandbox.testbed.kube import kubectl_binary


async def run_kubectl(
    kubeconfig: Path, home: Path, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kubectl ARGS` with `stdin` fed to it."""
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        "--cache-dir",
        str(home / "cache"),
        "--request-timeout=10s",
        *args,
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await proc.communicate(stdin.encode())
    return int(proc.returncode or 0), out.decode(), err.decode()
