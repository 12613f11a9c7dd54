"""Typed, immutable views of eipctl's custom resources: IpClaimPool, IpClaim, IpNode.

``from_dict`` parses the camelCase JSON the API returns and raises ResourceError naming the
bad field; ``to_dict`` gives it back, ready to send. ``metadata`` is kept as an opaque copy
(name, labels, resourceVersion, ... pass through untouched), so a read-modify-write with
``dataclasses.replace`` keeps the resourceVersion precondition. Optional fields that are
empty are left out of ``to_dict`` (like Go's omitempty); an empty list means the same as an
absent one. The CRDs in deploy/crds/ are the schema; tests check the two agree.

Objects holding dicts (metadata, labels) compare by value but are not hashable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, Self, cast, get_args

from eipctl.core.claims import (
    BOUND_NODE,
    CONDITIONS,
    IP,
    LINK,
    NODE_BOUND,
    NODE_NAME,
    PHASE,
    PREFIX_LENGTH,
    PREVIOUS_NODE,
    SERVICES,
)
from eipctl.core.conditions import Condition, conditions_from_list
from eipctl.core.fields import (
    ResourceError,
    as_list,
    as_str,
    check_ip,
    check_network,
    get_bool,
    get_int,
    get_list,
    get_mapping,
    get_str,
    get_str_list,
    join,
)
from eipctl.core.ipnode import IpNode, IpNodeSpec, IpNodeStatus  # one module per kind; re-exported
from eipctl.core.naming import LABEL_POOL
from eipctl.core.pool import Pool
from eipctl.core.resource_base import MAX_COUNT, Resource, conditions_out
from eipctl.core.selectors import LabelSelector

__all__ = [
    "MAX_COUNT",
    "POOL_PROVIDERS",
    "Announce",
    "ClaimPhase",
    "IpClaim",
    "IpClaimPool",
    "IpClaimPoolSpec",
    "IpClaimPoolStatus",
    "IpClaimSpec",
    "IpClaimStatus",
    "IpNode",
    "IpNodeSpec",
    "IpNodeStatus",
    "PoolPlacement",
    "PoolProvider",
    "ResourceError",
]

ClaimPhase = Literal["Pending", "Scheduled", "Bound", "Failed"]
PoolProvider = Literal["", "aws"]
POOL_PROVIDERS: Final = frozenset(get_args(PoolProvider))
Announce = Literal["l2", "bgp"]
ANNOUNCE_MODES: Final = frozenset(get_args(Announce))
PoolPlacement = Literal["", "spread", "single", "all"]
POOL_PLACEMENTS: Final = frozenset(get_args(PoolPlacement))
CLAIM_PHASES: Final = frozenset(get_args(ClaimPhase))


def _prefix_length(d: Mapping[str, Any], path: str, address: str) -> int | None:
    """spec.prefixLength, at most 32 for IPv4 (the CRD says the same with a CEL rule)."""
    bits = ipaddress.ip_interface(address).max_prefixlen
    return get_int(d, "prefixLength", path, minimum=1, maximum=bits)


def _provider(d: Mapping[str, Any], path: str) -> PoolProvider:
    value = get_str(d, "provider", path)
    if value not in POOL_PROVIDERS:
        raise ResourceError(
            join(path, "provider"), f"{value!r} is not one of {sorted(POOL_PROVIDERS)}"
        )
    return cast(PoolProvider, value)


def _announce(d: Mapping[str, Any], path: str) -> Announce:
    value = get_str(d, "announce", path) or "l2"
    if value not in ANNOUNCE_MODES:
        raise ResourceError(
            join(path, "announce"), f"{value!r} is not one of {sorted(ANNOUNCE_MODES)}"
        )
    return cast(Announce, value)


def _placement(d: Mapping[str, Any], path: str) -> PoolPlacement:
    value = get_str(d, "placement", path)
    if value not in POOL_PLACEMENTS:
        raise ResourceError(
            join(path, "placement"), f"{value!r} is not one of {sorted(POOL_PLACEMENTS)}"
        )
    return cast(PoolPlacement, value)


def _selector(d: Mapping[str, Any], key: str, path: str) -> LabelSelector | None:
    value = get_mapping(d, key, path)
    return None if value is None else LabelSelector.from_dict(value, join(path, key))


# --- IpClaimPool ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IpClaimPoolSpec:
    """What a pool offers; the address math lives in core/pool.py."""

    cidr: str
    ranges: tuple[tuple[str, str], ...] = ()
    """Inclusive [first, last] ranges; empty = the whole cidr (minus net/broadcast for v4)."""
    exclude: tuple[str, ...] = ()
    """IPs or CIDRs never handed out."""
    prefix_length: int | None = None
    """Mask on the interface; None = 32 (v4) / 128 (v6)."""
    auto_assign: bool = True
    allow_manual: bool = False
    service_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    node_selector: LabelSelector | None = None
    provider: PoolProvider = ""
    """Where the addresses live: "" = on node links (bare metal), "aws" = EC2 Elastic IPs."""
    announce: Announce = "l2"
    """How the IPs are made reachable: "l2" = on the node's link with gratuitous ARP / NA;
    "bgp" = a host route on the controller's BGP link, which the node's FRR redistributes."""
    placement: PoolPlacement = ""
    """Placement policy for this pool's claims; "" = the scheduler's ``--policy``."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> IpClaimPoolSpec:
        ranges_path = join(path, "ranges")
        ranges = []
        for i, item in enumerate(get_list(d, "ranges", path)):
            pair = as_list(item, join(ranges_path, i))
            if len(pair) != 2:
                raise ResourceError(join(ranges_path, i), "expected [first, last]")
            first, last = (
                check_ip(as_str(v, join(join(ranges_path, i), j)), join(join(ranges_path, i), j))
                for j, v in enumerate(pair)
            )
            ranges.append((first, last))
        exclude_path = join(path, "exclude")
        cidr = check_network(get_str(d, "cidr", path, required=True), join(path, "cidr"))
        return cls(
            cidr=cidr,
            ranges=tuple(ranges),
            exclude=tuple(
                check_network(v, join(exclude_path, i), bare_ip=True)
                for i, v in enumerate(get_str_list(d, "exclude", path))
            ),
            prefix_length=_prefix_length(d, path, cidr),
            auto_assign=get_bool(d, "autoAssign", path, default=True),
            allow_manual=get_bool(d, "allowManual", path, default=False),
            service_selector=_selector(d, "serviceSelector", path),
            namespace_selector=_selector(d, "namespaceSelector", path),
            node_selector=_selector(d, "nodeSelector", path),
            provider=_provider(d, path),
            announce=_announce(d, path),
            placement=_placement(d, path),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cidr": self.cidr}
        if self.ranges:
            out["ranges"] = [[first, last] for first, last in self.ranges]
        if self.exclude:
            out["exclude"] = list(self.exclude)
        if self.prefix_length is not None:
            out["prefixLength"] = self.prefix_length
        out["autoAssign"] = self.auto_assign
        out["allowManual"] = self.allow_manual
        for key, selector in (
            ("serviceSelector", self.service_selector),
            ("namespaceSelector", self.namespace_selector),
            ("nodeSelector", self.node_selector),
        ):
            if selector is not None:
                out[key] = selector.to_dict()
        if self.provider:
            out["provider"] = self.provider
        if self.announce != "l2":
            out["announce"] = self.announce
        if self.placement:
            out["placement"] = self.placement
        return out


@dataclass(frozen=True, kw_only=True)
class IpClaimPoolStatus:
    allocated: int | None = None
    """Number of IpClaims in the pool; None until the allocator has counted."""
    free: int | None = None
    """Addresses left, saturated at MAX_COUNT."""
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "status") -> IpClaimPoolStatus:
        return cls(
            allocated=get_int(d, "allocated", path, maximum=MAX_COUNT),
            free=get_int(d, "free", path, maximum=MAX_COUNT),
            conditions=conditions_from_list(d.get("conditions"), join(path, "conditions")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.allocated is not None:
            out["allocated"] = self.allocated
        if self.free is not None:
            out["free"] = self.free
        conditions_out(out, self.conditions)
        return out


@dataclass(frozen=True, kw_only=True)
class IpClaimPool(Resource):
    KIND: ClassVar[str] = "IpClaimPool"
    PLURAL: ClassVar[str] = "ipclaimpools"

    spec: IpClaimPoolSpec
    status: IpClaimPoolStatus = field(default_factory=IpClaimPoolStatus)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        metadata, spec, status = cls._envelope(d)
        return cls(
            metadata=metadata,
            spec=IpClaimPoolSpec.from_dict(spec),
            status=IpClaimPoolStatus.from_dict(status),
        )

    def to_dict(self) -> dict[str, Any]:
        return self._to_dict(self.spec.to_dict(), self.status.to_dict())

    def address_pool(self) -> Pool:
        """The addresses it hands out (cidr, ranges, exclude); raises PoolError if unusable."""
        return Pool.parse(self.name, self.spec.cidr, self.spec.ranges, self.spec.exclude)


# --- IpClaim -------------------------------------------------------------------------------


def _service_ref(value: str, path: str) -> str:
    namespace, slash, name = value.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ResourceError(path, f"{value!r} is not a namespace/name Service reference")
    return value


@dataclass(frozen=True, kw_only=True)
class IpClaimSpec:
    ip: str
    prefix_length: int | None = None
    """Mask on the interface; None = 32 (v4) / 128 (v6)."""
    node_name: str = ""
    """IpNode chosen by the scheduler; "" = unplaced."""
    link: str = ""
    """Host link; "" = the IpNode's spec.link."""
    services: tuple[str, ...] = ()
    """The Services using the IP, as "namespace/name"."""
    node_bound: bool = False
    """Bound to ``node_name`` for good, never moved by the scheduler: a per-node claim of
    placement policy ``all``, or a Node's own IP (``eipctl nodeips``)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> IpClaimSpec:
        services_path = join(path, SERVICES)
        ip = check_ip(get_str(d, IP, path, required=True), join(path, IP))
        return cls(
            ip=ip,
            prefix_length=_prefix_length(d, path, ip),
            node_name=get_str(d, NODE_NAME, path),
            link=get_str(d, LINK, path),
            services=tuple(
                _service_ref(v, join(services_path, i))
                for i, v in enumerate(get_str_list(d, SERVICES, path))
            ),
            node_bound=get_bool(d, NODE_BOUND, path, default=False),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {IP: self.ip}
        if self.prefix_length is not None:
            out[PREFIX_LENGTH] = self.prefix_length
        if self.node_name:
            out[NODE_NAME] = self.node_name
        if self.link:
            out[LINK] = self.link
        if self.services:
            out[SERVICES] = list(self.services)
        if self.node_bound:
            out[NODE_BOUND] = True
        return out


@dataclass(frozen=True, kw_only=True)
class IpClaimStatus:
    phase: ClaimPhase = "Pending"
    bound_node: str = ""
    """The node that reported the IP on its link."""
    previous_node: str = ""
    """Where it was bound before the scheduler moved it, until it is bound again."""
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "status") -> IpClaimStatus:
        phase = get_str(d, PHASE, path) or "Pending"
        if phase not in CLAIM_PHASES:
            raise ResourceError(join(path, PHASE), f"{phase!r} is not one of {CLAIM_PHASES}")
        return cls(
            phase=cast(ClaimPhase, phase),
            bound_node=get_str(d, BOUND_NODE, path),
            previous_node=get_str(d, PREVIOUS_NODE, path),
            conditions=conditions_from_list(d.get(CONDITIONS), join(path, CONDITIONS)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {PHASE: self.phase}
        if self.bound_node:
            out[BOUND_NODE] = self.bound_node
        if self.previous_node:
            out[PREVIOUS_NODE] = self.previous_node
        conditions_out(out, self.conditions)
        return out


@dataclass(frozen=True, kw_only=True)
class IpClaim(Resource):
    KIND: ClassVar[str] = "IpClaim"
    PLURAL: ClassVar[str] = "ipclaims"

    spec: IpClaimSpec
    status: IpClaimStatus = field(default_factory=IpClaimStatus)

    @property
    def pool(self) -> str:
        return self.labels.get(LABEL_POOL, "")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        metadata, spec, status = cls._envelope(d)
        return cls(
            metadata=metadata,
            spec=IpClaimSpec.from_dict(spec),
            status=IpClaimStatus.from_dict(status),
        )

    def to_dict(self) -> dict[str, Any]:
        return self._to_dict(self.spec.to_dict(), self.status.to_dict())
