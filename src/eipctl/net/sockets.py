"""The only places eipctl opens raw sockets; each closes on exit. Needs CAP_NET_RAW.

Measured here: binding an AF_PACKET socket to an ethertype costs 8-16 ms and closing one
8-28 ms, because the kernel waits for an RCU grace period (synchronize_net). So those steps
run in a worker thread, never on the event loop; worker threads inherit the network
namespace of the thread that started them, which is what the tests rely on.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import socket
import struct
from collections.abc import AsyncIterator, Iterator
from ipaddress import IPv6Address

from eipctl.net.errors import LinkNotFoundError, NetPermissionError, SocketError

PACKET_OUTGOING = 4  # sll_pkttype of frames this host sent (linux/if_packet.h)
_SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)
_SIOCGIFHWADDR = 0x8927
_ARPHRD_ETHER = 1


def _mapped(exc: OSError, what: str) -> Exception:
    if exc.errno in (errno.EPERM, errno.EACCES):
        return NetPermissionError(f"{what}: permission denied (need CAP_NET_RAW)")
    if exc.errno in (errno.ENODEV, errno.ENXIO):
        return LinkNotFoundError(f"{what}: no such link")
    return SocketError(f"{what}: {exc}")


def hardware_address(ifname: str) -> bytes:
    """The link's Ethernet MAC via SIOCGIFHWADDR (cheap: no netlink, no packet socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            raw = fcntl.ioctl(sock, _SIOCGIFHWADDR, struct.pack("256s", ifname.encode()))
        except OSError as exc:
            raise _mapped(exc, f"hardware address of {ifname}") from exc
    family = struct.unpack_from("=H", raw, 16)[0]
    if family != _ARPHRD_ETHER:
        raise SocketError(f"{ifname} is not an Ethernet link (ARPHRD {family})")
    return raw[18:24]


def _open_packet(ifname: str, ethertype: int) -> socket.socket:
    what = f"packet socket on {ifname}"
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    except OSError as exc:
        raise _mapped(exc, what) from exc
    try:
        sock.bind((ifname, ethertype))
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _mapped(exc, what) from exc
    return sock


def _close_when_opened(opening: asyncio.Future[socket.socket]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


@contextlib.asynccontextmanager
async def packet_socket(
    ifname: str, ethertype: int = 0
) -> AsyncIterator[tuple[socket.socket, bytes]]:
    """A non-blocking AF_PACKET socket on one link, plus the link's MAC.

    With an `ethertype` it receives that ethertype's frames in both directions (readers skip
    `PACKET_OUTGOING` ones); with 0 it only sends, so no receive queue fills meanwhile.
    """
    mac = hardware_address(ifname)
    loop = asyncio.get_running_loop()
    opening = loop.run_in_executor(None, _open_packet, ifname, ethertype)
    try:
        sock = await asyncio.shield(opening)
    except asyncio.CancelledError:  # the thread still finishes: close what it opens
        opening.add_done_callback(_close_when_opened)
        raise
    try:
        yield sock, mac
    finally:
        await asyncio.shield(loop.run_in_executor(None, sock.close))


@contextlib.contextmanager
def icmpv6_socket(ifname: str, source: IPv6Address) -> Iterator[tuple[socket.socket, int]]:
    """A raw ICMPv6 socket bound to `source` on `ifname`, hop limit 255 (RFC 4861 §7.1.2
    receivers drop ND messages with any other), plus the link's index. Cheap to open/close.

    The kernel computes the ICMPv6 checksum on raw ICMPv6 sockets. Binding needs the source
    address to be assigned and not tentative, hence IFA_F_NODAD on eipctl's IPv6 addresses.
    """
    what = f"ICMPv6 socket on {ifname} from {source}"
    try:
        index = socket.if_nametoindex(ifname)
        sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    except OSError as exc:
        raise _mapped(exc, what) from exc
    with sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, _SO_BINDTODEVICE, ifname.encode())
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 255)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
            sock.bind((str(source), 0, 0, index))
            sock.setblocking(False)
        except OSError as exc:
            raise _mapped(exc, what) from exc
        yield sock, index
