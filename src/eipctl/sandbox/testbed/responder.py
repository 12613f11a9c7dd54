"""A node's workload: a TCP service that answers every connection with the node's name.

It listens on [::]:8080 (dual stack) inside the node's namespace, so it answers on every
address the node holds, the external IPs included, and on none the node does not. A client
that gets ``node-1\\n`` back knows node-1 holds the IP it dialled.

Each responder is a process of its own in the node's namespace
(``python -m eipctl.sandbox.testbed.responder NODE PORT``), as a workload on a node is: in
the test process, beside the client's prober, 50 IPs probed every 20 ms made each probe
last 120-240 ms, and the probes open at a move were cut (docs/benchmarks.md, "Planned
maintenance").
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path

from eipctl.sandbox.namespaces import listening_socket
from eipctl.sandbox.testbed.processes import Process

SERVICE_PORT = 8080
READY = "responder.listening"
START_TIMEOUT = 10.0


class Responder:
    """The node's responder process; `start` returns once it listens."""

    def __init__(self, netns: str, node_name: str, run_dir: Path, port: int = SERVICE_PORT) -> None:
        self.netns = netns
        self.port = port
        argv = [sys.executable, "-m", "eipctl.sandbox.testbed.responder", node_name, str(port)]
        self.process = Process(f"responder-{node_name}", argv, run_dir, netns=netns)

    async def start(self) -> None:
        self.process.start()
        deadline = time.monotonic() + START_TIMEOUT
        while READY not in self.process.log_tail(5):
            if not self.process.alive or time.monotonic() > deadline:
                raise RuntimeError(f"responder did not start:\n{self.process.log_tail(15)}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        await asyncio.to_thread(self.process.kill)


async def _answer(
    answer: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    with contextlib.suppress(OSError):
        writer.write(answer)
        await writer.drain()
    writer.close()


async def serve(node_name: str, port: int) -> None:
    """Answer every connection on [::]:`port` with the node's name, until killed."""
    sock = listening_socket("::", port, 512, dual_stack=True)
    answer = f"{node_name}\n".encode()
    server = await asyncio.start_server(lambda r, w: _answer(answer, r, w), sock=sock)
    sys.stdout.write(f"event={READY} node={node_name} port={port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m eipctl.sandbox.testbed.responder NODE PORT\n")
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(argv[0], int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
