"""The peers a controller asks in an outage, and what their answers say.

The controller lists the IpNodes at start and every `PEER_REFRESH` (one list per node a
minute; every `EARLY_REFRESH` in its first minute, while the cluster's nodes register) and
keeps their liveness endpoints (`net.liveness.PeerQuerier`) and their number,
this node included: the denominator of the quorum (`core.outage`). A list that fails keeps
the last one: the peers are needed exactly when the API does not answer.
"""

from __future__ import annotations

import asyncio
import itertools

import structlog

from eipctl.core.fields import ResourceError, name_of
from eipctl.core.ipnode import IpNode
from eipctl.core.outage import OutageVerdict, outage_verdict
from eipctl.kube.client import IPNODES
from eipctl.kube.errors import ApiError
from eipctl.kube.verbs import Lists
from eipctl.net.liveness import PeerQuerier

log = structlog.get_logger(__name__)

PEER_REFRESH = 60.0
"""Seconds between lists of the IpNodes. A node that joins counts in the quorum from the next
list on: until then the others count one node too few (docs/liveness.md, "Outages")."""
EARLY_REFRESH = 5.0


class PeerList:
    def __init__(
        self, api: Lists, node: str, querier: PeerQuerier, *, probe_silence: float
    ) -> None:
        self._api = api
        self._node = node
        self.querier = querier
        self._half = probe_silence / 2
        self.known: int | None = None
        """IpNodes in the cluster, this one included, at the last list (None: never listed)."""

    async def refresh(self, within: float = 5.0) -> None:
        """List the IpNodes and keep their liveness endpoints and their count."""
        async with asyncio.timeout(within):
            listed = await self._api.list(IPNODES)
        endpoints: dict[str, tuple[str, int]] = {}
        for obj in listed.items:
            try:
                ipnode = IpNode.from_dict(obj)
            except ResourceError:
                continue
            if ipnode.spec.liveness_endpoint is not None:
                endpoints[ipnode.name] = ipnode.spec.liveness_endpoint
        names = {name_of(obj) for obj in listed.items} | {self._node}
        self.querier.set_peers(endpoints)
        if self.known != len(names):
            log.info("peers.listed", node=self._node, nodes=len(names))
        self.known = len(names)

    async def run(self) -> None:
        """Refresh every `PEER_REFRESH`; every `EARLY_REFRESH` during the first minute and
        while no list has succeeded."""
        for attempt in itertools.count():
            try:
                await self.refresh()
                failed = False
            except (ApiError, TimeoutError, OSError) as exc:
                log.info("peers.list_failed", node=self._node, error=repr(exc))
                failed = True
            early = attempt * EARLY_REFRESH < PEER_REFRESH or self.known is None
            await asyncio.sleep(EARLY_REFRESH if early or failed else PEER_REFRESH)

    async def verdict(self) -> OutageVerdict:
        """Ask every peer whether it hears a writing leader (`core.outage.outage_verdict`)."""
        if self.known is None:
            return OutageVerdict.UNKNOWN  # never listed: no quorum can be counted
        half = self._half
        answers = await self.querier.ask(within=half, resend_every=half / 2, heard_within=half)
        return outage_verdict(answers, known=self.known, heard_within=half)
