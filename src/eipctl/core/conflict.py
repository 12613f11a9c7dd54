"""The take-over rule: what the controller does when a probe finds its IP answered.

Pure: the caller probes, looks the answering MAC up among the IpNodes, and reads the
scheduler's verdict on the previous holder (its IpNode's Live condition).
"""

from __future__ import annotations

import enum


class HolderState(enum.Enum):
    """The previous holder as the scheduler judged it (the IpNode's Live condition)."""

    LIVE = "live"
    DEAD = "dead"


class ConflictDecision(enum.Enum):
    ADD = "add"  # nobody answers: add and announce
    TAKE_OVER = "take-over"  # the answer comes from another eipctl node, or a dead holder
    WAIT = "wait"  # someone live or unknown answers: report Conflict, probe again later


def conflict_decision(
    *,
    answered: bool,
    previous_holder: str | None,
    own_node: str,
    holder_liveness: HolderState | None,
    answered_by: str | None = None,
) -> ConflictDecision:
    """The take-over rule (docs/controller.md, "Conflicts").

    - Nobody answers the probe: add.
    - The answering MAC is another eipctl node's (`answered_by`, from the MACs each IpNode
      publishes): the scheduler has moved the claim here, so that node is dead, hung, or
      about to let go when it sees the move. Take over at once; the announcements repoint
      the neighbours. Waiting for it instead would open a gap whenever the old holder's
      controller restarts and removes the address before we add it.
    - Someone answers and the claim's previous holder (status.boundNode, another node) is
      declared dead by the scheduler: take over (its kernel still holds the address; its
      lifetime ends soon anyway).
    - Otherwise the answer comes from a host eipctl does not know (or a live holder whose
      MAC it cannot tell): do not fight; report Conflict, wait and probe again.
    """
    if not answered:
        return ConflictDecision.ADD
    if answered_by and answered_by != own_node:
        return ConflictDecision.TAKE_OVER
    if previous_holder and previous_holder != own_node and holder_liveness is HolderState.DEAD:
        return ConflictDecision.TAKE_OVER
    return ConflictDecision.WAIT
