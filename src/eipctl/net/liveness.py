"""Node liveness over UDP: a responder in each controller, a prober in each scheduler replica.

The packet and its keys are `core.liveness_wire` (read its docstring for why challenge/response
keeps a dead node from looking alive). Here are the sockets:

- `LivenessResponder` answers each authenticated probe for its own node with a reply carrying
  the controller's flags (FENCED while it holds nothing). It keeps no state per prober, and
  notes when the last valid probe came (`last_probe_at`), so a controller can tell that
  probes stopped arriving.
- `LivenessProber` sends one probe per interval to every target and calls ``on_reply(node,
  flags)`` for each reply that echoes one of its own recent probes, once. Judging liveness
  from those calls is the caller's business.

Bind a responder to the address the probers are given, not to a wildcard: a reply leaves
from the socket's address, and a prober counts a reply only from the (address, port) it
probed, so on a multi-homed node a wildcard socket could answer from another address.

Load: a prober with 1,000 targets at 100 ms sends 10,000 probes and reads as many replies a
second (benchmarks/bench_liveness_udp.py measures it). One round is not sent in one burst:
the targets go out in chunks of `CHUNK` spread over the interval, so a round's replies never
need more than a chunk's worth of the socket's receive buffer (a Linux default buffer holds
only ~250 small datagrams). Sends use the non-blocking socket directly: a full buffer drops
the probe (counted), it never waits and never queues.

Every datagram not accepted is counted by role and reason (`eipctl_liveness_packets_rejected`)
and logged at debug (`liveness.packet.rejected`); per reason, at most one info line a minute
says how many there were. The reasons: `core.liveness_wire.WIRE_ERRORS` for both roles, then
``not_probe`` and ``other_node`` (responder); ``not_reply``, ``session``, ``unknown_node``,
``source``, ``unsent_seq``, ``stale`` and ``replay`` (prober). A failed send is counted by
its errno name (`eipctl_liveness_send_errors`, ``EAGAIN``, ``ENOBUFS``, ``ENETUNREACH``...)
and logged the same way (`liveness.packet.unsent`, a warning a minute).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import structlog

from eipctl.core.liveness_wire import (
    SESSION_LENGTH,
    Flag,
    Keyring,
    Kind,
    Packet,
    SeqEncoder,
    WireError,
    decode,
    encode,
    valid_node,
)
from eipctl.net.metrics import (
    LIVENESS_PACKETS_REJECTED,
    LIVENESS_PROBES_SENT,
    LIVENESS_REPLIES_ACCEPTED,
    LIVENESS_REPLIES_SENT,
    LIVENESS_SEND_ERRORS,
)

__all__ = ["CHUNK", "LivenessProber", "LivenessResponder", "read_keyring"]

log = structlog.get_logger(__name__)

CHUNK: Final = 64
"""Probes sent back to back; a round of more targets is spread over the interval in chunks."""
REPORT_EVERY: Final = 60.0
"""Seconds between info lines about rejected packets (or failed sends) of one reason."""
BUFFER_BYTES: Final = 1 << 20
"""Socket buffers asked for (the kernel caps them at net.core.{r,w}mem_max)."""
_FAMILIES: Final = {4: socket.AF_INET, 6: socket.AF_INET6}
_FAMILY_LABEL: Final = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}


def read_keyring(path: str) -> Keyring:
    """The keyring in the file at ``path`` (`Keyring.from_text`); errors name the path."""
    try:
        return Keyring.from_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"liveness keys {path}: {exc}") from exc


class _Drops:
    """What one role (prober or responder) drops: counted by reason, logged at debug, and
    per reason at most one line every `REPORT_EVERY` seconds with the count since the last.
    """

    def __init__(self, role: str) -> None:
        self._role = role
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def _report(self, key: str) -> int | None:
        """How many since the last report, if this one is to be reported."""
        count = self._count.get(key, 0) + 1
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < REPORT_EVERY:
            self._count[key] = count
            return None
        self._last[key] = now
        self._count[key] = 0
        return count

    def rejected(self, reason: str, addr: tuple[Any, ...]) -> None:
        """A datagram refused: it is not what this role answers or counts."""
        LIVENESS_PACKETS_REJECTED.labels(role=self._role, reason=reason).inc()
        count = self._report(reason)
        fields = {"role": self._role, "reason": reason, "source": _source(addr)}
        if count is None:
            log.debug("liveness.packet.rejected", **fields)
        else:
            log.info("liveness.packet.rejected", count=count, **fields)

    def unsent(self, exc: OSError, destination: str) -> None:
        """A datagram dropped because sendto failed (a full buffer, no route, no socket)."""
        reason = (
            "EAGAIN"
            if isinstance(exc, BlockingIOError)
            else errno.errorcode.get(exc.errno or 0, "unknown")
        )
        LIVENESS_SEND_ERRORS.labels(role=self._role, reason=reason).inc()
        count = self._report(f"unsent {reason}")
        fields = {"role": self._role, "reason": reason, "destination": destination}
        if count is None:
            log.debug("liveness.packet.unsent", error=str(exc), **fields)
        else:
            log.warning("liveness.packet.unsent", error=str(exc), count=count, **fields)

    def failed(self, what: str, exc: Exception) -> None:
        """A callback of the caller's raised: logged at most once a minute."""
        if self._report(what) is not None:
            log.error("liveness.callback.failed", role=self._role, callback=what, error=repr(exc))


class _Endpoint(asyncio.DatagramProtocol):
    """Hands datagrams to a callback and says when the transport is gone."""

    def __init__(self, received: Callable[[bytes, tuple[Any, ...]], None]) -> None:
        self._received = received
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        self._received(data, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("liveness.socket.error", error=str(exc))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _family(host: str) -> socket.AddressFamily:
    try:
        return _FAMILIES[ipaddress.ip_address(host).version]
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address") from None


def _canonical(host: str) -> str:
    """``host`` as the kernel writes a source address (no zone; IPv6 compressed)."""
    bare = host.partition("%")[0]
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    return socket.inet_ntop(family, socket.inet_pton(family, bare))


def _source(addr: tuple[Any, ...]) -> str:
    host = str(addr[0])
    return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"


async def _open(
    family: socket.AddressFamily,
    address: tuple[str, int],
    received: Callable[[bytes, tuple[Any, ...]], None],
) -> tuple[socket.socket, asyncio.DatagramTransport, _Endpoint]:
    """A bound non-blocking UDP socket (no SO_REUSEADDR) and the transport reading it.

    The socket is ours to `sendto` on directly: the transport only reads. It closes the
    socket when it closes, one loop iteration after `transport.close()`.
    """
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, BUFFER_BYTES)
        sock.bind(address)
        transport, endpoint = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Endpoint(received), sock=sock
        )
    except BaseException:
        sock.close()
        raise
    return sock, transport, endpoint


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
        self._endpoint: _Endpoint | None = None
        self._port: int | None = None
        self._closed = False
        self._drops = _Drops("responder")
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
        family = _family(host)
        loop = asyncio.get_running_loop()
        try:
            sock, transport, endpoint = await _open(family, (host, port), self._received)
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
            self._drops.unsent(exc, _source(addr))
            return
        LIVENESS_REPLIES_SENT.inc()

    def _refusal(self, probe: Packet) -> str | None:
        """Why ``probe`` gets no answer; None if it does."""
        if probe.kind != Kind.PROBE:
            return "not_probe"
        if probe.node != self._node:
            return "other_node"
        return None


class _Target:
    """Per-node state of a prober; a node whose endpoint changes gets a new one."""

    __slots__ = ("accepted", "address", "family", "host", "node", "port", "probe")

    def __init__(self, node: str, address: tuple[str, int], seq: int, probe: SeqEncoder) -> None:
        self.node = node
        self.probe = probe  # encodes our probe to this node for a given seq
        self.address = address  # as given, for sendto
        self.family = _family(address[0])
        self.host = _canonical(address[0])  # as a reply's source address reads
        self.port = address[1]
        self.accepted = seq  # the last seq accepted: only replies to later probes count


class LivenessProber:
    """Probes every target once per ``interval`` and reports each fresh reply, once.

    A reply is accepted only if it decodes (right key, intact), is a REPLY in our session,
    for a current target, from that target's (address, port), and echoes a seq we sent in
    the last ``window`` rounds that is newer than the last one accepted for that node. Then
    ``on_reply(node, flags)`` is called at once, from the receiving callback.

    `run` sends; the sockets (one per address family, opened on first use) read replies
    until `close`.
    """

    def __init__(
        self,
        keyring: Keyring,
        *,
        interval: float,
        on_reply: Callable[[str, Flag], None],
        window: int = 8,
    ) -> None:
        if not interval > 0 or not math.isfinite(interval):
            raise ValueError("interval must be a positive number of seconds")
        if window < 1:
            raise ValueError("window must be at least 1 round")
        self._keyring = keyring
        self._interval = interval
        self._on_reply = on_reply
        self._window = window
        self._session = os.urandom(SESSION_LENGTH)
        self._seq = 0
        self._targets: dict[str, _Target] = {}
        self._sockets: dict[socket.AddressFamily, socket.socket] = {}
        self._transports: list[asyncio.DatagramTransport] = []
        self._endpoints: list[_Endpoint] = []
        # family -> when opening its socket last failed (retried after REPORT_EVERY)
        self._unusable: dict[socket.AddressFamily, float] = {}
        self._drops = _Drops("prober")
        self._accepted = 0  # replies accepted since the metric was last brought up to date
        self._running = False
        self._closed = False

    @property
    def session(self) -> bytes:
        return self._session

    @property
    def seq(self) -> int:
        """The seq of the latest round (0 before the first)."""
        return self._seq

    def set_targets(self, targets: Mapping[str, tuple[str, int]]) -> None:
        """Probe exactly these nodes from the next round: node -> (IP literal, port).

        Replaces the whole set; a node whose endpoint is unchanged keeps its state. Raises
        ValueError (and changes nothing) if any entry is invalid.
        """
        fresh: dict[str, _Target] = {}
        for node, (host, port) in targets.items():
            if not valid_node(node):
                raise ValueError(f"node {node!r} is not an IpNode name")
            if not 0 < port < 65536:
                raise ValueError(f"{node}: port {port} is not a UDP port")
            _family(host)
            old = self._targets.get(node)
            if old is not None and old.address == (host, port):
                fresh[node] = old
            else:
                template = Packet(Kind.PROBE, node, self._session, 0)
                probe = SeqEncoder(template, self._keyring)
                fresh[node] = _Target(node, (host, port), self._seq, probe)
        self._targets = fresh

    async def run(self) -> None:
        """Probe until cancelled (or closed): one round per ``interval``, on a fixed cadence.

        Rounds start at multiples of ``interval`` from the first. One that starts late
        (a busy loop) starts at once; rounds missed entirely are skipped, never made up for
        in a burst.
        """
        if self._running or self._closed:
            raise RuntimeError("a liveness prober runs once at a time, until closed")
        self._running = True
        loop = asyncio.get_running_loop()
        next_round = loop.time()
        try:
            while not self._closed:
                now = loop.time()
                if now - next_round >= self._interval:  # whole rounds missed: skip them
                    next_round += math.floor((now - next_round) / self._interval) * self._interval
                await self._open_sockets(now)
                self._seq += 1
                self._count_accepted()
                next_round += self._interval
                await self._round(loop, next_round)
                await asyncio.sleep(max(0.0, next_round - loop.time()))
        finally:
            self._running = False

    def close(self) -> None:
        """Close the sockets (idempotent): no more replies are read, the ports are freed."""
        if self._closed:
            return
        self._closed = True
        self._count_accepted()
        for transport in self._transports:
            transport.close()
        self._sockets.clear()

    async def wait_closed(self) -> None:
        """Return once every socket is closed (after `close`)."""
        for endpoint in self._endpoints:
            await endpoint.closed

    def _count_accepted(self) -> None:
        """Add the replies accepted to the metric: once a round, not once a reply."""
        if self._accepted:
            LIVENESS_REPLIES_ACCEPTED.inc(self._accepted)
            self._accepted = 0

    async def _open_sockets(self, now: float) -> None:
        for family in {target.family for target in self._targets.values()}:
            if family in self._sockets:
                continue
            failed_at = self._unusable.get(family)
            if failed_at is not None and now - failed_at < REPORT_EVERY:
                continue
            wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"
            try:
                sock, transport, endpoint = await _open(family, (wildcard, 0), self._received)
            except OSError as exc:
                if failed_at is None:
                    log.warning(
                        "liveness.socket.failed", family=_FAMILY_LABEL[family], error=str(exc)
                    )
                self._unusable[family] = now
                continue
            if self._closed:  # closed while opening
                transport.close()
                continue
            self._unusable.pop(family, None)
            self._sockets[family] = sock
            self._transports.append(transport)
            self._endpoints.append(endpoint)

    async def _round(self, loop: asyncio.AbstractEventLoop, next_round: float) -> None:
        """Probe each target once; more than `CHUNK` targets are spread until ``next_round``."""
        targets = list(self._targets.values())
        chunks = math.ceil(len(targets) / CHUNK)
        started = loop.time()
        for n in range(chunks):
            if n:
                await asyncio.sleep(
                    max(0.0, started + n * (next_round - started) / chunks - loop.time())
                )
                if self._closed:
                    return
            self._send_chunk(targets[n * CHUNK : (n + 1) * CHUNK])

    def _send_chunk(self, chunk: list[_Target]) -> None:
        seq, current = self._seq, self._targets
        sent = {socket.AF_INET: 0, socket.AF_INET6: 0}
        for target in chunk:
            if current.get(target.node) is not target:  # removed or changed since the round began
                continue
            sock = self._sockets.get(target.family)
            try:
                if sock is None:
                    raise OSError(errno.EAFNOSUPPORT, "no socket for this address family")
                sock.sendto(target.probe.encode(seq), target.address)
            except OSError as exc:
                self._drops.unsent(exc, f"{target.node} {_source(target.address)}")
                continue
            sent[target.family] += 1
        for family, count in sent.items():
            if count:
                LIVENESS_PROBES_SENT.labels(family=_FAMILY_LABEL[family]).inc(count)

    def _received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            reply = decode(data, self._keyring)
        except WireError as exc:
            self._drops.rejected(exc.reason, addr)
            return
        target = self._targets.get(reply.node)
        reason = self._refusal(reply, target, addr)
        if reason is not None:
            self._drops.rejected(reason, addr)
            return
        assert target is not None
        target.accepted = reply.seq
        self._accepted += 1
        try:
            self._on_reply(reply.node, reply.flags)
        except Exception as exc:  # a failing consumer must not stop the replies being read
            self._drops.failed("on_reply", exc)

    def _refusal(self, reply: Packet, target: _Target | None, addr: tuple[Any, ...]) -> str | None:
        """Why ``reply`` (from ``addr``) does not count; None if it does."""
        if reply.kind != Kind.REPLY:
            return "not_reply"
        if reply.session != self._session:
            return "session"
        if target is None:
            return "unknown_node"
        host = addr[0]
        if addr[1] != target.port or (host != target.host and _canonical(host) != target.host):
            return "source"
        if reply.seq > self._seq:
            return "unsent_seq"
        if reply.seq <= self._seq - self._window:
            return "stale"
        if reply.seq <= target.accepted:
            return "replay"
        return None
