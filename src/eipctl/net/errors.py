"""One exception tree for the networking edge.

Callers (the controller) catch `NetError` and decide; pyroute2 and OSError details stay
in the chained ``__cause__`` so logs keep them but no caller depends on them.
"""

from __future__ import annotations


class NetError(Exception):
    """Base class for every failure raised by `eipctl.net`."""


class LinkNotFoundError(NetError):
    """The named link does not exist (in this network namespace)."""


class NetPermissionError(NetError):
    """The kernel refused: the process lacks CAP_NET_ADMIN or CAP_NET_RAW."""


class ForeignAddressError(NetError):
    """The operation would change or drop an address eipctl did not add.

    eipctl never takes over, renews or removes an administrator's address; the controller
    should report the claim as conflicting instead.
    """


class NetlinkError(NetError):
    """Any other netlink failure; `errno` is the kernel's error code."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class SocketError(NetError):
    """A raw socket (ARP / ICMPv6) could not be opened or used."""


class FrameError(NetError, ValueError):
    """Bytes that are not the frame a parser was asked to read."""
