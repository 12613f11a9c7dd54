"""What the liveness responder and prober share: keys from a file, the UDP socket, counting
what they drop. See the package docstring."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import structlog

from eipctl.core.liveness_wire import (
    Keyring,
)
from eipctl.net.metrics import (
    LIVENESS_PACKETS_REJECTED,
    LIVENESS_SEND_ERRORS,
)

log = structlog.get_logger(__name__)

CHUNK: Final = 64
"""Probes sent back to back; a round of more targets is spread over the interval in chunks."""
REPORT_EVERY: Final = 60.0
"""Seconds between info lines about rejected packets (or failed sends) of one reason."""
BUFFER_BYTES: Final = 1 << 20
"""Socket buffers asked for (the kernel caps them at net.core.{r,w}mem_max)."""
FAMILIES: Final = {4: socket.AF_INET, 6: socket.AF_INET6}
FAMILY_LABEL: Final = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}


def read_keyring(path: str) -> Keyring:
    """The keyring in the file at ``path`` (`Keyring.from_text`); errors name the path."""
    try:
        return Keyring.from_text(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"liveness keys {path}: {exc}") from exc


class Drops:
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
        fields = {"role": self._role, "reason": reason, "source": source_of(addr)}
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


class Endpoint(asyncio.DatagramProtocol):
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


def family_of(host: str) -> socket.AddressFamily:
    try:
        return FAMILIES[ipaddress.ip_address(host).version]
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address") from None


def canonical(host: str) -> str:
    """``host`` as the kernel writes a source address (no zone; IPv6 compressed)."""
    bare = host.partition("%")[0]
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    return socket.inet_ntop(family, socket.inet_pton(family, bare))


def source_of(addr: tuple[Any, ...]) -> str:
    host = str(addr[0])
    return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"


async def open_socket(
    family: socket.AddressFamily,
    address: tuple[str, int],
    received: Callable[[bytes, tuple[Any, ...]], None],
) -> tuple[socket.socket, asyncio.DatagramTransport, Endpoint]:
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
            lambda: Endpoint(received), sock=sock
        )
    except BaseException:
        sock.close()
        raise
    return sock, transport, endpoint
