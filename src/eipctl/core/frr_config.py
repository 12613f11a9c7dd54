"""The FRR configuration of one node, rendered from the BGPPeers that select it (docs/bgp.md).

eipctl never speaks BGP. The controller puts the IPs of ``announce: bgp`` pools as /32 or
/128 addresses on its dummy link (``eipctl-bgp``); FRR, beside it on the node, redistributes
that link's connected routes to the peers. ``render`` writes the *whole* configuration (a
reloader applies it with frr-reload.py, which removes whatever the text does not hold), so
a node whose last peer went away gets a configuration without ``router bgp`` and withdraws
everything.

This module chooses the peers and resolves what they need; ``frr_sections`` writes the
text (what it does for every peer is said there), with the names of ``frr_names``.

One BGP instance per node: FRR has one ``router bgp ASN`` per VRF, so the peers' ``myASN``
must agree. The first peer by name sets it; a peer with another is left out (ASNConflict).
Other peers left out: a second peer with the same address (DuplicatePeerAddress, the first by
name stays), a password Secret that cannot be read (PasswordMissing) or holds an unusable
password (PasswordInvalid). A peer is never rendered without its password. Rendered, with a
problem: PoolNotFound (a named pool is not a bgp pool), NoPool (nothing of its family to
announce: its out route-map denies all).

Pure: no I/O. The output is a function of the inputs only (sorted by name, no clock).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from eipctl.core.bgp_peer import BgpPeer, check_password
from eipctl.core.fields import ResourceError
from eipctl.core.frr_sections import (
    RenderedPeer,
    bfd_profiles,
    prefix_lists,
    route_maps,
    router_bgp,
)
from eipctl.core.selectors import matches

__all__ = [
    "BGP_LINK",
    "BgpPool",
    "FrrConfig",
    "NodeBgpFacts",
    "PeerProblem",
    "ProblemReason",
    "peers_for_node",
    "render",
]

BGP_LINK: Final = "eipctl-bgp"
"""The dummy link holding the IPs of bgp pools."""

ProblemReason = Literal[
    "ASNConflict",
    "DuplicatePeerAddress",
    "PasswordMissing",
    "PasswordInvalid",
    "PoolNotFound",
    "NoPool",
]

_LINK: Final = re.compile(r"[^/:\s]{1,15}")


# --- inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeBgpFacts:
    """What the rendering needs to know of its node. ``labels`` is copied; read-only."""

    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    router_id: str = ""
    """An IPv4 address of the node, or "" to let FRR pick one."""
    link: str = BGP_LINK

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", dict(self.labels))
        if not self.node or any(c.isspace() or not c.isprintable() for c in self.node):
            raise ValueError(f"node {self.node!r}: not a node name")
        if self.router_id and not isinstance(_ip(self.router_id), ipaddress.IPv4Address):
            raise ValueError(f"router_id {self.router_id!r}: must be an IPv4 address")
        if not _LINK.fullmatch(self.link):
            raise ValueError(f"link {self.link!r}: not a link name")


@dataclass(frozen=True)
class BgpPool:
    """An IpClaimPool with ``announce: bgp``: its name and network (host bits allowed)."""

    name: str
    cidr: str

    def __post_init__(self) -> None:
        try:
            ipaddress.ip_network(self.cidr, strict=False)
        except ValueError as exc:
            raise ValueError(f"pool {self.name!r}: {exc}") from None

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.cidr, strict=False)


# --- outputs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerProblem:
    """Why a selected peer was left out, or what is wrong with one rendered anyway.

    ``message`` never holds a password.
    """

    peer: str
    reason: ProblemReason
    message: str


@dataclass(frozen=True)
class FrrConfig:
    """The rendered configuration. ``text`` holds the peers' passwords: it is kept out of
    ``repr``, so logging the object does not log them."""

    text: str = field(repr=False)
    peers: tuple[str, ...] = ()
    """Names of the peers rendered, sorted."""
    problems: tuple[PeerProblem, ...] = ()


# --- selection -----------------------------------------------------------------------------


def peers_for_node(peers: Iterable[BgpPeer], labels: Mapping[str, str]) -> list[BgpPeer]:
    """The peers whose nodeSelector admits a node with ``labels`` (absent = all), by name."""
    return sorted((p for p in peers if matches(p.spec.node_selector, labels)), key=lambda p: p.name)


# --- rendering -----------------------------------------------------------------------------


def render(
    node: NodeBgpFacts,
    peers: Iterable[BgpPeer],
    pools: Iterable[BgpPool],
    passwords: Mapping[str, str],
) -> FrrConfig:
    """The complete FRR configuration of ``node``.

    ``peers``: every BGPPeer (those selecting the node are picked here); ``pools``: the pools
    with announce bgp; ``passwords``: Secret name -> the value of its key ``password``, for
    the Secrets named by passwordSecret that could be read. Raises ValueError when two peers
    or two pools share a name.
    """
    all_peers = list(peers)
    _unique("peer", [p.name for p in all_peers])
    pool_list = list(pools)
    _unique("pool", [p.name for p in pool_list])
    by_name = {p.name: p for p in pool_list}

    problems: list[PeerProblem] = []
    chosen: list[RenderedPeer] = []
    selected = peers_for_node(all_peers, node.labels)
    asn = selected[0].spec.my_asn if selected else 0
    holders: dict[str, str] = {}
    for peer in selected:
        problem = _left_out(peer, selected[0], asn, holders, passwords)
        if problem is not None:
            problems.append(problem)
            continue
        address = _address(peer)
        holders[address] = peer.name
        networks, pool_problems = _networks(peer, by_name)
        problems += pool_problems
        chosen.append(
            RenderedPeer(
                peer=peer,
                address=address,
                source=_source(peer),
                password=_password(peer, passwords) or "",
                networks=networks,
            )
        )

    lines = [
        f"! FRR configuration of node {node.node}",
        "! rendered by eipctl; edits are overwritten",
        "frr defaults traditional",
        "ip nht resolve-via-default",
        "ipv6 nht resolve-via-default",
        "!",
    ]
    if chosen:
        # a reload that touches a route-map would otherwise hold every update for 5 s
        lines += ["bgp route-map delay-timer 0", "!"]
        lines += prefix_lists(chosen)
        lines += route_maps(chosen, node.link)
        lines += bfd_profiles(chosen)
        lines += router_bgp(chosen, asn, node.router_id)
    return FrrConfig(
        text="\n".join(lines) + "\n",
        peers=tuple(p.name for p in chosen),
        problems=tuple(problems),
    )


def _unique(what: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {what}s named {name!r}")
        seen.add(name)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None


def _address(peer: BgpPeer) -> str:
    """The peer's address as FRR writes it back (RFC 5952 for IPv6)."""
    return str(_ip(peer.spec.peer_address))


def _source(peer: BgpPeer) -> str:
    """The peer's update-source address as FRR writes it back, or "" for none."""
    source = peer.spec.source_address
    return str(_ip(source)) if source else ""


def _password(peer: BgpPeer, passwords: Mapping[str, str]) -> str | None:
    """The password to render ("" = none), or None when its Secret could not be read."""
    if peer.spec.password_secret:
        return passwords.get(peer.spec.password_secret)
    return peer.spec.password


def _left_out(
    peer: BgpPeer,
    first: BgpPeer,
    asn: int,
    holders: Mapping[str, str],
    passwords: Mapping[str, str],
) -> PeerProblem | None:
    spec = peer.spec
    if spec.my_asn != asn:
        return PeerProblem(
            peer.name,
            "ASNConflict",
            f"myASN {spec.my_asn} differs from {asn}, set by BGPPeer {first.name} (the first "
            f"by name selecting this node); FRR runs one BGP instance per node",
        )
    address = _address(peer)
    if address in holders:
        return PeerProblem(
            peer.name,
            "DuplicatePeerAddress",
            f"peerAddress {address} is BGPPeer {holders[address]}'s (the first by name)",
        )
    password = _password(peer, passwords)
    secret = spec.password_secret
    where = f"the password in Secret {secret} (key password)" if secret else "spec.password"
    if password is None:
        return PeerProblem(
            peer.name,
            "PasswordMissing",
            f"{where} could not be read; the peer is not configured without it",
        )
    if password or secret:  # a Secret holding "" is no licence to peer without a password
        try:
            check_password(password, "password")
        except ResourceError:
            return PeerProblem(
                peer.name,
                "PasswordInvalid",
                f"{where} must be 1..80 printable ASCII characters without spaces",
            )
    return None


def _networks(
    peer: BgpPeer, pools: Mapping[str, BgpPool]
) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...], list[PeerProblem]]:
    """The networks of the peer's pools in its family, sorted, and what is wrong with them."""
    problems = []
    wanted = peer.spec.pools
    if wanted:
        missing = [n for n in wanted if n not in pools]
        if missing:
            problems.append(
                PeerProblem(
                    peer.name,
                    "PoolNotFound",
                    f"no pool with announce bgp named {', '.join(missing)}",
                )
            )
        candidates = [pools[n] for n in wanted if n in pools]
    else:
        candidates = list(pools.values())
    family = peer.spec.family
    networks = sorted(
        {p.network for p in candidates if p.network.version == family},
        key=lambda n: (int(n.network_address), n.prefixlen),
    )
    if not networks:
        scope = "among its pools" if wanted else "among the bgp pools"
        problems.append(
            PeerProblem(
                peer.name,
                "NoPool",
                f"no IPv{family} network {scope}: nothing is announced to it",
            )
        )
    return tuple(networks), problems
