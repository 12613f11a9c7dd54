"""`LivenessResponder`: answers the schedulers' probes in each node's controller."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import structlog

from eipctl.core.liveness_wire import (
    Flag,
    Keyring,
    Kind,
    Packet,
    WireError,
    decode,
    encode,
    valid_node,
)
from eipctl.net.metrics import (
    LIVENESS_REPLIES_SENT,
)

from .sockets import Drops, Endpoint, family_of, open_socket, source_of

log = structlog.get_logger(__name__)


class LivenessResponder:
    """Answers probes for one node, from the node's controller.

    ``flags`` is asked on every probe (FENCED while the controller has fenced itself). A
    datagram that is not a valid probe for this node is dropped and counted, never answered.
    """

    def __init__(self, node: str, keyring: Keyring, *, flags: Callable[[], Flag]) -> None:
        if not valid_node(node):
            raise ValueError(f"node {node!r} is not an IpNode name")
        self._node = node
        self._keyring = keyring
        self._flags = flags
        self._sock: socket.socket | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._endpoint: Endpoint | None = None
        self._port: int | None = None
        self._closed = False
        self._drops = Drops("responder")
        self._time: Callable[[], float] = time.monotonic
        self.last_probe_at: float | None = None
        """``loop.time()`` when the last valid probe for this node came; None before any."""

    @property
    def port(self) -> int:
        """The bound UDP port (the one asked for, or the kernel's pick for 0)."""
        if self._port is None:
            raise RuntimeError("the liveness responder is not started")
        return self._port

    async def start(self, host: str, port: int) -> None:
        """Bind ``host`` (an IPv4 or IPv6 literal) and ``port`` (0: any) and answer probes."""
        if self._sock is not None or self._closed:
            raise RuntimeError("a liveness responder starts once")
        family = family_of(host)
        loop = asyncio.get_running_loop()
        try:
            sock, transport, endpoint = await open_socket(family, (host, port), self._received)
        except OSError as exc:
            raise OSError(exc.errno, f"liveness responder on {host} port {port}: {exc}") from exc
        self._time = loop.time
        self._sock, self._transport, self._endpoint = sock, transport, endpoint
        self._port = sock.getsockname()[1]
        log.info("liveness.responder.started", node=self._node, address=host, port=self._port)

    def close(self) -> None:
        """Stop answering; the port is free once the loop has run (`wait_closed`)."""
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        """Return once the socket is closed (after `close`)."""
        if self._endpoint is not None:
            await self._endpoint.closed

    def _received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            probe = decode(data, self._keyring)
        except WireError as exc:
            self._drops.rejected(exc.reason, addr)
            return
        reason = self._refusal(probe)
        if reason is not None:
            self._drops.rejected(reason, addr)
            return
        self.last_probe_at = self._time()
        try:
            flags = self._flags()
        except Exception as exc:  # a controller that cannot say its state does not answer
            self._drops.failed("flags", exc)
            return
        reply = Packet(Kind.REPLY, probe.node, probe.session, probe.seq, flags)
        assert self._sock is not None
        try:
            self._sock.sendto(encode(reply, self._keyring), addr)
        except OSError as exc:
            self._drops.unsent(exc, source_of(addr))
            return
        LIVENESS_REPLIES_SENT.inc()

    def _refusal(self, probe: Packet) -> str | None:
        """Why ``probe`` gets no answer; None if it does."""
        if probe.kind != Kind.PROBE:
            return "not_probe"
        if probe.node != self._node:
            return "other_node"
        return None
