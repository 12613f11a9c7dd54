"""How long a placement pass asked for by claim changes waits: longer as passes get longer.

A pass walks every claim (placement is global), so while 10,000 claims were being created,
passes ran back to back and held the loop the liveness replies and the Lease are read on
([scale], docs/scale.md). Paced, passes take at most a third of the loop whatever the claim
count, and the changes that arrive meanwhile share the next pass.

A node's death asks for its pass at once, but every pass also rests (`rest_after`) for as
long as the last one took: at 1,000 nodes on a saturated machine, late replies made nodes
look dead, each death started a pass at once, and back-to-back passes made replies later
still. Resting keeps passes to half the loop at most; it adds at most one pass's length to a
failover (nothing where passes take under 5 ms).
"""

from __future__ import annotations

from typing import Final

PACE_FACTOR: Final = 2.0
"""A paced pass waits this many times the last pass's length..."""
PACE_MAX: Final = 0.25
"""...but never longer than this (seconds)..."""
PACE_FLOOR: Final = 0.005
"""...and not at all after a pass shorter than this (a small cluster's passes)."""


def pace_after(pass_seconds: float) -> float:
    """Seconds a pass asked for by claim changes waits, after a pass of ``pass_seconds``."""
    if pass_seconds < PACE_FLOOR:
        return 0.0
    return min(PACE_MAX, PACE_FACTOR * pass_seconds)


def rest_after(pass_seconds: float, since_end: float) -> float:
    """Seconds any pass still waits, ``since_end`` seconds after a pass of ``pass_seconds``
    ended: the rest of one pass's length (0 for passes under `PACE_FLOOR`)."""
    if pass_seconds < PACE_FLOOR:
        return 0.0
    return max(0.0, min(PACE_MAX, pass_seconds) - since_end)
