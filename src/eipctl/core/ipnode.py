"""Typed view of IpNode: one per controller, named after its Kubernetes Node.

Split from core/resources.py (same conventions: ``from_dict`` raises ResourceError naming the
bad field, ``to_dict`` leaves empty optional fields out). The controller writes the status
fields by name (its heartbeat is a bare merge patch); everyone who reads them parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Final, Self

from eipctl.core.conditions import (
    Condition,
    conditions_from_list,
    find_condition,
    put_condition,
    readable_conditions,
)
from eipctl.core.fields import (
    Mutation,
    ResourceError,
    check_ip,
    check_network,
    get_int,
    get_str,
    get_str_list,
    join,
)
from eipctl.core.resource_base import MAX_COUNT, Resource, conditions_out

# --- field names (the CRD, deploy/crds/ipnodes.yaml) ----------------------------------------
LINK: Final = "link"
LIVENESS_ADDRESS: Final = "livenessAddress"
"""spec: where the controller answers liveness probes (an IP on the node network)."""
LIVENESS_PORT: Final = "livenessPort"
LIVENESS_PEER_KEY: Final = "livenessPeerKey"
"""spec: the controller's X25519 public key for peer queries (`core.peer_keys`), base64."""
HEARTBEAT: Final = "heartbeat"
"""status: the counter the controller bumps every API heartbeat (10 s); compare values."""
LAST_HEARTBEAT_TIME: Final = "lastHeartbeatTime"
"""status: the controller's wall clock at its last API heartbeat; for people, never judged."""
ADDRESSES: Final = "addresses"
MACS: Final = "macs"
RESTART_GRACE_SECONDS: Final = "restartGraceSeconds"
"""status: how long the scheduler should wait for a restarting controller."""
CONDITIONS: Final = "conditions"
LIVE: Final = "Live"
"""Condition type the scheduler leader writes on each liveness transition (docs/liveness.md)."""
ELIGIBLE: Final = "Eligible"
"""Condition type the scheduler leader writes when a node is excluded from holding external
IPs (False, reason ``NodeExcluded`` / ``NodeTainted`` / ``NodeCordoned``: `core.eligibility`)
and when it is back (True, reason ``Eligible``); a node never excluded carries none."""
REASON_ELIGIBLE: Final = "Eligible"

# --- IpNode --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IpNodeSpec:
    link: str = ""
    liveness_address: str = ""
    """Where the controller answers liveness probes; empty: a controller without the UDP
    liveness path (judged by its heartbeat counter, docs/liveness.md "Upgrades")."""
    liveness_port: int = 0
    liveness_peer_key: str = ""
    """The controller's peer key as published (docs/liveness.md "Peer keys"); empty: none
    (its peers ask it under the cluster key). Kept as text: a key that does not parse
    (`core.peer_keys.parse_public_key`) costs its peers the pair key, never the IpNode."""

    @property
    def liveness_endpoint(self) -> tuple[str, int] | None:
        if not self.liveness_address or not self.liveness_port:
            return None
        return self.liveness_address, self.liveness_port

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> IpNodeSpec:
        address = get_str(d, LIVENESS_ADDRESS, path)
        if address:
            check_ip(address, join(path, LIVENESS_ADDRESS))
        return cls(
            link=get_str(d, LINK, path),
            liveness_address=address,
            liveness_port=get_int(d, LIVENESS_PORT, path, maximum=65535) or 0,
            liveness_peer_key=get_str(d, LIVENESS_PEER_KEY, path),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {LINK: self.link} if self.link else {}
        if self.liveness_address:
            out[LIVENESS_ADDRESS] = self.liveness_address
        if self.liveness_port:
            out[LIVENESS_PORT] = self.liveness_port
        if self.liveness_peer_key:
            out[LIVENESS_PEER_KEY] = self.liveness_peer_key
        return out


_MAC = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


def _check_mac(value: str, path: str) -> str:
    if not _MAC.match(value):
        raise ResourceError(path, f"{value!r} is not a lower-case MAC address")
    return value


@dataclass(frozen=True, kw_only=True)
class IpNodeStatus:
    heartbeat: int = 0
    """Counter the controller bumps at each API heartbeat; compare values, never clocks."""
    last_heartbeat_time: str = ""
    """The controller's wall clock at that heartbeat (RFC 3339), shown by kubectl only."""
    addresses: tuple[str, ...] = ()
    """Managed addresses really on the link, as ip/prefixLength."""
    macs: tuple[str, ...] = ()
    """MACs of the links the controller uses (lower-case aa:bb:cc:dd:ee:ff)."""
    restart_grace_seconds: float | None = None
    """Set by a controller stopping cleanly: the scheduler waits this long, not its node
    timeout, before judging the node dead (so a rolling update moves no IP)."""
    conditions: tuple[Condition, ...] = ()

    @property
    def restart_grace(self) -> float:
        """The announced restart grace in seconds; 0 when there is none."""
        return self.restart_grace_seconds or 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "status") -> IpNodeStatus:
        addresses_path = join(path, ADDRESSES)
        grace = d.get(RESTART_GRACE_SECONDS)
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0
        ):
            raise ResourceError(join(path, RESTART_GRACE_SECONDS), "must be a number >= 0")
        return cls(
            restart_grace_seconds=None if grace is None else float(grace),
            macs=tuple(
                _check_mac(v, join(join(path, MACS), i))
                for i, v in enumerate(get_str_list(d, MACS, path))
            ),
            heartbeat=get_int(d, HEARTBEAT, path, maximum=MAX_COUNT) or 0,
            last_heartbeat_time=get_str(d, LAST_HEARTBEAT_TIME, path),
            addresses=tuple(
                check_network(v, join(addresses_path, i), bare_ip=True)
                for i, v in enumerate(get_str_list(d, ADDRESSES, path))
            ),
            conditions=conditions_from_list(d.get(CONDITIONS), join(path, CONDITIONS)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {HEARTBEAT: self.heartbeat}
        if self.last_heartbeat_time:
            out[LAST_HEARTBEAT_TIME] = self.last_heartbeat_time
        if self.addresses:
            out[ADDRESSES] = list(self.addresses)
        if self.macs:
            out[MACS] = list(self.macs)
        if self.restart_grace_seconds is not None:
            out[RESTART_GRACE_SECONDS] = self.restart_grace_seconds
        conditions_out(out, self.conditions)
        return out


@dataclass(frozen=True, kw_only=True)
class IpNode(Resource):
    KIND: ClassVar[str] = "IpNode"
    PLURAL: ClassVar[str] = "ipnodes"

    spec: IpNodeSpec = field(default_factory=IpNodeSpec)
    status: IpNodeStatus = field(default_factory=IpNodeStatus)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        metadata, spec, status = cls._envelope(d, spec_required=False)
        return cls(
            metadata=metadata,
            spec=IpNodeSpec.from_dict(spec),
            status=IpNodeStatus.from_dict(status),
        )

    def to_dict(self) -> dict[str, Any]:
        return self._to_dict(self.spec.to_dict(), self.status.to_dict())


# --- the Live condition (written by the scheduler leader, read by controllers) -------------
REASON_REPLYING: Final = "Replying"
REASON_NO_REPLY: Final = "NoReply"
REASON_FENCED: Final = "Fenced"


def live_condition(obj: Mapping[str, Any]) -> Condition | None:
    """The IpNode's Live condition as written, or None (none yet, or unreadable)."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    return find_condition(readable_conditions(status.get(CONDITIONS)), LIVE)


def mark_live(live: bool, reason: str, message: str, *, now: datetime | None = None) -> Mutation:
    """Set the Live condition (lastTransitionTime moves only when True/False flips)."""
    condition = Condition(
        type=LIVE,
        status="True" if live else "False",
        reason=reason,
        message=message,
        last_transition_time=now or datetime.now(UTC),
    )

    def mutate(obj: dict[str, Any]) -> None:
        put_condition(obj.setdefault("status", {}), condition)

    return mutate
