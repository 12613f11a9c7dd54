"""`nodes`: each IpNode, live or not (as the scheduler leader last wrote it), last heard,
fenced, and the IPs it holds; and, for `why`, why a node may not hold a given claim. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eipctl.core.admission import labels_text, selector_text
from eipctl.core.claims import bound_node_of, phase_of, spec_of
from eipctl.core.conditions import Condition, find_condition, readable_conditions
from eipctl.core.fields import Obj, ResourceError, labels_of, name_of, parse_time
from eipctl.core.ipnode import ELIGIBLE, LIVE, REASON_FENCED
from eipctl.core.naming import natural_key
from eipctl.core.resources import IpClaimPool
from eipctl.plugin.snapshot import Snapshot, age


@dataclass(frozen=True)
class NodeRow:
    name: str
    live: str
    """``True``, ``False`` or ``Unknown`` (no Live condition yet)."""
    live_reason: str
    live_since: datetime | None
    last_heartbeat: datetime | None
    fenced: bool
    eligible: str
    """``yes``, or the reason it is excluded (NodeExcluded, NodeTainted, NodeCordoned)."""
    ips: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "live": self.live,
            "liveReason": self.live_reason,
            "liveSince": _iso(self.live_since),
            "lastHeartbeat": _iso(self.last_heartbeat),
            "fenced": self.fenced,
            "eligible": self.eligible,
            "ips": list(self.ips),
        }

    def cells(self, now: datetime) -> list[str]:
        live = self.live + (f" ({self.live_reason})" if self.live_reason else "")
        return [
            self.name,
            live,
            age(self.live_since, now),
            age(self.last_heartbeat, now),
            "yes" if self.fenced else "no",
            self.eligible,
            ",".join(self.ips) or "-",
        ]


NODE_HEADERS = ("NODE", "LIVE", "SINCE", "LAST HEARTBEAT", "FENCED", "ELIGIBLE", "IPS")


def _iso(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def _conditions(obj: Mapping[str, Any]) -> tuple[Condition, ...]:
    return readable_conditions((obj.get("status") or {}).get("conditions"))


def _heartbeat(obj: Mapping[str, Any]) -> datetime | None:
    value = (obj.get("status") or {}).get("lastHeartbeatTime")
    try:
        return parse_time(value, "lastHeartbeatTime") if value else None
    except ResourceError:
        return None


def held_ips(snapshot: Snapshot, node: str) -> tuple[str, ...]:
    """The IPs Bound on ``node`` (per-node copies of policy `all` included), by address."""
    ips = {
        str(spec_of(c).get("ip"))
        for c in snapshot.claims
        if phase_of(c) == "Bound" and bound_node_of(c) == node
    }
    return tuple(sorted(ips, key=natural_key))


def node_row(snapshot: Snapshot, obj: Obj) -> NodeRow:
    name = name_of(obj)
    conditions = _conditions(obj)
    live = find_condition(conditions, LIVE)
    eligible = find_condition(conditions, ELIGIBLE)
    return NodeRow(
        name=name,
        live=live.status if live is not None else "Unknown",
        live_reason=live.reason if live is not None else "",
        live_since=live.last_transition_time if live is not None else None,
        last_heartbeat=_heartbeat(obj),
        fenced=live is not None and not live.is_true and live.reason == REASON_FENCED,
        eligible="yes" if eligible is None or eligible.is_true else eligible.reason or "no",
        ips=held_ips(snapshot, name),
    )


def node_rows(snapshot: Snapshot) -> list[NodeRow]:
    return sorted(
        (node_row(snapshot, n) for n in snapshot.nodes), key=lambda r: natural_key(r.name)
    )


def why_not_here(snapshot: Snapshot, claim: Obj, now: datetime) -> list[str]:
    """For an unplaced claim: each IpNode and why it may not hold the claim (or that it may)."""
    pool_obj = snapshot.pool(str(labels_of(claim).get("eipctl.io/pool", "")))
    selector = None
    if pool_obj is not None:
        try:
            selector = IpClaimPool.from_dict(pool_obj).spec.node_selector
        except ResourceError:
            selector = None
    if not snapshot.nodes:
        return ["there is no IpNode at all: no controller runs (is the DaemonSet scheduled?)"]
    out = []
    for obj in sorted(snapshot.nodes, key=lambda n: natural_key(name_of(n))):
        row = node_row(snapshot, obj)
        if row.live != "True":
            since = f" for {age(row.live_since, now)}" if row.live_since else ""
            why = "fenced itself" if row.fenced else f"not live ({row.live_reason or 'unknown'})"
            out.append(f"{row.name}: {why}{since}")
        elif row.eligible != "yes":
            out.append(f"{row.name}: excluded ({row.eligible})")
        elif selector is not None and not selector.matches(labels_of(obj)):
            out.append(
                f"{row.name}: the pool's nodeSelector {selector_text(selector)} does not match "
                f"its labels ({labels_text(labels_of(obj))})"
            )
        else:
            out.append(f"{row.name}: may hold it")
    return out
