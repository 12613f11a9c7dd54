"""`--netns` pieces (root): the API relay inside a namespace, and leftover cleanup."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from eipctl.sandbox.netns import PREFIX, RELAY_PORT, remove_leftovers, unavailable
from eipctl.sandbox.relay import ApiRelay

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2"
    ),
]


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"{PREFIX}{os.getpid()}-unit"
    subprocess.run(["ip", "netns", "add", name], check=True)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_available_as_root() -> None:
    assert unavailable() is None


async def test_relay_carries_bytes_from_inside_the_namespace(netns: str) -> None:
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello " + await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    relay = ApiRelay(netns, ("127.0.0.1", port))
    await relay.start()
    client = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {RELAY_PORT}), timeout=10); "
        "s.sendall(b'node\\n'); print(s.makefile().readline().strip())"
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", netns, sys.executable, "-c", client,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
        assert out.decode().strip() == "hello node"
    finally:
        await relay.stop()
        server.close()
        await server.wait_closed()


async def test_leftovers_of_dead_sandboxes_are_removed(netns: str) -> None:
    dead = f"{PREFIX}999999999-sw"  # no such pid
    subprocess.run(["ip", "netns", "add", dead], check=True)
    try:
        removed = await remove_leftovers()
        assert dead in removed
        assert dead not in namespaces()
        assert netns in namespaces()  # ours: this process is alive
    finally:
        subprocess.run(["ip", "netns", "del", dead], check=False)
