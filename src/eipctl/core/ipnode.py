"""Typed view of IpNode: one per controller, named after its Kubernetes Node.

Split from core/resources.py (same conventions: ``from_dict`` raises ResourceError naming the
bad field, ``to_dict`` leaves empty optional fields out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from eipctl.core.conditions import Condition, conditions_from_list
from eipctl.core.fields import ResourceError, check_network, get_int, get_str, get_str_list, join
from eipctl.core.resource_base import MAX_COUNT, Resource, conditions_out

# --- IpNode --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class IpNodeSpec:
    link: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "spec") -> IpNodeSpec:
        return cls(link=get_str(d, "link", path))

    def to_dict(self) -> dict[str, Any]:
        return {"link": self.link} if self.link else {}


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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "status") -> IpNodeStatus:
        addresses_path = join(path, "addresses")
        grace = d.get("restartGraceSeconds")
        if grace is not None and (
            isinstance(grace, bool) or not isinstance(grace, int | float) or grace < 0
        ):
            raise ResourceError(join(path, "restartGraceSeconds"), "must be a number >= 0")
        return cls(
            restart_grace_seconds=None if grace is None else float(grace),
            macs=tuple(
                _check_mac(v, join(join(path, "macs"), i))
                for i, v in enumerate(get_str_list(d, "macs", path))
            ),
            heartbeat=get_int(d, "heartbeat", path, maximum=MAX_COUNT) or 0,
            addresses=tuple(
                check_network(v, join(addresses_path, i), bare_ip=True)
                for i, v in enumerate(get_str_list(d, "addresses", path))
            ),
            conditions=conditions_from_list(d.get("conditions"), join(path, "conditions")),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"heartbeat": self.heartbeat}
        if self.addresses:
            out["addresses"] = list(self.addresses)
        if self.macs:
            out["macs"] = list(self.macs)
        if self.restart_grace_seconds is not None:
            out["restartGraceSeconds"] = self.restart_grace_seconds
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
