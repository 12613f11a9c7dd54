"""Whether the writing leader agrees with what this node holds: its probes' digests.

The scheduler leader's probes carry the digest of the claims it places on this node
(`scheduler.digests`). One equal to the digest of our own claims (the claims labelled for
this node in our watch cache) vouches for us: somebody who can write hears us and decided
what we hold, so holding is safe whatever our own API connection does (`core.fence`). One
that differs is noted (`mismatch_since`): a watch event in flight, or our view is stale where
it matters (`reachability` acts on it after a grace).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from eipctl.core.fence import Fence
from eipctl.core.fields import labels_of, name_of
from eipctl.core.liveness_wire import Flag, placement_digest, probe_ext_fields
from eipctl.core.naming import LABEL_NODE

from .claim_cache import ClaimCache


class Vouching:
    def __init__(
        self, node: str, claims: ClaimCache, fence: Fence, clock: Callable[[], float]
    ) -> None:
        self._node = node
        self._claims = claims
        self._fence = fence
        self._clock = clock
        self._digest: bytes | None = None
        self.mismatch_since: float | None = None
        """Since when the writer's digest differs from ours (None: it does not)."""
        self.cluster_size: int | None = None
        """How many IpNodes the scheduler replica that probed last knows (None: no extended
        probe yet): the denominator of the leader's quorum, so ours too (`peer_list`)."""

    def claims_changed(self) -> None:
        self._digest = None

    def own_digest(self) -> bytes | None:
        """The digest of the claims labelled for this node, as our cache has them; None while
        the cache is not synced (a relist in flight vouches for nothing)."""
        if not self._claims.has_synced:
            return None
        if self._digest is None:
            names = [
                name_of(c)
                for c in self._claims.objects()
                if labels_of(c).get(LABEL_NODE) == self._node
            ]
            self._digest = placement_digest(names)
        return self._digest

    def on_probe(self, flags: Flag, ext: bytes | None, arrived: float | None = None) -> None:
        """A valid probe (the responder's hook): only a writer's digest counts. ``arrived``:
        when it reached the socket (on our clock); a probe that waited in the queue while we
        were frozen vouches from when it came, not from when we read it (soak seed 1202: a
        controller starved for 3 s read the queued probes, was "vouched for" by the old ones
        and took back IPs that had moved meanwhile)."""
        at = self._clock() if arrived is None else arrived
        if ext is None:
            return
        digest, nodes = probe_ext_fields(ext)
        if nodes > 0:
            self.cluster_size = nodes
        own = self.own_digest()
        if not flags & Flag.WRITER or own is None:  # a relist in flight: we cannot tell
            return
        if digest == own:
            self.mismatch_since = None
            self._fence.vouched(at)
        elif self.mismatch_since is None:
            self.mismatch_since = at


def loop_clock() -> float:
    """The running loop's clock (the responder's timestamps are on it)."""
    return asyncio.get_running_loop().time()
