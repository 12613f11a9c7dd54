"""Telling "the control plane is down" from "I am the one cut off": the quorum arithmetic.

No node can tell a dead control plane from one it is partitioned from by looking alone. So
both sides count nodes, with thresholds that cannot both be met in two halves of one
partition:

- a controller that hears no writing leader and cannot reach the API keeps its addresses
  only while *more than* `HOLD_QUORUM` of the known nodes (itself included) say they hear no
  writing leader either (`outage_verdict`);
- a scheduler declares nodes dead only while it hears *at least* `1 - HOLD_QUORUM` of the
  known nodes (`may_declare_deaths`).

More than half plus at least half is more than all: the two sets share a node, which hears
the leader (the leader hears its replies to its probes) and so would not have confirmed the
outage. The price, paid only in a mass failure: a leader that hears fewer than half of the
nodes moves nothing (as Kubernetes' node lifecycle controller stops evicting in a full
disruption), and a controller in an outage holds only while more than half of the cluster
answers. A half, not another share: a node dying during an outage must not make the others
let go (3 nodes, 1 dead: the 2 left are more than half), and a 2-node cluster still fails
over (the leader hears 1 of 2). docs/liveness.md, "Outages", has every case.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = [
    "HOLD_QUORUM",
    "OutageVerdict",
    "PeerAnswer",
    "may_declare_deaths",
    "outage_verdict",
]

HOLD_QUORUM: Final = Fraction(1, 2)
"""A controller holding through an outage needs strictly more than this share of nodes."""


def may_declare_deaths(heard: int, known: int) -> bool:
    """Whether a scheduler hearing ``heard`` of ``known`` nodes may declare the rest dead."""
    return known == 0 or heard >= (1 - HOLD_QUORUM) * known


class OutageVerdict(enum.Enum):
    OUTAGE = "outage"
    """Enough nodes hear no writer: the control plane is down; hold."""
    WRITER_HEARD = "writer_heard"
    """Some node hears a writing leader that we do not: we are cut off; let go."""
    UNKNOWN = "unknown"
    """Some answered, too few to tell: hold no longer than what holds us already."""
    NO_ANSWER = "no_answer"
    """No peer answered at all: we are the one cut off (a node cut off hears nobody)."""


@dataclass(frozen=True)
class PeerAnswer:
    """One peer's answer to a query: how long since it heard a writing leader (None: never)."""

    node: str
    writer_silence: float | None


def outage_verdict(
    answers: Iterable[PeerAnswer], *, known: int, heard_within: float
) -> OutageVerdict:
    """What the answers of peers say, for a controller that hears no writer itself.

    Only OUTAGE lets it hold; WRITER_HEARD and NO_ANSWER let it go at once when the writer
    fell silent; UNKNOWN (a few answered, not enough: peers slow to answer, or a partition
    with a few of them) lets the fence's deadline decide, asking once more then.

    ``known``: the nodes in the cluster, this one included. A peer *hears a writer* when its
    silence is under ``heard_within`` (half the probe silence: a leader that stopped stopped
    for everyone within a probe round, while a leader we are cut off from keeps probing the
    others every interval). This node counts as one confirmation itself.
    """
    confirming = 1
    for answer in answers:
        if answer.writer_silence is not None and answer.writer_silence < heard_within:
            return OutageVerdict.WRITER_HEARD
        confirming += 1
    if known > 0 and confirming > HOLD_QUORUM * known:
        return OutageVerdict.OUTAGE
    if confirming == 1 and known > 1:
        return OutageVerdict.NO_ANSWER
    return OutageVerdict.UNKNOWN
