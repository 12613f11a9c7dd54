"""The BGPPeer resource: a router the nodes' FRR peers with (deploy/crds/bgppeers.yaml).

``from_dict`` applies the CRD's rules (its schema and its CEL rules) and raises ResourceError
naming the bad field, so an object the API server would refuse is refused here too
(tests/unit/test_crds.py compares the two on generated values). The parsed peer is the input
of ``core.frr_config``, which renders the FRR configuration of one node.

The password is kept out of ``repr`` (and so out of logs of a peer or its spec); no error
raised here quotes it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

from eipctl.core.conditions import Condition, conditions_from_list
from eipctl.core.fields import (
    ResourceError,
    check_ip,
    get_bool,
    get_int,
    get_mapping,
    get_str,
    get_str_list,
    join,
)
from eipctl.core.naming import is_dns1123_subdomain
from eipctl.core.resource_base import Resource, conditions_out
from eipctl.core.selectors import LabelSelector

__all__ = [
    "DEFAULT_PEER_PORT",
    "MAX_ASN",
    "MAX_PASSWORD_LENGTH",
    "WELL_KNOWN_COMMUNITIES",
    "BfdProfile",
    "BgpPeer",
    "BgpPeerSpec",
    "BgpPeerStatus",
    "check_password",
    "is_community",
    "is_large_community",
]

MAX_ASN: Final = 2**32 - 1
DEFAULT_PEER_PORT: Final = 179
MAX_PORT: Final = 65535
MAX_TIMER: Final = 65535
MAX_PASSWORD_LENGTH: Final = 80
"""TCP MD5 keys are at most 80 bytes (Linux TCP_MD5SIG_MAXKEYLEN)."""
MAX_COMMUNITIES: Final = 64
MAX_POOLS: Final = 256

WELL_KNOWN_COMMUNITIES: Final = (
    "internet",
    "local-AS",
    "no-advertise",
    "no-export",
    "no-peer",
    "blackhole",
    "graceful-shutdown",
    "accept-own",
    "accept-own-nexthop",
    "llgr-stale",
    "no-llgr",
    "route-filter-v4",
    "route-filter-v6",
    "route-filter-translated-v4",
    "route-filter-translated-v6",
)
"""The names FRR 8.4's ``set community`` takes (spelt as FRR spells them: ``local-AS``)."""

_NUMBER: Final = re.compile(r"0|[1-9][0-9]*")
_PASSWORD: Final = re.compile(r"[!-~]+")


def _number_at_most(text: str, maximum: int) -> bool:
    """A decimal without sign or leading zeros, 0..maximum (what the CRD's regexes accept)."""
    return (
        len(text) <= len(str(maximum))
        and _NUMBER.fullmatch(text) is not None
        and int(text) <= maximum
    )


def is_community(text: str) -> bool:
    """``AA:NN`` (each 0..65535) or one of WELL_KNOWN_COMMUNITIES."""
    if text in WELL_KNOWN_COMMUNITIES:
        return True
    parts = text.split(":")
    return len(parts) == 2 and all(_number_at_most(p, 0xFFFF) for p in parts)


def is_large_community(text: str) -> bool:
    """``A:B:C`` (each 0..4294967295)."""
    parts = text.split(":")
    return len(parts) == 3 and all(_number_at_most(p, MAX_ASN) for p in parts)


def check_password(value: str, path: str) -> str:
    """``value`` if FRR can take it as one word: printable ASCII, no spaces, 1..80 characters.

    The error never quotes the value.
    """
    if not value or len(value) > MAX_PASSWORD_LENGTH or not _PASSWORD.fullmatch(value):
        raise ResourceError(
            path,
            f"must be 1..{MAX_PASSWORD_LENGTH} printable ASCII characters without spaces",
        )
    return value


def _object_name(value: str, path: str, what: str) -> str:
    if not is_dns1123_subdomain(value):
        raise ResourceError(path, f"{value!r} is not a valid {what} name (DNS-1123 subdomain)")
    return value


def _family(address: str) -> int:
    return ipaddress.ip_address(address).version


# --- BFD -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BfdProfile:
    """BFD parameters of one peer's session (an FRR ``bfd`` profile); defaults are FRR's."""

    receive_interval_ms: int = 300
    transmit_interval_ms: int = 300
    detect_multiplier: int = 3
    echo_mode: bool = False
    passive_mode: bool = False
    minimum_ttl: int | None = None
    """Lowest TTL accepted on multihop sessions; None = FRR's default (254)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec.bfd") -> BfdProfile:
        def interval(key: str) -> int:
            value = get_int(d, key, path, minimum=10, maximum=60000)
            return 300 if value is None else value

        multiplier = get_int(d, "detectMultiplier", path, minimum=2, maximum=255)
        return cls(
            receive_interval_ms=interval("receiveIntervalMs"),
            transmit_interval_ms=interval("transmitIntervalMs"),
            detect_multiplier=3 if multiplier is None else multiplier,
            echo_mode=get_bool(d, "echoMode", path, default=False),
            passive_mode=get_bool(d, "passiveMode", path, default=False),
            minimum_ttl=get_int(d, "minimumTtl", path, minimum=1, maximum=254),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "receiveIntervalMs": self.receive_interval_ms,
            "transmitIntervalMs": self.transmit_interval_ms,
            "detectMultiplier": self.detect_multiplier,
            "echoMode": self.echo_mode,
            "passiveMode": self.passive_mode,
        }
        if self.minimum_ttl is not None:
            out["minimumTtl"] = self.minimum_ttl
        return out


# --- BGPPeer -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BgpPeerSpec:
    """One router and the session to it; the rules are the CRD's."""

    peer_address: str
    peer_asn: int
    my_asn: int
    peer_port: int = DEFAULT_PEER_PORT
    source_address: str = ""
    """FRR update-source; "" = the kernel's choice."""
    hold_time_seconds: int | None = None
    keepalive_time_seconds: int | None = None
    connect_time_seconds: int | None = None
    ebgp_multi_hop: bool = False
    password: str = field(default="", repr=False)
    """TCP MD5 password given inline; never in repr."""
    password_secret: str = ""
    """Name of the Secret (controller's namespace, key ``password``) holding the password."""
    bfd: BfdProfile | None = None
    node_selector: LabelSelector | None = None
    """Which nodes peer (on their IpNodes' labels); None = all."""
    communities: tuple[str, ...] = ()
    large_communities: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    """IpClaimPools announced to this peer; empty = every bgp pool of its family."""

    @property
    def family(self) -> int:
        """4 or 6: the address family of the session (and of the routes it carries)."""
        return _family(self.peer_address)

    @property
    def has_password(self) -> bool:
        return bool(self.password or self.password_secret)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> BgpPeerSpec:
        peer_address = check_ip(
            get_str(d, "peerAddress", path, required=True), join(path, "peerAddress")
        )
        peer_asn = _asn(d, "peerASN", path)
        my_asn = _asn(d, "myASN", path)
        port = get_int(d, "peerPort", path, minimum=1, maximum=MAX_PORT)
        source = get_str(d, "sourceAddress", path)
        if source:
            check_ip(source, join(path, "sourceAddress"))
            if _family(source) != _family(peer_address):
                raise ResourceError(
                    join(path, "sourceAddress"),
                    "must be of the same family as peerAddress",
                )
        hold = get_int(d, "holdTimeSeconds", path, maximum=MAX_TIMER)
        if hold is not None and 0 < hold < 3:
            raise ResourceError(join(path, "holdTimeSeconds"), f"{hold}: must be 0 or 3..65535")
        keepalive = get_int(d, "keepaliveTimeSeconds", path, minimum=1, maximum=MAX_TIMER)
        if hold is not None and keepalive is not None and keepalive >= hold:
            raise ResourceError(
                join(path, "keepaliveTimeSeconds"),
                f"{keepalive}: must be less than holdTimeSeconds ({hold})",
            )
        multi_hop = get_bool(d, "ebgpMultiHop", path, default=False)
        if multi_hop and peer_asn == my_asn:
            raise ResourceError(
                join(path, "ebgpMultiHop"), "is for eBGP peers (peerASN different from myASN)"
            )
        password = ""
        if d.get("password") is not None:
            password = check_password(get_str(d, "password", path), join(path, "password"))
        secret = get_str(d, "passwordSecret", path)
        if d.get("passwordSecret") is not None:
            _object_name(secret, join(path, "passwordSecret"), "Secret")
            if d.get("password") is not None:
                raise ResourceError(
                    join(path, "passwordSecret"), "set password or passwordSecret, not both"
                )
        bfd = get_mapping(d, "bfd", path)
        selector = get_mapping(d, "nodeSelector", path)
        return cls(
            peer_address=peer_address,
            peer_asn=peer_asn,
            my_asn=my_asn,
            peer_port=DEFAULT_PEER_PORT if port is None else port,
            source_address=source,
            hold_time_seconds=hold,
            keepalive_time_seconds=keepalive,
            connect_time_seconds=get_int(
                d, "connectTimeSeconds", path, minimum=1, maximum=MAX_TIMER
            ),
            ebgp_multi_hop=multi_hop,
            password=password,
            password_secret=secret,
            bfd=None if bfd is None else BfdProfile.from_dict(bfd, join(path, "bfd")),
            node_selector=(
                None
                if selector is None
                else LabelSelector.from_dict(selector, join(path, "nodeSelector"))
            ),
            communities=_checked_list(
                d, "communities", path, is_community, "AA:NN (0..65535) or a well-known name"
            ),
            large_communities=_checked_list(
                d, "largeCommunities", path, is_large_community, "A:B:C (0..4294967295)"
            ),
            pools=_pools(d, path),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "peerAddress": self.peer_address,
            "peerASN": self.peer_asn,
            "myASN": self.my_asn,
            "peerPort": self.peer_port,
            "ebgpMultiHop": self.ebgp_multi_hop,
        }
        optional: dict[str, Any] = {
            "sourceAddress": self.source_address or None,
            "holdTimeSeconds": self.hold_time_seconds,
            "keepaliveTimeSeconds": self.keepalive_time_seconds,
            "connectTimeSeconds": self.connect_time_seconds,
            "password": self.password or None,
            "passwordSecret": self.password_secret or None,
            "bfd": None if self.bfd is None else self.bfd.to_dict(),
            "nodeSelector": None if self.node_selector is None else self.node_selector.to_dict(),
            "communities": list(self.communities) or None,
            "largeCommunities": list(self.large_communities) or None,
            "pools": list(self.pools) or None,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def _asn(d: Mapping[str, Any], key: str, path: str) -> int:
    value = get_int(d, key, path, minimum=1, maximum=MAX_ASN)
    if value is None:
        raise ResourceError(join(path, key), "required")
    return value


def _checked_list(
    d: Mapping[str, Any],
    key: str,
    path: str,
    ok: Callable[[str], bool],
    form: str,
) -> tuple[str, ...]:
    values = get_str_list(d, key, path)
    field_path = join(path, key)
    if len(values) > MAX_COMMUNITIES:
        raise ResourceError(field_path, f"at most {MAX_COMMUNITIES} entries")
    for i, value in enumerate(values):
        if not ok(value):
            raise ResourceError(join(field_path, i), f"{value!r} is not {form}")
    return values


def _pools(d: Mapping[str, Any], path: str) -> tuple[str, ...]:
    values = get_str_list(d, "pools", path)
    field_path = join(path, "pools")
    if len(values) > MAX_POOLS:
        raise ResourceError(field_path, f"at most {MAX_POOLS} entries")
    for i, value in enumerate(values):
        _object_name(value, join(field_path, i), "IpClaimPool")
    return values


@dataclass(frozen=True, kw_only=True)
class BgpPeerStatus:
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "status") -> BgpPeerStatus:
        return cls(conditions=conditions_from_list(d.get("conditions"), join(path, "conditions")))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        conditions_out(out, self.conditions)
        return out


@dataclass(frozen=True, kw_only=True)
class BgpPeer(Resource):
    """A BGPPeer object; ``name`` (from metadata) is how FRR's objects for it are named."""

    KIND: ClassVar[str] = "BGPPeer"
    PLURAL: ClassVar[str] = "bgppeers"

    spec: BgpPeerSpec
    status: BgpPeerStatus = field(default_factory=BgpPeerStatus)

    @classmethod
    def named(cls, name: str, spec: BgpPeerSpec) -> Self:
        """A peer with only a name in its metadata (tests, and callers without an object)."""
        return cls(metadata={"name": name}, spec=spec)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        metadata, spec, status = cls._envelope(d)
        return cls(
            metadata=metadata,
            spec=BgpPeerSpec.from_dict(spec),
            status=BgpPeerStatus.from_dict(status),
        )

    def to_dict(self) -> dict[str, Any]:
        return self._to_dict(self.spec.to_dict(), self.status.to_dict())
