"""The FRR configuration of one node, rendered from the BGPPeers that select it (docs/bgp.md).

eipctl never speaks BGP. The controller puts the IPs of ``announce: bgp`` pools as /32 or
/128 addresses on its dummy link (``eipctl-bgp``); FRR, beside it on the node, redistributes
that link's connected routes to the peers. ``render`` writes the *whole* configuration (a
reloader applies it with frr-reload.py, which removes whatever the text does not hold), so
a node whose last peer went away gets a configuration without ``router bgp`` and withdraws
everything.

What the text does, for every rendered peer:

- ``redistribute connected route-map eipctl-connected`` in both address families, the
  route-map matching ``interface <link>``: only the link's addresses enter BGP;
- an inbound route-map that denies everything (eipctl imports no route) and an outbound one
  that permits only host routes (``ge 32`` / ``ge 128``) inside the peer's pools, adding its
  communities. Every neighbor has both, so FRR's ``bgp ebgp-requires-policy`` (on by default)
  stays on;
- ``no bgp default ipv4-unicast``; a neighbor is activated in the family of its address only;
- BFD through one ``bfd`` profile per peer that asks for it.

One BGP instance per node: FRR has one ``router bgp ASN`` per VRF, so the peers' ``myASN``
must agree. The first peer by name sets it; a peer with another is left out (ASNConflict).
Other peers left out: a second peer with the same address (DuplicatePeerAddress, the first by
name stays), a password Secret that cannot be read (PasswordMissing) or holds an unusable
password (PasswordInvalid). A peer is never rendered without its password. Rendered, with a
problem: PoolNotFound (a named pool is not a bgp pool), NoPool (nothing of its family to
announce: its out route-map denies all).

Names given to FRR (route-maps, prefix-lists, BFD profiles) are ``eipctl-<kind>-<peer>``
when that is a plain word of at most 63 characters, else a truncated, sanitised form with a
hash suffix after ``_`` (which no Kubernetes name contains, so the two forms never collide).

Pure: no I/O. The output is a function of the inputs only (sorted by name, no clock).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from eipctl.core.bgp_peer import DEFAULT_PEER_PORT, BfdProfile, BgpPeer, check_password
from eipctl.core.fields import ResourceError
from eipctl.core.selectors import matches

__all__ = [
    "BGP_LINK",
    "CONNECTED_ROUTE_MAP",
    "DENY_ALL_ROUTE_MAP",
    "BgpPool",
    "FrrConfig",
    "NodeBgpFacts",
    "PeerProblem",
    "ProblemReason",
    "bfd_profile_name",
    "frr_name",
    "out_route_map_name",
    "peers_for_node",
    "prefix_list_name",
    "render",
]

BGP_LINK: Final = "eipctl-bgp"
"""The dummy link holding the IPs of bgp pools."""
CONNECTED_ROUTE_MAP: Final = "eipctl-connected"
DENY_ALL_ROUTE_MAP: Final = "eipctl-deny-all"
MAX_FRR_NAME: Final = 63
"""FRR's BFD profile names are at most 64 characters; every name here keeps under that."""

ProblemReason = Literal[
    "ASNConflict",
    "DuplicatePeerAddress",
    "PasswordMissing",
    "PasswordInvalid",
    "PoolNotFound",
    "NoPool",
]

_PLAIN: Final = re.compile(r"[a-z0-9][a-z0-9.-]*")
_UNSAFE: Final = re.compile(r"[^a-z0-9.-]")
_LINK: Final = re.compile(r"[^/:\s]{1,15}")
_BFD_DEFAULTS: Final = BfdProfile()
_FRR_MINIMUM_TTL: Final = 254
_MAX_TIMER: Final = 65535


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


# --- names ---------------------------------------------------------------------------------


def frr_name(prefix: str, name: str) -> str:
    """``<prefix>-<name>`` if that is a plain word of at most 63 characters, else a sanitised
    truncation with an 8-hex-digit hash of ``name`` after ``_``."""
    word = f"{prefix}-{name}"
    if _PLAIN.fullmatch(name) and len(word) <= MAX_FRR_NAME:
        return word
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    keep = MAX_FRR_NAME - len(prefix) - 2 - len(digest)
    return f"{prefix}-{_UNSAFE.sub('_', name)[:keep]}_{digest}"


def out_route_map_name(peer: str) -> str:
    return frr_name("eipctl-out", peer)


def prefix_list_name(peer: str) -> str:
    return frr_name("eipctl-pools", peer)


def bfd_profile_name(peer: str) -> str:
    return frr_name("eipctl-bfd", peer)


# --- selection -----------------------------------------------------------------------------


def peers_for_node(peers: Iterable[BgpPeer], labels: Mapping[str, str]) -> list[BgpPeer]:
    """The peers whose nodeSelector admits a node with ``labels`` (absent = all), by name."""
    return sorted((p for p in peers if matches(p.spec.node_selector, labels)), key=lambda p: p.name)


# --- rendering -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Peer:
    """A peer that made it into the text, with what the text needs."""

    peer: BgpPeer
    address: str
    password: str = field(repr=False)
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @property
    def name(self) -> str:
        return self.peer.name


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
    chosen: list[_Peer] = []
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
            _Peer(
                peer=peer,
                address=address,
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
        lines += _prefix_lists(chosen)
        lines += _route_maps(chosen, node.link)
        lines += _bfd(chosen)
        lines += _router(chosen, asn, node.router_id)
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


def _prefix_lists(chosen: Sequence[_Peer]) -> list[str]:
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


def _route_maps(chosen: Sequence[_Peer], link: str) -> list[str]:
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


def _bfd(chosen: Sequence[_Peer]) -> list[str]:
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


def _timers(peer: BgpPeer) -> tuple[int, int] | None:
    """(keepalive, hold): hold alone -> keepalive hold/3; keepalive alone -> hold 3x."""
    hold, keepalive = peer.spec.hold_time_seconds, peer.spec.keepalive_time_seconds
    if hold is not None:
        return (hold // 3 if keepalive is None else keepalive), hold
    if keepalive is not None:
        return keepalive, min(3 * keepalive, _MAX_TIMER)
    return None


def _neighbor(peer: _Peer) -> list[str]:
    spec = peer.peer.spec
    n = f" neighbor {peer.address}"
    lines = [f"{n} remote-as {spec.peer_asn}", f"{n} description {peer.name}"]
    if spec.peer_port != DEFAULT_PEER_PORT:
        lines.append(f"{n} port {spec.peer_port}")
    if spec.source_address:
        lines.append(f"{n} update-source {_ip(spec.source_address)}")
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


def _router(chosen: Sequence[_Peer], asn: int, router_id: str) -> list[str]:
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
