"""`LivenessResponder`: answers the schedulers' probes and the peers' queries in each node's
controller, and notes what the probes say of the prober's standing.

A probe flagged WRITER (the scheduler leader, its Lease current), or one that reports no
standing at all (a first-release scheduler: it may be the leader), is a *writer's* probe:
`last_writer_at` says when the last came, and that is what a peer's PEER_QUERY asks about.
A PROBE_EXT's ext goes to ``on_probe`` (the controller compares the digest with its claims
and keeps the node count).
PEER_REPLY datagrams on this socket are handed to the `PeerQuerier` that sent the queries.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import structlog

from eipctl.core.liveness_wire import (
    NEVER_MS,
    Flag,
    Keyring,
    Kind,
    Packet,
    WireError,
    decode,
    encode,
    peer_ext,
    valid_node,
)
from eipctl.net.metrics import (
    LIVENESS_REPLIES_SENT,
)

from .sockets import Drops, Endpoint, family_of, open_socket, source_of

log = structlog.get_logger(__name__)


class LivenessResponder:
    """Answers probes for one node, from the node's controller.

    ``flags`` is asked on every probe (FENCED while the controller has fenced itself,
    API_STALE while its API requests fail); EXTENDED is added here. A datagram that is not a
    valid probe or peer query for this node is dropped and counted, never answered.
    ``on_probe(flags, ext)`` is told of every valid probe (ext None for a plain one).
    ``writer_heard_within``: a peer reply sets WRITER_HEARD when a writer's probe came this
    recently (its ext always carries the silence itself).
    """

    def __init__(
        self,
        node: str,
        keyring: Keyring,
        *,
        flags: Callable[[], Flag],
        on_probe: Callable[[Flag, bytes | None], None] | None = None,
        writer_heard_within: float = 0.2,
    ) -> None:
        if not valid_node(node):
            raise ValueError(f"node {node!r} is not an IpNode name")
        self._node = node
        self._keyring = keyring
        self._flags = flags
        self._on_probe = on_probe
        self._writer_heard_within = writer_heard_within
        self.on_peer_reply: Callable[[Packet, tuple[Any, ...]], None] | None = None
        """Where PEER_REPLY datagrams go (`PeerQuerier` sets it)."""
        self._sock: socket.socket | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._endpoint: Endpoint | None = None
        self._port: int | None = None
        self._closed = False
        self._drops = Drops("responder")
        self._time: Callable[[], float] = time.monotonic
        self.last_probe_at: float | None = None
        """``loop.time()`` when the last valid probe for this node came; None before any."""
        self.last_writer_at: float | None = None
        """``loop.time()`` of the last probe from a possible writer (see the module docstring)."""
        self.standing_seen = False
        """Whether any prober reported its standing (a scheduler of this release runs)."""

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

    def send(self, data: bytes, addr: tuple[str, int]) -> bool:
        """Send ``data`` from the responder's socket (peer queries leave from the address the
        peers know us by); False (counted) if it could not be sent."""
        if self._sock is None or self._closed:
            return False
        try:
            self._sock.sendto(data, addr)
        except OSError as exc:
            self._drops.unsent(exc, source_of(addr))
            return False
        return True

    def writer_silence(self) -> float | None:
        """Seconds since a writer's probe came; None if none ever did."""
        last = self.last_writer_at
        return None if last is None else self._time() - last

    def _received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            packet = decode(data, self._keyring)
        except WireError as exc:
            self._drops.rejected(exc.reason, addr)
            return
        if packet.kind == Kind.PEER_REPLY:
            if self.on_peer_reply is None:
                self._drops.rejected("not_probe", addr)
            else:
                self.on_peer_reply(packet, addr)
            return
        reason = self._refusal(packet)
        if reason is not None:
            self._drops.rejected(reason, addr)
            return
        if packet.kind == Kind.PEER_QUERY:
            self._answer_peer(packet, addr)
            return
        self._probed(packet)
        try:
            flags = self._flags() | Flag.EXTENDED
        except Exception as exc:  # a controller that cannot say its state does not answer
            self._drops.failed("flags", exc)
            return
        reply = Packet(Kind.REPLY, packet.node, packet.session, packet.seq, flags)
        if self.send(encode(reply, self._keyring), addr):
            LIVENESS_REPLIES_SENT.inc()

    def _probed(self, probe: Packet) -> None:
        now = self._time()
        self.last_probe_at = now
        standing = bool(probe.flags & Flag.STANDING)
        self.standing_seen |= standing
        if probe.flags & Flag.WRITER or not standing:
            self.last_writer_at = now
        if self._on_probe is not None:
            try:
                self._on_probe(probe.flags, probe.ext if probe.kind == Kind.PROBE_EXT else None)
            except Exception as exc:  # never stop answering because a consumer failed
                self._drops.failed("on_probe", exc)

    def _answer_peer(self, query: Packet, addr: tuple[Any, ...]) -> None:
        silence = self.writer_silence()
        ms = NEVER_MS if silence is None else int(silence * 1000)
        heard = silence is not None and silence < self._writer_heard_within
        reply = Packet(
            Kind.PEER_REPLY,
            self._node,
            query.session,
            query.seq,
            Flag.WRITER_HEARD if heard else Flag.NONE,
            peer_ext(ms),
        )
        self.send(encode(reply, self._keyring), addr)

    def _refusal(self, probe: Packet) -> str | None:
        """Why ``probe`` gets no answer; None if it does."""
        if probe.kind not in (Kind.PROBE, Kind.PROBE_EXT, Kind.PEER_QUERY):
            return "not_probe"
        if probe.node != self._node:
            return "other_node"
        return None
