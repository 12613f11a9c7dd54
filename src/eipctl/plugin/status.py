"""`status`: every external IP with its Service(s), node, phase, since when and the cause of
its last placement or move. Pure.

"Since" and "cause" come from what the scheduler recorded: its latest Event on the claim
(``Placed``, ``NodeDead``, ``NodeExcluded``, ...; the Scheduled condition's message says the
same thing), else the condition ``Scheduled`` (its message; its time changes only when it
flips), else the claim's creation. Events expire (an hour by default): an IP that has not
moved for longer shows the condition's wording and time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eipctl.core.claim_status import CONDITION_SCHEDULED
from eipctl.core.claims import bound_node_of, is_all_nodes, node_of, phase_of, spec_of
from eipctl.core.conditions import find_condition, readable_conditions
from eipctl.core.fields import Obj, ResourceError, labels_of, meta_of, name_of, parse_time
from eipctl.core.naming import LABEL_POOL, natural_key
from eipctl.plugin.snapshot import SCHEDULER, Snapshot, age, event_time, source_of

MOVES = (
    "Placed",
    "NodeDead",
    "NodeGone",
    "NodeIneligible",
    "Rebalanced",
    "AllNodes",
    "NodeExcluded",
    "NodeTainted",
    "NodeCordoned",
    "NoLocalEndpoint",
    "NoLiveNode",
)
"""The scheduler's Event reasons on a claim, each a placement, a move or a failed one."""

IP_HEADERS = ("IP", "SERVICES", "NODE", "PHASE", "POOL", "SINCE", "LAST CAUSE")


@dataclass(frozen=True)
class IpRow:
    ip: str
    services: tuple[str, ...]
    node: str
    phase: str
    pool: str
    since: datetime | None
    cause: str
    """``Reason: message`` of the last placement or move ("" when nothing says)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ip": self.ip,
            "services": list(self.services),
            "node": self.node or None,
            "phase": self.phase,
            "pool": self.pool or None,
            "since": self.since.strftime("%Y-%m-%dT%H:%M:%SZ") if self.since else None,
            "lastCause": self.cause or None,
        }

    def cells(self, now: datetime) -> list[str]:
        return [
            self.ip,
            ",".join(self.services) or "-",
            self.node or "-",
            self.phase,
            self.pool or "-",
            age(self.since, now),
            self.cause or "-",
        ]


def _parse(value: object) -> datetime | None:
    try:
        return parse_time(value, "time") if value else None
    except ResourceError:
        return None


def _node(snapshot: Snapshot, claim: Obj) -> str:
    if is_all_nodes(claim):
        ip = spec_of(claim).get("ip")
        copies = [c for c in snapshot.claims if c is not claim and spec_of(c).get("ip") == ip]
        bound = [bound_node_of(c) for c in copies if phase_of(c) == "Bound"]
        return f"all ({len(bound)} bound)"
    return bound_node_of(claim) if phase_of(claim) == "Bound" else node_of(claim)


def ip_row(snapshot: Snapshot, claim: Obj) -> IpRow:
    name = name_of(claim)
    events = [
        e
        for e in snapshot.events_about("IpClaim", name)
        if source_of(e) == SCHEDULER and e.get("reason") in MOVES
    ]
    status = claim.get("status") or {}
    scheduled = find_condition(readable_conditions(status.get("conditions")), CONDITION_SCHEDULED)
    if events:
        since = event_time(events[-1])
        cause = f"{events[-1].get('reason')}: {events[-1].get('message', '')}"
    elif scheduled is not None:
        since = scheduled.last_transition_time
        cause = f"{scheduled.reason}: {scheduled.message}" if scheduled.message else ""
    else:
        since = _parse(meta_of(claim).get("creationTimestamp"))
        cause = ""
    services = tuple(
        sorted((str(s) for s in spec_of(claim).get("services") or ()), key=natural_key)
    )
    return IpRow(
        ip=str(spec_of(claim).get("ip", "")),
        services=services,
        node=_node(snapshot, claim),
        phase=phase_of(claim),
        pool=str(labels_of(claim).get(LABEL_POOL, "")),
        since=since,
        cause=cause,
    )


def ip_rows(snapshot: Snapshot) -> list[IpRow]:
    """One row per IP, by its first Service (naturally: demo-2 before demo-10), then by IP."""
    rows = [ip_row(snapshot, c) for c in snapshot.main_claims()]
    return sorted(
        rows,
        key=lambda r: (
            not r.services,
            natural_key(r.services[0] if r.services else ""),
            natural_key(r.ip),
        ),
    )
