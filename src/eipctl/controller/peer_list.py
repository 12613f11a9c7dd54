"""The peers a controller asks in an outage, and what their answers say.

The controller lists the IpNodes once registered and keeps their liveness endpoints
(`net.liveness.PeerQuerier`) and their number, this node included: with the node count the
schedulers' probes carry (`vouching.Vouching.cluster_size`), the denominator of the quorum
(`core.outage`). A list costs the API server every IpNode, so it is rare: every
`PEER_REFRESH` (10 minutes), sooner when the probes say the cluster has another number of
nodes than the last list (a node joined or left, or the cluster is still booting: after
`RELIST_MIN`, then twice as long after each such list, up to `PEER_REFRESH`), and every delay
is jittered so that nodes started together do not list together. A list that fails keeps the
last one: the peers are needed exactly when the API does not answer.

The list also brings the peers' peer keys (spec.livenessPeerKey, docs/liveness.md "Peer
keys"). A peer packet under a key we do not hold (a node that joined, or made a new node key,
after our list) is another reason to list early, on the same doubling gap; and our first list
is followed by one `PeerQuerier.greet`, so that peers which listed before we published our
key meet it now, while the API answers, not in the outage that needs it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import structlog

from eipctl.core.fields import ResourceError, name_of
from eipctl.core.ipnode import IpNode
from eipctl.core.outage import OutageVerdict, outage_verdict
from eipctl.core.peer_keys import parse_public_key
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import ApiError
from eipctl.kube.verbs import Lists
from eipctl.net.liveness import PeerQuerier

log = structlog.get_logger(__name__)

PEER_REFRESH = 600.0
"""Seconds between lists of the IpNodes while the node count does not change."""
RELIST_MIN = 5.0
"""Seconds at least after a list before the next one on a node-count change (doubled after
each such list)."""
RETRY = 5.0
"""Seconds between attempts while no list has succeeded yet."""
JITTER = 0.2
"""Each delay is drawn from +-20 % of its value."""
TICK = 1.0


class PeerList:
    def __init__(
        self,
        api: Lists,
        node: str,
        querier: PeerQuerier,
        *,
        probe_silence: float,
        cluster_size: Callable[[], int | None] = lambda: None,
    ) -> None:
        """``cluster_size``: the node count the schedulers' probes last said; the quorum's
        denominator is the larger of it and our own list's (a list made while the cluster's
        nodes were still registering must not make the quorum easier)."""
        self._api = api
        self._cluster_size = cluster_size
        self._node = node
        self.querier = querier
        self._half = probe_silence / 2
        self.known: int | None = None
        """IpNodes in the cluster, this one included, at the last list (None: never listed)."""
        self._gap = RELIST_MIN
        self._unknown_key = False
        self._greeted = False
        querier.on_unknown_peer_key = self._peer_key_unknown

    def _peer_key_unknown(self) -> None:
        self._unknown_key = True

    async def refresh(self, within: float = 5.0) -> None:
        """List the IpNodes and keep their liveness endpoints and their count."""
        async with asyncio.timeout(within):
            listed = await self._api.list(IPNODES)
        endpoints: dict[str, tuple[str, int]] = {}
        public_keys: dict[str, bytes] = {}
        for obj in listed.items:
            try:
                ipnode = IpNode.from_dict(obj)
            except ResourceError:
                continue
            if ipnode.spec.liveness_endpoint is None:
                continue
            endpoints[ipnode.name] = ipnode.spec.liveness_endpoint
            if ipnode.spec.liveness_peer_key and ipnode.name != self._node:
                try:
                    public_keys[ipnode.name] = parse_public_key(ipnode.spec.liveness_peer_key)
                except ValueError as exc:  # asked under the cluster key, as before
                    log.warning(
                        "peers.key_invalid", node=self._node, peer=ipnode.name, error=str(exc)
                    )
        names = {name_of(obj) for obj in listed.items} | {self._node}
        self._unknown_key = False
        self.querier.set_peers(endpoints, public_keys)
        if self.known != len(names):
            log.info("peers.listed", node=self._node, nodes=len(names))
        self.known = len(names)

    async def run(self) -> None:
        """List now (a controller that has not listed yet cannot hold through an outage),
        then as the module docstring says."""
        while True:
            try:
                await self.refresh()
            except (ApiError, TimeoutError, OSError) as exc:
                log.info("peers.list_failed", node=self._node, error=repr(exc))
            else:
                if not self._greeted:
                    self._greeted = True
                    answered, asked = await self.querier.greet()
                    log.info("peers.greeted", node=self._node, answered=answered, asked=asked)
            await self._until_due()

    async def _until_due(self) -> None:
        loop = asyncio.get_running_loop()
        listed = loop.time()
        if self.known is None:
            await asyncio.sleep(_jittered(RETRY))
            return
        full = listed + _jittered(PEER_REFRESH)
        early = listed + _jittered(self._gap)
        while loop.time() < full:
            size = self._cluster_size()
            if size is not None and size != self.known and loop.time() >= early:
                log.info("peers.count_changed", node=self._node, listed=self.known, probes=size)
                self._gap = min(self._gap * 2, PEER_REFRESH)
                return
            if self._unknown_key and loop.time() >= early:
                log.info("peers.unknown_key", node=self._node, listed=self.known)
                self._gap = min(self._gap * 2, PEER_REFRESH)
                return
            await asyncio.sleep(TICK)

    def denominator(self) -> int | None:
        """The node count a quorum is counted against (None: never listed)."""
        if self.known is None:
            return None
        return max(self.known, self._cluster_size() or 0)

    async def verdict(self) -> OutageVerdict:
        """Ask every peer whether it hears a writing leader (`core.outage.outage_verdict`)."""
        known = self.denominator()
        if known is None:
            return OutageVerdict.UNKNOWN  # never listed: no quorum can be counted
        half = self._half
        answers = await self.querier.ask(within=half, resend_every=half / 2, heard_within=half)
        return outage_verdict(answers, known=known, heard_within=half)


def _jittered(seconds: float) -> float:
    return seconds * random.uniform(1 - JITTER, 1 + JITTER)
