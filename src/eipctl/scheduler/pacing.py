"""How long a placement pass asked for by claim changes waits: longer as passes get longer.

A pass walks every claim (placement is global), so while 10,000 claims were being created,
passes ran back to back and held the loop the liveness replies and the Lease are read on
([scale], docs/scale.md). Paced, passes take at most a third of the loop whatever the claim
count, and the changes that arrive meanwhile share the next pass. A node's death is not
paced: `NodeWatch` asks for its pass at once.
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
