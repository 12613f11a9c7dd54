"""Where this node answers liveness probes when ``--liveness-address`` is not given."""

from __future__ import annotations

from eipctl.net.link import LinkBackend


async def own_address(backend: LinkBackend, link: str) -> str:
    """The first address on ``link`` that is not eipctl's and not a host route (an
    administrator's /32 or /128): the node's own address on the node network, IPv4 first."""
    addresses = await backend.list_all(link)
    own = [a for a in addresses if not a.managed and a.prefixlen < a.ip.max_prefixlen]
    own = [a for a in own if not a.ip.is_link_local]
    if not own:
        raise RuntimeError(
            f"no address on {link} to answer liveness probes on: set --liveness-address"
        )
    own.sort(key=lambda a: a.ip.version)  # IPv4 first
    return str(own[0].ip)
