"""The sections of an FRR configuration, as text lines, for the peers ``frr_config`` chose.

Apart from ``frr_config`` so that choosing the peers (selection, conflicts, passwords, pools)
and writing FRR's syntax are read and changed one at a time: everything here is formatting
of peers already checked and resolved.

What the text does, for every rendered peer:

- ``redistribute connected route-map eipctl-connected`` in both address families, the
  route-map matching ``interface <link>``: only the link's addresses enter BGP;
- an inbound route-map that denies everything (eipctl imports no route) and an outbound one
  that permits only host routes (``ge 32`` / ``ge 128``) inside the peer's pools, adding its
  communities. Every neighbor has both, so FRR's ``bgp ebgp-requires-policy`` (on by default)
  stays on;
- ``no bgp default ipv4-unicast``; a neighbor is activated in the family of its address only;
- BFD through one ``bfd`` profile per peer that asks for it.

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from eipctl.core.bgp_peer import DEFAULT_PEER_PORT, BfdProfile, BgpPeer
from eipctl.core.frr_names import (
    CONNECTED_ROUTE_MAP,
    DENY_ALL_ROUTE_MAP,
    bfd_profile_name,
    out_route_map_name,
    prefix_list_name,
)

__all__ = ["RenderedPeer", "bfd_profiles", "prefix_lists", "route_maps", "router_bgp"]

_BFD_DEFAULTS: Final = BfdProfile()
_FRR_MINIMUM_TTL: Final = 254
_MAX_TIMER: Final = 65535


@dataclass(frozen=True)
class RenderedPeer:
    """A peer that made it into the text, with what the text needs, resolved."""

    peer: BgpPeer
    address: str
    """The peer's address as FRR writes it back (RFC 5952 for IPv6)."""
    source: str
    """Its update-source address, written back the same way, or "" for none."""
    password: str = field(repr=False)
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @property
    def name(self) -> str:
        return self.peer.name


def prefix_lists(chosen: Sequence[RenderedPeer]) -> list[str]:
    lines = []
    for peer in chosen:
        if not peer.networks:
            continue
        keyword = "ip" if peer.peer.spec.family == 4 else "ipv6"
        for seq, network in enumerate(peer.networks, start=1):
            host = network.max_prefixlen
            rest = "" if network.prefixlen == host else f" ge {host}"
            lines.append(
                f"{keyword} prefix-list {prefix_list_name(peer.name)} seq {seq * 10} "
                f"permit {network}{rest}"
            )
    return [*lines, "!"] if lines else []


def route_maps(chosen: Sequence[RenderedPeer], link: str) -> list[str]:
    lines = [
        f"route-map {CONNECTED_ROUTE_MAP} permit 10",
        f" match interface {link}",
        "exit",
        "!",
        f"route-map {DENY_ALL_ROUTE_MAP} deny 10",
        "exit",
        "!",
    ]
    for peer in chosen:
        name = out_route_map_name(peer.name)
        if not peer.networks:
            lines += [f"route-map {name} deny 10", "exit", "!"]
            continue
        spec = peer.peer.spec
        keyword = "ip" if spec.family == 4 else "ipv6"
        lines += [
            f"route-map {name} permit 10",
            f" match {keyword} address prefix-list {prefix_list_name(peer.name)}",
        ]
        if spec.communities:
            lines.append(f" set community {' '.join(dict.fromkeys(spec.communities))} additive")
        if spec.large_communities:
            values = " ".join(dict.fromkeys(spec.large_communities))
            lines.append(f" set large-community {values} additive")
        lines += ["exit", "!"]
    return lines


def bfd_profiles(chosen: Sequence[RenderedPeer]) -> list[str]:
    """One profile per peer with BFD; only values that differ from FRR's defaults are
    written, as FRR writes its running configuration (so frr-reload.py finds no difference)."""
    with_bfd = [(p.name, bfd) for p in chosen if (bfd := p.peer.spec.bfd) is not None]
    if not with_bfd:
        return []
    lines = ["bfd"]
    for name, bfd in with_bfd:
        lines.append(f" profile {bfd_profile_name(name)}")
        if bfd.detect_multiplier != _BFD_DEFAULTS.detect_multiplier:
            lines.append(f"  detect-multiplier {bfd.detect_multiplier}")
        if bfd.receive_interval_ms != _BFD_DEFAULTS.receive_interval_ms:
            lines.append(f"  receive-interval {bfd.receive_interval_ms}")
        if bfd.transmit_interval_ms != _BFD_DEFAULTS.transmit_interval_ms:
            lines.append(f"  transmit-interval {bfd.transmit_interval_ms}")
        if bfd.echo_mode:
            lines.append("  echo-mode")
        if bfd.passive_mode:
            lines.append("  passive-mode")
        if bfd.minimum_ttl is not None and bfd.minimum_ttl != _FRR_MINIMUM_TTL:
            lines.append(f"  minimum-ttl {bfd.minimum_ttl}")
        lines += [" exit", " !"]
    return [*lines, "exit", "!"]


def router_bgp(chosen: Sequence[RenderedPeer], asn: int, router_id: str) -> list[str]:
    lines = [f"router bgp {asn}"]
    if router_id:
        lines.append(f" bgp router-id {router_id}")
    lines.append(" no bgp default ipv4-unicast")
    for peer in chosen:
        lines += _neighbor(peer)
    for family, af in ((4, "ipv4"), (6, "ipv6")):
        lines += [
            " !",
            f" address-family {af} unicast",
            f"  redistribute connected route-map {CONNECTED_ROUTE_MAP}",
        ]
        for peer in chosen:
            if peer.peer.spec.family != family:
                continue
            n = f"  neighbor {peer.address}"
            lines += [
                f"{n} activate",
                f"{n} route-map {DENY_ALL_ROUTE_MAP} in",
                f"{n} route-map {out_route_map_name(peer.name)} out",
            ]
        lines.append(" exit-address-family")
    return [*lines, "exit", "!"]


def _timers(peer: BgpPeer) -> tuple[int, int] | None:
    """(keepalive, hold): hold alone -> keepalive hold/3; keepalive alone -> hold 3x."""
    hold, keepalive = peer.spec.hold_time_seconds, peer.spec.keepalive_time_seconds
    if hold is not None:
        return (hold // 3 if keepalive is None else keepalive), hold
    if keepalive is not None:
        return keepalive, min(3 * keepalive, _MAX_TIMER)
    return None


def _neighbor(peer: RenderedPeer) -> list[str]:
    spec = peer.peer.spec
    n = f" neighbor {peer.address}"
    lines = [f"{n} remote-as {spec.peer_asn}", f"{n} description {peer.name}"]
    if spec.peer_port != DEFAULT_PEER_PORT:
        lines.append(f"{n} port {spec.peer_port}")
    if peer.source:
        lines.append(f"{n} update-source {peer.source}")
    if spec.ebgp_multi_hop:
        lines.append(f"{n} ebgp-multihop")
    if peer.password:
        lines.append(f"{n} password {peer.password}")
    timers = _timers(peer.peer)
    if timers is not None:
        lines.append(f"{n} timers {timers[0]} {timers[1]}")
    if spec.connect_time_seconds is not None:
        lines.append(f"{n} timers connect {spec.connect_time_seconds}")
    if spec.bfd is not None:
        lines.append(f"{n} bfd profile {bfd_profile_name(peer.name)}")
    return lines
