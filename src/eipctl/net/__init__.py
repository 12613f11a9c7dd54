"""Host networking edge: links (netlink or in-memory), GARP/NA announcements, address probes.

Import the light, I/O-free names from here; `eipctl.net.netlink` (pyroute2),
`eipctl.net.announce` and `eipctl.net.probe` (raw sockets) are imported where used.
"""

from eipctl.net.errors import (
    ForeignAddressError,
    FrameError,
    LinkNotFoundError,
    NetError,
    NetlinkError,
    NetPermissionError,
    SocketError,
)
from eipctl.net.link import (
    Announcer,
    IPAddress,
    LinkAddress,
    LinkBackend,
    ManagedAddress,
    ProbeConflict,
    Prober,
)

__all__ = [
    "Announcer",
    "ForeignAddressError",
    "FrameError",
    "IPAddress",
    "LinkAddress",
    "LinkBackend",
    "LinkNotFoundError",
    "ManagedAddress",
    "NetError",
    "NetPermissionError",
    "NetlinkError",
    "ProbeConflict",
    "Prober",
    "SocketError",
]
