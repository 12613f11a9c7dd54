"""The claims one placement pass reads, gathered a slice of the loop's time at a time.

A pass reads every claim (placement is global), ~30 ms of dict walking at 10,000 claims on
a quiet machine and ~0.2 s at 50,000. Read in one go, that held the loop on which the
scheduler also reads its liveness replies and renews its Lease ([scale], docs/scale.md):
a slowed scheduler missed its renew deadline and lost its term. Gathered with a
`Timeslice`, the loop gets its turn back every few milliseconds.

What the pass decides on is what it gathered: claims that change meanwhile are the next
pass's (their events ask for one), as they were when the writes of a pass ended after it.
Our own writes that end meanwhile are laid over the cached copies up to the moment the walk
reaches their claim (`claim_writes.Overlay`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eipctl.core.fields import Obj
from eipctl.kube.slices import Timeslice
from eipctl.scheduler.claim_facts import ClaimFacts, ClaimFactsMemo
from eipctl.scheduler.claim_writes import ClaimWrites


@dataclass
class PassClaims:
    """Every claim, split as the pass needs them."""

    objs: list[Obj] = field(default_factory=list)
    """The IPs' own claims (placement's), as read."""
    facts: list[ClaimFacts] = field(default_factory=list)
    """Their facts, in the same order."""
    by_name: dict[str, Obj] = field(default_factory=dict)
    """The IPs' own claims by name."""
    per_node: dict[str, Obj] = field(default_factory=dict)
    """Policy ``all``'s per-node claims by name."""
    phases: list[str] = field(default_factory=list)
    """Every claim's phase, both kinds (the claims-by-phase gauge)."""


async def gather(writes: ClaimWrites, memo: ClaimFactsMemo, budget: Timeslice) -> PassClaims:
    """Every cached claim (our newer stored copies laid over), read once per version
    (`ClaimFactsMemo`), yielding to the loop as ``budget`` says.

    Cancelled midway (the term ended), it leaves the memo and the overlay as they were.
    """
    out = PassClaims()
    overlay = writes.overlay()
    reading = memo.reading()
    for cached in writes.claims.objects():
        obj = overlay.current(cached)
        fact = reading.of(obj)
        out.phases.append(fact.phase)
        if fact.node_bound:
            out.per_node[fact.name] = obj
        else:
            out.objs.append(obj)
            out.facts.append(fact)
            out.by_name[fact.name] = obj
        await budget.spent()
    reading.done()
    overlay.done()
    return out
