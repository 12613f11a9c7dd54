"""What the liveness responder and prober share: keys from a file, the UDP socket, counting
what they drop. See the package docstring."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import ipaddress
import socket
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import structlog

from eipctl.core.liveness_filter import Insn
from eipctl.core.liveness_wire import (
    Keyring,
)
from eipctl.net.metrics import (
    LIVENESS_KERNEL_DROPS,
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
BATCH: Final = 64
"""Datagrams read per loop callback before the loop runs the rest of the process."""
DRAIN_LIMIT: Final = 4096
"""Datagrams `DatagramSocket.drain` reads at most when asked to catch up."""
RECV_BYTES: Final = 2048
DROPS_EVERY: Final = 1.0
"""Seconds between reads of the kernel's drop counter while datagrams come."""
SO_TIMESTAMPNS: Final = 35
"""Linux: each datagram carries its arrival time (CLOCK_REALTIME, struct timespec)."""
ANCILLARY_BYTES: Final = socket.CMSG_SPACE(16)
SO_ATTACH_FILTER: Final = 26
SO_MEMINFO: Final = 55
SK_MEMINFO_VARS: Final = 9
SK_MEMINFO_DROPS: Final = 8
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

    def rejected(self, reason: str, addr: tuple[Any, ...], weight: int = 1) -> None:
        """A datagram refused: it is not what this role answers or counts. ``weight``: how
        many it stands for (one sampled by the kernel filter stands for `sample_weight`)."""
        LIVENESS_PACKETS_REJECTED.labels(role=self._role, reason=reason).inc(weight)
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


class DatagramSocket:
    """A bound non-blocking UDP socket, read from the event loop in batches.

    asyncio's datagram transport makes one loop callback per datagram; under a flood that is
    most of the cost. Here one callback reads up to `BATCH` datagrams and then yields to the
    loop, so a flood never delays the rest of the process by more than one batch. `drain`
    reads what is queued at once (the prober calls it before its judge looks at silences:
    a reply that has arrived must count even if the loop fell behind).

    `attach` installs a kernel filter (`core.liveness_filter`); ``filtered`` says whether one
    is in force. `kernel_drops` brings the kernel's own drop counter for the socket (the
    filter's refusals and datagrams that found the receive buffer full) into
    ``eipctl_liveness_kernel_drops_total``.
    """

    def __init__(
        self,
        sock: socket.socket,
        received: Callable[[bytes, tuple[Any, ...]], None],
        role: str,
        *,
        stamped: bool = True,
    ) -> None:
        self.sock = sock
        self.role = role
        self.filtered = False
        self.sendto: Callable[[bytes, tuple[str, int]], int] = sock.sendto
        """The socket's own: no wrapper between a prober's send loop and the system call."""
        self._attach_failed = False
        self._received = received
        self._loop = asyncio.get_running_loop()
        self._drops_seen = 0
        self._drops_read_at = float("-inf")
        self._closing = False
        self.arrived = self._loop.time()
        """When the datagram being handed on arrived, on the loop's clock: the kernel's
        timestamp where it gives one, so a datagram that waited in the queue while the loop
        was frozen or starved is as old as it is, not as fresh as the moment it was read.
        Not kept for a socket opened without ``stamped`` (the prober's: it reads no age)."""
        self._read: Callable[[], tuple[bytes, tuple[Any, ...]]] = self._read_stamped
        if stamped:
            with contextlib.suppress(OSError):  # then the time it is read (`_arrival`)
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        else:  # no ancillary data to parse, no clocks to read, per datagram
            self._read = functools.partial(sock.recvfrom, RECV_BYTES)
        self.closed: asyncio.Future[None] = self._loop.create_future()
        self._loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        self.drain(BATCH)
        if self._loop.time() - self._drops_read_at >= DROPS_EVERY:
            self.kernel_drops()

    def drain(self, limit: int = DRAIN_LIMIT) -> int:
        """Read and hand on up to ``limit`` queued datagrams now; how many were read."""
        count = 0
        read, received = self._read, self._received
        while count < limit and not self._closing:
            try:
                data, addr = read()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP errors surfaced on a UDP socket
                log.debug("liveness.socket.error", role=self.role, error=str(exc))
                break
            count += 1
            received(data, addr)
        return count

    def _read_stamped(self) -> tuple[bytes, tuple[Any, ...]]:
        data, ancillary, _, addr = self.sock.recvmsg(RECV_BYTES, ANCILLARY_BYTES)
        self.arrived = self._arrival(ancillary)
        return data, addr

    def _arrival(self, ancillary: list[tuple[int, int, bytes]]) -> float:
        wall = time.time()  # first: the age may come out a hair short, never long
        now = self._loop.time()
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
                seconds, nanoseconds = struct.unpack_from("qq", data)
                age = wall - (float(seconds) + float(nanoseconds) / 1e9)
                return now - min(max(age, 0.0), 3600.0)  # a wall clock step is not an age
        return now

    def attach(self, program: Sequence[Insn]) -> bool:
        """Install ``program`` as the socket's filter (replacing any); False if refused."""
        code = b"".join(insn.pack() for insn in program)
        buffer = ctypes.create_string_buffer(code, len(code))
        fprog = struct.pack("HL", len(program), ctypes.addressof(buffer))
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        except OSError as exc:
            if not self._attach_failed:  # once: a kernel without the option says it each time
                log.warning("liveness.filter.refused", role=self.role, error=str(exc))
            self._attach_failed = True
            return False
        self.filtered = True
        return True

    def kernel_drops(self) -> int | None:
        """The kernel's drop count for this socket (counted into the metric); None if the
        kernel does not say (SO_MEMINFO is Linux 4.6+)."""
        self._drops_read_at = self._loop.time()
        try:
            raw = self.sock.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, SK_MEMINFO_VARS * 4)
        except OSError:
            return None
        drops = int(struct.unpack_from(f"{SK_MEMINFO_VARS}I", raw)[SK_MEMINFO_DROPS])
        if drops > self._drops_seen:
            LIVENESS_KERNEL_DROPS.labels(role=self.role).inc(drops - self._drops_seen)
        self._drops_seen = drops
        return drops

    def close(self) -> None:
        """Stop reading and close the socket (idempotent); ``closed`` is then done."""
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        if not self.closed.done():
            self.closed.set_result(None)


async def open_socket(
    family: socket.AddressFamily,
    address: tuple[str, int],
    received: Callable[[bytes, tuple[Any, ...]], None],
    role: str,
    *,
    stamped: bool = True,
) -> DatagramSocket:
    """A bound non-blocking UDP socket (no SO_REUSEADDR), read by `DatagramSocket` (with
    each datagram's arrival time if ``stamped``)."""
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            sock.setsockopt(socket.SOL_SOCKET, option, BUFFER_BYTES)
        sock.bind(address)
        return DatagramSocket(sock, received, role, stamped=stamped)
    except BaseException:
        sock.close()
        raise
