"""The take-over rule: whether to probe before an add, and what to do when a probe finds
the IP answered.

Pure: the caller reads the scheduler's verdict on the previous holder (its IpNode's Live
condition), probes, and looks the answering MAC up among the IpNodes.
"""

from __future__ import annotations

import enum


class HolderState(enum.Enum):
    """The previous holder as the scheduler judged it (the IpNode's Live condition)."""

    LIVE = "live"
    DEAD = "dead"


class ConflictDecision(enum.Enum):
    ADD = "add"  # nobody answers: add and announce
    TAKE_OVER = "take-over"  # the answer comes from another eipctl node
    WAIT = "wait"  # someone live or unknown answers: report Conflict, probe again later


def probe_first(
    *, previous_holder: str | None, own_node: str, holder_liveness: HolderState | None
) -> bool:
    """Whether to probe for another holder before adding (docs/liveness.md, "The probe
    before an add").

    Not when the claim's previous holder (another node) is declared dead by the scheduler:
    it moved the claim because nobody on that node answers its probes, and the probe would
    cost its 200 ms on every failover. If the dead node's kernel still answers (a frozen
    controller), our announcements repoint the neighbours and its address lifetime ends it.
    Otherwise probe: a live or unknown holder, or none, may still answer.
    """
    holder_elsewhere = bool(previous_holder) and previous_holder != own_node
    return not (holder_elsewhere and holder_liveness is HolderState.DEAD)


def conflict_decision(
    *,
    answered: bool,
    own_node: str,
    answered_by: str | None = None,
) -> ConflictDecision:
    """The take-over rule after a probe (docs/controller.md, "Conflicts").

    - Nobody answers the probe: add.
    - The answering MAC is another eipctl node's (`answered_by`, from the MACs each IpNode
      publishes): the scheduler has moved the claim here, so that node is dead, hung, or
      about to let go when it sees the move. Take over at once; the announcements repoint
      the neighbours. Waiting for it instead would open a gap whenever the old holder's
      controller restarts and removes the address before we add it.
    - Otherwise the answer comes from a host eipctl does not know (or a holder whose MAC it
      cannot tell): do not fight; report Conflict, wait and probe again. (A previous holder
      declared dead is never probed: `probe_first`.)
    """
    if not answered:
        return ConflictDecision.ADD
    if answered_by and answered_by != own_node:
        return ConflictDecision.TAKE_OVER
    return ConflictDecision.WAIT
