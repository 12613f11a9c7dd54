"""`LivenessResponder`: answers the schedulers' probes and the peers' queries in each node's
controller, and notes what the probes say of the prober's standing.

A probe flagged WRITER (the scheduler leader, its Lease current), or one that reports no
standing at all (a first-release scheduler: it may be the leader), is a *writer's* probe:
`last_writer_at` says when the last came, and that is what a peer's PEER_QUERY asks about.
A PROBE_EXT's ext goes to ``on_probe`` (the controller compares the digest with its claims
and keeps the node count).
PEER_REPLY datagrams on this socket are handed to the `PeerQuerier` that sent the queries.

Under a flood ([hostile]; docs/liveness.md, "Under attack"): the socket's kernel filter
(`core.liveness_filter`) drops what is malformed or not for this node; a probe whose seq is
not newer than the last one answered in its session is a replay and gets no reply (so the
responder reflects nothing); a source that makes `FloodGuard.limit` refusals a second (wrong
MACs, replays) is added to the filter's deny list for a while, and ``on_flood`` is told.

Against another node ([hostile]; docs/liveness.md, "Peer keys"): every controller holds the
cluster key, so once this node has a key of its own a probe under the cluster key speaks for
no writer while the schedulers use our own key (`OWN_KEY_TRUST`): it is answered, but it
neither vouches nor counts as a writer's. Peer answers go under the key their query came
under, a pair key when the querier has one with us.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import structlog

from eipctl.core.flood import Denial, FloodGuard
from eipctl.core.liveness_filter import responder_filter, sample_weight
from eipctl.core.liveness_wire import (
    NEVER_MS,
    Flag,
    Keyring,
    Kind,
    Packet,
    WireError,
    decode,
    encode,
    peer_ext,
    valid_node,
)
from eipctl.net.metrics import (
    LIVENESS_REPLIES_SENT,
)

from .denials import SourceDenials
from .sockets import DatagramSocket, Drops, family_of, open_socket, source_of

log = structlog.get_logger(__name__)

SESSIONS_KEPT: Final = 32
"""Prober and querier sessions whose last seq the responder remembers (a replay of a
session older than the last 32 started is answered: bounded, one reply per probe sent)."""
TRUST_AFTER: Final = 10
"""Answers in rising order in one session before its source is trusted (never denied by the
flood guard): a replayed probe is answered at most once, so replaying one recorded probe
cannot earn trust; a recording of ten of a session this responder never saw could."""
FILTERED: Final = frozenset(
    {"short", "magic", "version", "kind", "length", "key", "not_probe", "other_node"}
)
"""Refusals the kernel filter makes too: one that reaches Python is one sampled of many."""
OWN_KEY_TRUST: Final = 60.0
"""Seconds after a probe under this node's own key during which probes under the cluster key
speak for no writer (neither vouch nor count as a writer's probe): any node could have sent
them. After that (a scheduler rolled back to a release without node keys, or none has read
our key yet) they count as a writer's again, but still never vouch."""


class LivenessResponder:
    """Answers probes for one node, from the node's controller.

    ``flags`` is asked on every probe (FENCED while the controller has fenced itself,
    API_STALE while its API requests fail); EXTENDED is added here. A datagram that is not a
    valid probe or peer query for this node is dropped and counted, never answered.
    ``on_probe(flags, ext, arrived)`` is told of every valid probe (ext None for a plain one;
    ``arrived`` on the loop's clock, from the kernel's timestamp: `DatagramSocket.arrived`).
    ``writer_heard_within``: a peer reply sets WRITER_HEARD when a writer's probe came this
    recently (its ext always carries the silence itself).
    """

    def __init__(
        self,
        node: str,
        keyring: Keyring,
        *,
        flags: Callable[[], Flag],
        on_probe: Callable[[Flag, bytes | None, float], None] | None = None,
        writer_heard_within: float = 0.2,
        on_flood: Callable[[Denial], None] | None = None,
        guard: FloodGuard | None = None,
    ) -> None:
        if not valid_node(node):
            raise ValueError(f"node {node!r} is not an IpNode name")
        self._node = node
        self._keyring = keyring
        self._flags = flags
        self._on_probe = on_probe
        self._writer_heard_within = writer_heard_within
        self.on_peer_reply: Callable[[Packet, tuple[Any, ...]], str | None] | None = None
        """Where PEER_REPLY datagrams go (`PeerQuerier` sets it); it returns why it refused
        one (None: counted), so that replayed answers count towards a flood too."""
        self.on_unknown_peer_key: Callable[[], None] | None = None
        """Told of a peer packet under a key id we do not hold (a node whose peer key we have
        not listed yet: `PeerList` lists again, no sooner than its gap allows)."""
        self._querier_session: bytes | None = None
        self._own_key_at: float | None = None  # the last probe under our own node key
        self._on_flood = on_flood
        self._denials = SourceDenials(
            "responder", self._refilter, guard=guard, on_denial=self._flooded, node=node
        )
        self._last_seq: OrderedDict[bytes, tuple[int, int]] = OrderedDict()
        """session -> (the last seq answered, how many answers it has had in rising order)."""
        self._socket: DatagramSocket | None = None
        self._port: int | None = None
        self._closed = False
        self._drops = Drops("responder")
        self._time: Callable[[], float] = time.monotonic
        self.last_probe_at: float | None = None
        """``loop.time()`` when the last valid probe for this node came; None before any."""
        self.last_writer_at: float | None = None
        """``loop.time()`` of the last probe from a possible writer (see the module docstring)."""
        self.standing_seen = False
        """Whether any prober reported its standing (a scheduler of this release runs)."""

    @property
    def port(self) -> int:
        """The bound UDP port (the one asked for, or the kernel's pick for 0)."""
        if self._port is None:
            raise RuntimeError("the liveness responder is not started")
        return self._port

    async def start(self, host: str, port: int) -> None:
        """Bind ``host`` (an IPv4 or IPv6 literal) and ``port`` (0: any) and answer probes."""
        if self._socket is not None or self._closed:
            raise RuntimeError("a liveness responder starts once")
        family = family_of(host)
        loop = asyncio.get_running_loop()
        try:
            sock = await open_socket(family, (host, port), self._received, "responder")
        except OSError as exc:
            raise OSError(exc.errno, f"liveness responder on {host} port {port}: {exc}") from exc
        self._time = loop.time
        self._socket = sock
        self._port = sock.sock.getsockname()[1]
        self._refilter()
        log.info(
            "liveness.responder.started",
            node=self._node,
            address=host,
            port=self._port,
            kernel_filter=sock.filtered,
        )

    @property
    def denied(self) -> frozenset[str]:
        """Sources whose datagrams the kernel drops now (the flood guard's list)."""
        return self._denials.denied

    @property
    def keyring(self) -> Keyring:
        return self._keyring

    @keyring.setter
    def keyring(self, keyring: Keyring) -> None:
        """A new keyring (the peers' pair keys, listed again); the filter follows."""
        self._keyring = keyring
        self._refilter()

    @property
    def querier_session(self) -> bytes | None:
        return self._querier_session

    @querier_session.setter
    def querier_session(self, session: bytes) -> None:
        """The session of this node's `PeerQuerier`: the kernel drops answers without it."""
        self._querier_session = session
        self._refilter()

    def _refilter(self) -> None:
        if self._socket is not None:
            self._socket.attach(
                responder_filter(
                    self._node,
                    (*self._keyring.key_ids, *self._keyring.node_key_ids),
                    denied=self._denials.denials,
                    peers_any_key=self._keyring.speaks_pair_keys,
                    querier_session=self._querier_session,
                )
            )

    def close(self) -> None:
        """Stop answering; the port is free once the loop has run (`wait_closed`)."""
        if self._closed:
            return
        self._closed = True
        self._denials.close()
        if self._socket is not None:
            self._socket.close()

    async def wait_closed(self) -> None:
        """Return once the socket is closed (after `close`)."""
        if self._socket is not None:
            await self._socket.closed

    def send(self, data: bytes, addr: tuple[str, int]) -> bool:
        """Send ``data`` from the responder's socket (peer queries leave from the address the
        peers know us by); False (counted) if it could not be sent."""
        if self._socket is None or self._closed:
            return False
        try:
            self._socket.sendto(data, addr)
        except OSError as exc:
            self._drops.unsent(exc, source_of(addr))
            return False
        return True

    def writer_silence(self) -> float | None:
        """Seconds since a writer's probe came; None if none ever did."""
        last = self.last_writer_at
        return None if last is None else self._time() - last

    def _received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        try:
            packet = decode(data, self._keyring)
        except WireError as exc:
            self._refuse(exc.reason, addr)
            if exc.reason == "peer_key" and self.on_unknown_peer_key is not None:
                self.on_unknown_peer_key()
            return
        if packet.kind == Kind.PEER_REPLY:
            if self.on_peer_reply is None:
                self._refuse("not_probe", addr)
            elif self.on_peer_reply(packet, addr) is not None:
                self._denials.refused(addr, 1, "peer_reply")
            return
        reason = self._refusal(packet)
        if reason is not None:
            self._refuse(reason, addr)
            return
        _, answered = self._last_seq.get(packet.session, (0, 0))
        self._last_seq[packet.session] = (packet.seq, answered + 1)
        self._last_seq.move_to_end(packet.session)
        if len(self._last_seq) > SESSIONS_KEPT:
            self._last_seq.popitem(last=False)
        if answered + 1 >= TRUST_AFTER:  # a live prober, not one replayed datagram
            self._denials.accepted(str(addr[0]), self._time(), addr[1])
        if packet.kind == Kind.PEER_QUERY:
            self._answer_peer(packet, addr)
            return
        self._probed(packet)
        try:
            flags = self._flags() | Flag.EXTENDED
        except Exception as exc:  # a controller that cannot say its state does not answer
            self._drops.failed("flags", exc)
            return
        reply = Packet(Kind.REPLY, packet.node, packet.session, packet.seq, flags)
        # under the key the probe came under: this node's own once a scheduler has read it
        if self.send(encode(reply, self._keyring, key_id=packet.key_id), addr):
            LIVENESS_REPLIES_SENT.inc()

    def _probed(self, probe: Packet) -> None:
        now = self._time() if self._socket is None else self._socket.arrived
        self.last_probe_at = now
        standing = bool(probe.flags & Flag.STANDING)
        self.standing_seen |= standing
        anyones = bool(self._keyring.node_keyed) and self._keyring.cluster_key(probe.key_id)
        if not anyones:
            self._own_key_at = now if self._keyring.node_keyed else None
        elif self._own_key_at is not None and now - self._own_key_at < OWN_KEY_TRUST:
            return  # any node could have sent it, and the schedulers use our own key
        if probe.flags & Flag.WRITER or not standing:
            self.last_writer_at = now
        if anyones:
            return  # a vouch needs a probe only a scheduler could sign
        if self._on_probe is not None:
            try:
                ext = probe.ext if probe.kind == Kind.PROBE_EXT else None
                self._on_probe(probe.flags, ext, now)
            except Exception as exc:  # never stop answering because a consumer failed
                self._drops.failed("on_probe", exc)

    def _answer_peer(self, query: Packet, addr: tuple[Any, ...]) -> None:
        silence = self.writer_silence()
        ms = NEVER_MS if silence is None else int(silence * 1000)
        heard = silence is not None and silence < self._writer_heard_within
        reply = Packet(
            Kind.PEER_REPLY,
            self._node,
            query.session,
            query.seq,
            Flag.WRITER_HEARD if heard else Flag.NONE,
            peer_ext(ms),
        )
        # under the key the query came under: the pair key of the querier's and ours if it has one
        data = encode(reply, self._keyring, key_id=query.key_id, key_owner=query.key_owner)
        self.send(data, addr)

    def _refusal(self, probe: Packet) -> str | None:
        """Why ``probe`` gets no answer; None if it does."""
        if probe.kind not in (Kind.PROBE, Kind.PROBE_EXT, Kind.PEER_QUERY):
            return "not_probe"
        if probe.node != self._node:
            return "other_node"
        last = self._last_seq.get(probe.session)
        if last is not None and probe.seq <= last[0]:
            return "replay"
        return None

    def _refuse(self, reason: str, addr: tuple[Any, ...]) -> None:
        """Count a refusal, and deny its source in the kernel once it floods."""
        filtered = self._socket is not None and self._socket.filtered
        weight = sample_weight(filtered) if reason in FILTERED else 1
        self._drops.rejected(reason, addr, weight)
        self._denials.refused(addr, weight, reason)

    def _flooded(self, denial: Denial) -> None:
        if self._on_flood is not None:
            try:
                self._on_flood(denial)
            except Exception as exc:
                self._drops.failed("on_flood", exc)
