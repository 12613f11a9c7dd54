"""Typed view of IpNode: one per controller, named after its Kubernetes Node.

Split from core/resources.py (same conventions: ``from_dict`` raises ResourceError naming the
bad field, ``to_dict`` leaves empty optional fields out). The controller writes the status
fields by name (its heartbeat is a bare merge patch); everyone who reads them parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

from eipctl.core.conditions import Condition, conditions_from_list
from eipctl.core.fields import ResourceError, check_network, get_int, get_str, get_str_list, join
from eipctl.core.resource_base import MAX_COUNT, Resource, conditions_out

# --- field names (the CRD, deploy/crds/ipnodes.yaml) ----------------------------------------
LINK: Final = "link"
HEARTBEAT: Final = "heartbeat"
"""status: the counter the controller bumps; compare values, never clocks."""
ADDRESSES: Final = "addresses"
MACS: Final = "macs"
RESTART_GRACE_SECONDS: Final = "restartGraceSeconds"
"""status: how long the scheduler should wait for a restarting controller."""
CONDITIONS: Final = "conditions"

# --- IpNode --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IpNodeSpec:
    link: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> IpNodeSpec:
        return cls(link=get_str(d, LINK, path))

    def to_dict(self) -> dict[str, Any]:
        return {LINK: self.link} if self.link else {}


_MAC = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")


def _check_mac(value: str, path: str) -> str:
    if not _MAC.match(value):
        raise ResourceError(path, f"{value!r} is not a lower-case MAC address")
    return value


@dataclass(frozen=True, kw_only=True)
class IpNodeStatus:
    heartbeat: int = 0
    """Counter the controller bumps; compare values, never clocks."""
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
            addresses=tuple(
                check_network(v, join(addresses_path, i), bare_ip=True)
                for i, v in enumerate(get_str_list(d, ADDRESSES, path))
            ),
            conditions=conditions_from_list(d.get(CONDITIONS), join(path, CONDITIONS)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {HEARTBEAT: self.heartbeat}
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
