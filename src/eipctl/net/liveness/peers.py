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

With a `PeerIdentity` (docs/liveness.md, "Peer keys") the queries to a peer that publishes a
peer key go under the pair key of the two of us, and its answers count only under that key:
another node, though it holds the cluster key, cannot answer in that peer's name. A peer
without a published key is asked under the cluster key, as before.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from eipctl.core.liveness_wire import (
    NEVER_MS,
    SESSION_LENGTH,
    Kind,
    Packet,
    encode,
    peer_silence_ms,
)
from eipctl.core.outage import PeerAnswer
from eipctl.core.peer_keys import PeerIdentity
from eipctl.net.metrics import LIVENESS_PEER_ANSWERS, LIVENESS_PEER_QUERIES

from .responder import LivenessResponder
from .sockets import Drops, canonical

log = structlog.get_logger(__name__)


class PeerQuerier:
    """One round at a time: `ask` sends a query to every peer and gathers the answers."""

    def __init__(
        self, node: str, responder: LivenessResponder, *, identity: PeerIdentity | None = None
    ) -> None:
        """Queries are signed with the responder's keyring (cluster keys, our node key); with
        ``identity`` the pair keys of the peers listed are added to it, for both."""
        self._node = node
        keyring = responder.keyring
        self._base = keyring
        self._identity = identity
        self._keyring = keyring if identity is None else keyring.with_peer_keys({})
        self._responder = responder
        self._lock = asyncio.Lock()
        self._greeting = False
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
        responder.keyring = self._keyring
        responder.querier_session = self._session

    @property
    def peers(self) -> Mapping[str, tuple[str, int]]:
        return dict(self._peers)

    @property
    def on_unknown_peer_key(self) -> Callable[[], None] | None:
        """Told when a peer packet comes under a key id we do not hold (the responder's)."""
        return self._responder.on_unknown_peer_key

    @on_unknown_peer_key.setter
    def on_unknown_peer_key(self, hook: Callable[[], None] | None) -> None:
        self._responder.on_unknown_peer_key = hook

    @property
    def pair_keyed(self) -> frozenset[str]:
        """The peers whose answers count under our pair key only."""
        return self._keyring.peer_keyed

    def set_peers(
        self,
        peers: Mapping[str, tuple[str, int]],
        public_keys: Mapping[str, bytes] | None = None,
    ) -> None:
        """The other nodes' liveness endpoints: node -> (IP literal, port), and the peer keys
        they publish (node -> 32 bytes; ignored without an identity); ours is skipped."""
        self._peers = {n: (canonical(h), p) for n, (h, p) in peers.items() if n != self._node}
        if self._identity is None:
            return
        pairs: dict[str, bytes] = {}
        for peer, public in (public_keys or {}).items():
            if peer not in self._peers:
                continue
            try:
                pairs[peer] = self._identity.pair_key(peer, public)
            except ValueError as exc:  # a key that gives no secret: ask it as before
                log.warning("peers.key_refused", node=self._node, peer=peer, error=str(exc))
        if pairs.keys() != self._keyring.peer_keyed:
            log.info("peers.keys", node=self._node, pair_keyed=len(pairs), peers=len(self._peers))
        self._keyring = self._base.with_peer_keys(pairs)
        self._responder.keyring = self._keyring

    async def ask(
        self, *, within: float, resend_every: float, heard_within: float
    ) -> list[PeerAnswer]:
        """Query every peer; return the answers once all came, or one says it hears a writer
        (within ``heard_within`` seconds), or after ``within`` seconds. Peers not answered yet get
        the query again every ``resend_every`` (a lost datagram must not end a hold). One
        round at a time: a second caller waits for the first round to end."""
        if self._greeting and self._done is not None:
            self._done.set()  # a greeting gives way at once: this round decides a fence
        async with self._lock:
            return await self._round(within, resend_every, heard_within)

    async def greet(self, within: float = 0.5) -> tuple[int, int]:
        """One round while the API answers, for the peers' sake: a peer that has not listed
        our peer key yet refuses our query as ``peer_key`` and lists the IpNodes again, so it
        knows the key before an outage needs it. It ends early when `ask` is called. Returns
        (answered, asked); its answers count in no metric."""
        async with self._lock:
            self._greeting = True
            try:
                answers = await self._round(within, within / 2, 0.0)
            finally:
                self._greeting = False
        return len(answers), len(self._peers)

    async def _round(
        self, within: float, resend_every: float, heard_within: float
    ) -> list[PeerAnswer]:
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
        if not self._greeting:
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
