"""A node's workload: a TCP service that answers every connection with the node's name.

It listens on [::]:8080 (dual stack) inside the node's namespace, so it answers on every
address the node holds, the external IPs included, and on none the node does not. A client
that gets ``node-1\\n`` back knows node-1 holds the IP it dialled.
"""

from __future__ import annotations

import asyncio
import contextlib

from eipctl.sandbox.namespaces import call_in_netns, listening_socket

SERVICE_PORT = 8080


class Responder:
    def __init__(self, netns: str, node_name: str, port: int = SERVICE_PORT) -> None:
        self.netns = netns
        self.answer = f"{node_name}\n".encode()
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        sock = call_in_netns(self.netns, listening_socket, "::", self.port, 512, dual_stack=True)
        self._server = await asyncio.start_server(self._answer, sock=sock)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            writer.write(self.answer)
            await writer.drain()
        writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
