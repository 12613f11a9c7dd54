"""The API as a node sees it: a TCP relay listening on 127.0.0.1:6443 inside the node's namespace.

The sandbox's `--netns` nodes and the test bed's reach the API, which listens in the host
namespace, only through their own relay. So "this node is cut off from the API" is one
switch: `cut()` turns the relay into a black hole (open connections go silent, new ones are
accepted and never answered, like a partition that drops packets), `heal()` resets the held
connections (as TCP would after the partition) and relays again. Other nodes, the scheduler
and the allocator keep their API. The host namespace is never touched: the listening socket
is made inside the node's namespace and served by the caller's loop.
"""

from __future__ import annotations

import asyncio
import contextlib

from eipctl.sandbox.namespaces import call_in_netns, listening_socket

NODE_API_PORT = 6443


class ApiRelay:
    """Relays one node's API connections to the real API; `cut()` / `heal()` partition it."""

    def __init__(self, netns: str, upstream: tuple[str, int], port: int = NODE_API_PORT) -> None:
        self.netns = netns
        self.upstream = upstream
        self.port = port
        self.is_cut = False
        self.refusing = False
        """While set, connections are refused (reset at once), as to a server that is gone."""
        self._server: asyncio.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._held: list[asyncio.StreamWriter] = []
        self.connections = 0

    async def start(self) -> None:
        sock = call_in_netns(self.netns, listening_socket, "127.0.0.1", self.port, 64)
        self._server = await asyncio.start_server(self._accept, sock=sock)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.refusing:
            writer.transport.abort()
            return
        if self.is_cut:
            self._held.append(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        a = asyncio.create_task(self._pipe(reader, up_writer))
        b = asyncio.create_task(self._pipe(up_reader, writer))
        self._tasks.update((a, b))
        try:
            await asyncio.wait((a, b), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self._cut_now():  # the node-facing side stays open and silent
                self._held.append(writer)
                for t in (a, b):
                    t.cancel()
                up_writer.transport.abort()
            else:
                for t in (a, b):
                    t.cancel()
                for w in (writer, up_writer):
                    w.close()
            self._conns.discard(pair)
            self._tasks.difference_update((a, b))

    def _cut_now(self) -> bool:
        return self.is_cut  # read afresh: cut() may have run while we awaited

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    async def cut(self) -> None:
        """From now on the node's API traffic goes nowhere (and nothing tells it so)."""
        self.is_cut = True
        for task in list(self._tasks):
            task.cancel()

    async def refuse(self) -> None:
        """From now on the API is gone: open connections are reset, new ones refused (reset
        as soon as accepted), so every request fails at once instead of hanging."""
        self.refusing = True
        await self.reset_connections()

    async def heal(self) -> None:
        """Reset the connections held during the cut and relay again."""
        self.is_cut = False
        self.refusing = False
        held, self._held = self._held, []
        for writer in held:
            writer.transport.abort()

    async def reset_connections(self) -> None:
        """Abort every relayed connection (both ends), as an API restart does."""
        for writer, up in list(self._conns):
            writer.transport.abort()
            if up is not None:
                up.transport.abort()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.reset_connections()
        for writer in self._held:
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
