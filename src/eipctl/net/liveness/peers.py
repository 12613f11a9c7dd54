"""`PeerQuerier`: asks the other nodes' controllers whether they hear a writing leader.

A controller that hears no writing leader and cannot reach the API must tell "the control
plane is down" (hold: nothing can move) from "I am cut off" (let go: the leader may be moving
my claims). It asks every peer it knows (`set_peers`: the IpNodes' liveness endpoints, as it
last listed them) with a PEER_QUERY from its responder's socket, the same port the schedulers
probe, so a node whose liveness path is cut can ask nobody. `core.outage.outage_verdict`
judges the answers.

The answers are challenge/response like the probes: a PEER_REPLY counts only if it echoes
this querier's session and a seq sent in the current round (every resend of a round takes
the next seq: a responder answers a seq once, so a replayed query is not answered), comes
from the peer's published
(address, port), names the peer asked, and has not been counted this round. So a recorded
answer replayed later counts for nothing, and nobody without the key can forge one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import structlog

from eipctl.core.liveness_wire import (
    NEVER_MS,
    SESSION_LENGTH,
    Keyring,
    Kind,
    Packet,
    encode,
    peer_silence_ms,
)
from eipctl.core.outage import PeerAnswer
from eipctl.net.metrics import LIVENESS_PEER_ANSWERS, LIVENESS_PEER_QUERIES

from .responder import LivenessResponder
from .sockets import Drops, canonical

log = structlog.get_logger(__name__)


class PeerQuerier:
    """One round at a time: `ask` sends a query to every peer and gathers the answers."""

    def __init__(self, node: str, keyring: Keyring, responder: LivenessResponder) -> None:
        self._node = node
        self._keyring = keyring
        self._responder = responder
        self._session = os.urandom(SESSION_LENGTH)
        self._seq = 0
        self._round_first = 1
        """The first seq of the current round: replies to any seq of it count."""
        self._peers: dict[str, tuple[str, int]] = {}
        self._answers: dict[str, PeerAnswer] | None = None
        self._done: asyncio.Event | None = None
        self._heard_within = 0.0
        self._drops = Drops("querier")
        responder.on_peer_reply = self._received

    @property
    def peers(self) -> Mapping[str, tuple[str, int]]:
        return dict(self._peers)

    def set_peers(self, peers: Mapping[str, tuple[str, int]]) -> None:
        """The other nodes' liveness endpoints: node -> (IP literal, port); ours is skipped."""
        self._peers = {n: (canonical(h), p) for n, (h, p) in peers.items() if n != self._node}

    async def ask(
        self, *, within: float, resend_every: float, heard_within: float
    ) -> list[PeerAnswer]:
        """Query every peer; return the answers once all came, or one says it hears a writer
        (within ``heard_within`` seconds), or after ``within`` seconds. Peers not answered yet get
        the query again every ``resend_every`` (a lost datagram must not end a hold)."""
        self._round_first = self._seq + 1
        answers: dict[str, PeerAnswer] = {}
        self._answers, self._done, self._heard_within = answers, asyncio.Event(), heard_within
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        try:
            while self._peers and not self._done.is_set():
                self._seq += 1
                for node, address in self._peers.items():
                    if node not in answers:
                        query = Packet(Kind.PEER_QUERY, node, self._session, self._seq)
                        if self._responder.send(encode(query, self._keyring), address):
                            LIVENESS_PEER_QUERIES.inc()
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(min(resend_every, remaining)):
                        await self._done.wait()
                except TimeoutError:
                    if loop.time() >= deadline:
                        break
        finally:
            self._answers, self._done = None, None
        return list(answers.values())

    def _received(self, reply: Packet, addr: tuple[Any, ...]) -> str | None:
        """Count ``reply`` if it answers this round; else why not (the responder's flood
        guard counts refusals by source)."""
        answers, done = self._answers, self._done
        reason = self._refusal(reply, addr, answers)
        if reason is not None:
            self._drops.rejected(reason, addr)
            return reason
        assert answers is not None and done is not None
        ms = peer_silence_ms(reply.ext)
        silence = None if ms == NEVER_MS else ms / 1000
        answers[reply.node] = PeerAnswer(reply.node, silence)
        heard = silence is not None and silence < self._heard_within
        LIVENESS_PEER_ANSWERS.labels("writer_heard" if heard else "no_writer").inc()
        if heard or len(answers) >= len(self._peers):
            done.set()
        return None

    def _refusal(
        self, reply: Packet, addr: tuple[Any, ...], answers: dict[str, PeerAnswer] | None
    ) -> str | None:
        if answers is None:
            return "no_query"
        if reply.session != self._session:
            return "session"
        if not self._round_first <= reply.seq <= self._seq:
            return "stale"
        endpoint = self._peers.get(reply.node)
        if endpoint is None:
            return "unknown_node"
        if addr[1] != endpoint[1] or canonical(str(addr[0])) != endpoint[0]:
            return "source"
        if reply.node in answers:
            return "replay"
        return None
