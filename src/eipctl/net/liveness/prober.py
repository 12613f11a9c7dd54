"""`LivenessProber`: probes every node once per interval from each scheduler replica."""

from __future__ import annotations

import asyncio
import errno
import math
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog

from eipctl.core.flood import FloodGuard
from eipctl.core.liveness_filter import prober_filter, sample_weight
from eipctl.core.liveness_wire import (
    DIGEST_LENGTH,
    REPLY_NODE,
    SESSION_LENGTH,
    Flag,
    Keyring,
    Kind,
    Packet,
    ProbeEncoder,
    WireError,
    decode,
    probe_ext,
    probe_head,
    valid_node,
)
from eipctl.net.metrics import (
    LIVENESS_PROBES_SENT,
    LIVENESS_REPLIES_ACCEPTED,
)

from .denials import SourceDenials
from .sockets import (
    CHUNK,
    FAMILY_LABEL,
    REPORT_EVERY,
    DatagramSocket,
    Drops,
    canonical,
    family_of,
    open_socket,
    source_of,
)

log = structlog.get_logger(__name__)

FILTERED: Final = frozenset(
    {"short", "magic", "version", "kind", "length", "key", "not_reply", "session"}
)
"""Refusals the kernel filter makes too: one that reaches Python is one sampled of many."""
_EXTENDED: Final = int(Flag.EXTENDED)
_SENT: dict[socket.AddressFamily, Any] = {}


def _probes_sent(family: socket.AddressFamily) -> Any:
    """The family's child of ``eipctl_liveness_probes_sent``, made once (`labels` is slow)."""
    counter = _SENT.get(family)
    if counter is None:
        counter = _SENT[family] = LIVENESS_PROBES_SENT.labels(family=FAMILY_LABEL[family])
    return counter


class _Target:
    """Per-node state of a prober; a node whose endpoint changes gets a new one."""

    __slots__ = (
        "accepted",
        "address",
        "current",
        "extended",
        "family",
        "host",
        "node",
        "port",
        "probe",
    )

    def __init__(self, node: str, address: tuple[str, int], seq: int, probe: ProbeEncoder) -> None:
        self.node = node
        self.current = True  # still the prober's target for this node (`set_targets`)
        self.probe = probe  # encodes our probe to this node for a given seq, flags, digest
        self.extended = False  # its last accepted reply said it reads PROBE_EXT
        self.address = address  # as given, for sendto
        self.family = family_of(address[0])
        self.host = canonical(address[0])  # as a reply's source address reads
        self.port = address[1]
        self.accepted = seq  # the last seq accepted: only replies to later probes count


class LivenessProber:
    """Probes every target once per ``interval`` and reports each fresh reply, once.

    A reply is accepted only if it decodes (right key, intact), is a REPLY in our session,
    for a current target, from that target's (address, port), and echoes a seq we sent in
    the last ``window`` rounds that is newer than the last one accepted for that node. Then
    ``on_reply(node, flags)`` is called at once, from the receiving callback.

    `run` sends; the sockets (one per address family, opened on first use) read replies
    until `close`.

    Each round's probes carry ``standing()`` (STANDING, and WRITER while this replica leads
    with a current Lease). A target whose replies say EXTENDED gets PROBE_EXT with
    ``digest(node)`` (the claims the leader places there; zeros unless WRITER) and
    ``nodes()`` (how many IpNodes this replica knows); one that has not answered for half the
    window gets plain probes again (a controller rolled back).
    """

    def __init__(
        self,
        keyring: Keyring,
        *,
        interval: float,
        on_reply: Callable[[str, Flag], None],
        window: int = 8,
        standing: Callable[[], Flag] | None = None,
        digest: Callable[[str], bytes] | None = None,
        nodes: Callable[[], int] | None = None,
        guard: FloodGuard | None = None,
    ) -> None:
        if not interval > 0 or not math.isfinite(interval):
            raise ValueError("interval must be a positive number of seconds")
        if window < 1:
            raise ValueError("window must be at least 1 round")
        self._cluster_keys = keyring
        self._keyring = keyring  # the cluster keys, plus the node keys once known
        self._interval = interval
        self._on_reply = on_reply
        self._window = window
        self._standing = standing or (lambda: Flag.STANDING)
        self._digest = digest
        self._nodes = nodes or (lambda: len(self._targets))
        self._round_flags = Flag.STANDING
        self._round_nodes = 0
        self._round_parts()
        self._session = os.urandom(SESSION_LENGTH)
        self._seq = 0
        self._targets: dict[str, _Target] = {}
        self._by_name: dict[bytes, _Target] = {}  # the same, by the bytes a reply names it by
        self._sockets: dict[socket.AddressFamily, DatagramSocket] = {}
        self._opened: list[DatagramSocket] = []
        # family -> when opening its socket last failed (retried after REPORT_EVERY)
        self._unusable: dict[socket.AddressFamily, float] = {}
        self._drops = Drops("prober")
        self._denials = SourceDenials("prober", self._refilter, guard=guard)
        """Sources whose refused replies pass the limit are dropped in the kernel: a flood
        of recorded replies (the right session, so the filter admits them) is refused in
        Python as ``source``/``replay``/``stale`` at a few microseconds each until then."""
        self._accepted = 0  # replies accepted since the metric was last brought up to date
        self._time: Callable[[], float] = time.monotonic  # the loop's clock once sockets open
        self._running = False
        self._closed = False

    @property
    def session(self) -> bytes:
        return self._session

    @property
    def seq(self) -> int:
        """The seq of the latest round (0 before the first)."""
        return self._seq

    def set_targets(self, targets: Mapping[str, tuple[str, int]]) -> None:
        """Probe exactly these nodes from the next round: node -> (IP literal, port).

        Replaces the whole set; a node whose endpoint is unchanged keeps its state. Raises
        ValueError (and changes nothing) if any entry is invalid.
        """
        fresh: dict[str, _Target] = {}
        for node, (host, port) in targets.items():
            if not valid_node(node):
                raise ValueError(f"node {node!r} is not an IpNode name")
            if not 0 < port < 65536:
                raise ValueError(f"{node}: port {port} is not a UDP port")
            family_of(host)
            old = self._targets.get(node)
            if old is not None and old.address == (host, port):
                fresh[node] = old
            else:
                probe = ProbeEncoder(node, self._session, self._keyring)
                fresh[node] = _Target(node, (host, port), self._seq, probe)
        for node, old in self._targets.items():
            old.current = fresh.get(node) is old
        self._targets = fresh
        self._by_name = {node.encode("ascii"): target for node, target in fresh.items()}

    def set_node_keys(self, node_keys: Mapping[str, bytes]) -> None:
        """The nodes' own keys (node -> key, docs/liveness.md "Node keys"), replacing those
        known before: probes to a node with a key are signed with it, and its replies are
        accepted under it only (no other node can answer for it). Raises ValueError (and
        changes nothing) for an unusable key."""
        keyring = self._cluster_keys.with_node_keys(node_keys)
        before = self._keyring
        self._keyring = keyring
        for node, target in self._targets.items():
            if keyring.signer(node, Kind.PROBE) != before.signer(node, Kind.PROBE):
                target.probe = ProbeEncoder(node, self._session, keyring)
        if bool(before.node_keyed) != bool(keyring.node_keyed):
            self._refilter()  # the filter checks key ids only while there are no node keys

    async def run(self) -> None:
        """Probe until cancelled (or closed): one round per ``interval``, on a fixed cadence.

        Rounds start at multiples of ``interval`` from the first. One that starts late
        (a busy loop) starts at once; rounds missed entirely are skipped, never made up for
        in a burst.
        """
        if self._running or self._closed:
            raise RuntimeError("a liveness prober runs once at a time, until closed")
        self._running = True
        loop = asyncio.get_running_loop()
        next_round = loop.time()
        try:
            while not self._closed:
                now = loop.time()
                if now - next_round >= self._interval:  # whole rounds missed: skip them
                    next_round += math.floor((now - next_round) / self._interval) * self._interval
                await self._open_sockets(now)
                self._seq += 1
                self._round_flags = self._round_standing()
                self._round_nodes = self._round_count()
                self._round_parts()
                self._count_accepted()
                next_round += self._interval
                await self._round(loop, next_round)
                await asyncio.sleep(max(0.0, next_round - loop.time()))
        finally:
            self._running = False

    def _round_standing(self) -> Flag:
        try:
            return self._standing() | Flag.STANDING
        except Exception as exc:  # unknown standing: say nothing a controller would trust
            self._drops.failed("standing", exc)
            return Flag.STANDING

    def _round_count(self) -> int:
        try:
            return self._nodes()
        except Exception as exc:  # 0: "no count", which a controller does not use
            self._drops.failed("nodes", exc)
            return 0

    def _round_parts(self) -> None:
        """What every probe of the round shares: made once a round, not once a probe."""
        flags = self._round_flags
        self._head = probe_head(flags, extended=False)
        self._ext_head = probe_head(flags, extended=True)
        self._ext_zeros = probe_ext(bytes(DIGEST_LENGTH), self._round_nodes)  # no digest
        self._digests = self._digest if flags & Flag.WRITER else None

    def _extended_probe(self, target: _Target, seq: bytes) -> bytes:
        """A PROBE_EXT to ``target``: the digest of what it holds, if we are the writer."""
        if self._digests is None:
            return target.probe.sign(self._ext_head, seq, self._ext_zeros)
        try:
            digest = self._digests(target.node)
        except Exception as exc:  # no digest: the probe vouches for nothing
            self._drops.failed("digest", exc)
            head = probe_head(self._round_flags & ~Flag.WRITER, extended=True)
            return target.probe.sign(head, seq, self._ext_zeros)
        return target.probe.sign(self._ext_head, seq, probe_ext(digest, self._round_nodes))

    def close(self) -> None:
        """Close the sockets (idempotent): no more replies are read, the ports are freed."""
        if self._closed:
            return
        self._closed = True
        self._denials.close()
        self._count_accepted()
        for sock in self._opened:
            sock.close()
        self._sockets.clear()

    async def wait_closed(self) -> None:
        """Return once every socket is closed (after `close`)."""
        for sock in self._opened:
            await sock.closed

    def drain(self) -> int:
        """Read every reply queued now (the judge calls this before it looks at silences, so
        a reply that arrived while the loop was busy counts); how many were read."""
        return sum(sock.drain() for sock in list(self._sockets.values()))

    def _count_accepted(self) -> None:
        """Add the replies accepted to the metric: once a round, not once a reply."""
        if self._accepted:
            LIVENESS_REPLIES_ACCEPTED.inc(self._accepted)
            self._accepted = 0

    async def _open_sockets(self, now: float) -> None:
        self._time = asyncio.get_running_loop().time
        for family in {target.family for target in self._targets.values()}:
            if family in self._sockets:
                continue
            failed_at = self._unusable.get(family)
            if failed_at is not None and now - failed_at < REPORT_EVERY:
                continue
            wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"
            try:
                sock = await open_socket(
                    family, (wildcard, 0), self._received, "prober", stamped=False
                )
            except OSError as exc:
                if failed_at is None:
                    log.warning(
                        "liveness.socket.failed", family=FAMILY_LABEL[family], error=str(exc)
                    )
                self._unusable[family] = now
                continue
            if self._closed:  # closed while opening
                sock.close()
                continue
            self._attach(family, sock)
            self._unusable.pop(family, None)
            self._sockets[family] = sock
            self._opened.append(sock)

    async def _round(self, loop: asyncio.AbstractEventLoop, next_round: float) -> None:
        """Probe each target once; more than `CHUNK` targets are spread until ``next_round``."""
        targets = list(self._targets.values())
        chunks = math.ceil(len(targets) / CHUNK)
        started = loop.time()
        for n in range(chunks):
            if n:
                await asyncio.sleep(
                    max(0.0, started + n * (next_round - started) / chunks - loop.time())
                )
                if self._closed:
                    return
            self._send_chunk(targets[n * CHUNK : (n + 1) * CHUNK])

    def _send_chunk(self, chunk: list[_Target]) -> None:
        seq, head, half, sockets = self._seq, self._head, self._window // 2, self._sockets
        seq_bytes = seq.to_bytes(8, "big")
        sent = dict.fromkeys(sockets, 0)
        for target in chunk:
            if not target.current:  # removed or changed since the round began
                continue
            sock = sockets.get(target.family)
            try:
                if sock is None:
                    raise OSError(errno.EAFNOSUPPORT, "no socket for this address family")
                if target.extended and seq - target.accepted <= half:
                    sock.sendto(self._extended_probe(target, seq_bytes), target.address)
                else:
                    sock.sendto(target.probe.sign(head, seq_bytes), target.address)
            except OSError as exc:
                self._drops.unsent(exc, f"{target.node} {source_of(target.address)}")
                continue
            sent[target.family] += 1
        for family, count in sent.items():
            if count:
                _probes_sent(family).inc(count)

    def _received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        """A datagram on our socket. The common case, a fresh reply from the target's own
        (address, port), is checked on the bytes (`ProbeEncoder.reply`); anything else is
        decoded in full, so that a refusal is counted by its reason."""
        target = self._by_name.get(data[REPLY_NODE])
        if target is not None and addr[0] == target.host and addr[1] == target.port:
            after = max(self._seq - self._window, target.accepted)
            fresh = target.probe.reply(data, after, self._seq)
            if fresh is not None:
                self._accept(target, fresh[0], fresh[1])
                return
        try:
            reply = decode(data, self._keyring)
        except WireError as exc:
            self._refuse(exc.reason, addr)
            return
        target = self._targets.get(reply.node)
        reason = self._refusal(reply, target, addr)
        if reason is not None:
            self._refuse(reason, addr)
            return
        assert target is not None
        self._accept(target, reply.seq, reply.flags)

    def _accept(self, target: _Target, seq: int, flags: Flag) -> None:
        target.accepted = seq
        target.extended = bool(int(flags) & _EXTENDED)  # int: an enum's & is slow
        self._denials.trusted(target.host, self._time(), target.port)
        self._accepted += 1
        try:
            self._on_reply(target.node, flags)
        except Exception as exc:  # a failing consumer must not stop the replies being read
            self._drops.failed("on_reply", exc)

    def _attach(self, family: socket.AddressFamily, sock: DatagramSocket) -> None:
        denied = {s: p for s, p in self._denials.denials.items() if family_of(s) == family}
        key_ids = None if self._keyring.node_keyed else self._keyring.key_ids
        sock.attach(prober_filter(self._session, key_ids, denied=denied))

    def _refilter(self) -> None:
        for family, sock in self._sockets.items():
            self._attach(family, sock)

    def _refuse(self, reason: str, addr: tuple[Any, ...]) -> None:
        filtered = (
            reason in FILTERED
            and not (reason == "key" and self._keyring.node_keyed)  # key ids unchecked then
            and any(s.filtered for s in self._sockets.values())
        )
        weight = sample_weight(filtered)
        self._drops.rejected(reason, addr, weight)
        self._denials.refused(addr, weight, reason)

    def _refusal(self, reply: Packet, target: _Target | None, addr: tuple[Any, ...]) -> str | None:
        """Why ``reply`` (from ``addr``) does not count; None if it does."""
        if reply.kind != Kind.REPLY:
            return "not_reply"
        if reply.session != self._session:
            return "session"
        if target is None:
            return "unknown_node"
        host = addr[0]
        if addr[1] != target.port or (host != target.host and canonical(host) != target.host):
            return "source"
        if reply.seq > self._seq:
            return "unsent_seq"
        if reply.seq <= self._seq - self._window:
            return "stale"
        if reply.seq <= target.accepted:
            return "replay"
        return None
