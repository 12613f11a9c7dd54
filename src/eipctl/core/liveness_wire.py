"""The node-liveness packet: authenticated UDP challenge/response, bytes in, values out.

Every scheduler replica probes every node's controller over UDP and judges liveness from the
replies (`net.liveness` owns the sockets; this module owns the format and the keys).

Why challenge/response: a reply counts only if it echoes a ``session`` + ``seq`` that the
prober sent recently and has not accepted before, and carries a MAC made with the shared key.
``session`` is 8 random bytes each prober process picks at start, ``seq`` rises by one per
probe round. So a recorded reply replayed later cannot keep a dead node alive (its seq was
accepted already, or is too old, or belongs to an earlier session), nobody without the key
can forge one, and no clock is ever compared across machines: the prober judges freshness by
the seq it sent, on its own clock. The idea is BFD's authenticated echo; the format is ours.

Probes are authenticated too: a responder answers only a probe MACed with a key it holds and
addressed to its own node, so it answers nobody else and is no reflector for a stranger's
traffic. It remembers the last seq it answered in each of the last 32 sessions, so a
*recorded* probe replayed later gets no reply either (`net.liveness.responder`).

Layout (network byte order), 45..305 bytes::

    magic "EIPL" | version u8 = 1 | kind u8 | flags u8 | node length u8 | session 8 |
    seq u64 | key id 4 | node (ASCII) | [ext 8, kinds 3..5 only] | mac 16

``mac`` is HMAC-SHA256 over everything before it, truncated to 16 bytes. ``key id`` is the
first 4 bytes of sha256(key): it picks the key to check with, so keys rotate without a flag
day (`Keyring`). Unknown flag bits are ignored, so a later release may add flags.

Kinds 1 and 2 (PROBE, REPLY) are the first release's and carry no ``ext``. The kinds added for
holding through control-plane outages (docs/liveness.md, "Outages") carry 8 bytes more:

- ``PROBE_EXT`` (3): a probe whose ``ext`` (`probe_ext`) is the prober's `placement_digest`
  (6 bytes) of the claims it places on this node (zeros unless the prober is the writing
  leader) and u16 the number of IpNodes it knows (the denominator of its quorum, which the
  controller then uses for its own: `core.outage`). Sent only to a
  responder whose replies carry ``Flag.EXTENDED``: a first-release responder drops kind 3 as
  ``kind`` and would look dead, so it keeps getting kind 1.
- ``PEER_QUERY`` (4): a controller asks another node's controller whether it hears a writing
  leader; ``node`` is the node asked, ``ext`` is zeros.
- ``PEER_REPLY`` (5): the answer; ``node`` is the node answering, ``session``/``seq`` echo the
  query, ``ext`` is u32 milliseconds since the answerer last heard a writing leader
  (0xFFFFFFFF: never) and u32 zero. Flag ``WRITER_HEARD`` says the same in one bit.

Flags, by the kind that carries them: replies FENCED, API_STALE, EXTENDED; probes STANDING,
WRITER; peer replies WRITER_HEARD. A first-release decoder ignores every bit but FENCED.

Node keys ([hostile], docs/liveness.md "Node keys"): a controller may also hold a key of its
own, which it made and handed to the schedulers alone (a Secret it may write but not read).
Probes to that node and its replies are then MACed with it, and a `Keyring` that knows node
keys (`with_node_keys`) binds each to its node: a probe or reply under node x's key that
names another node is refused (``owner``), and so is one under the cluster key that names a
node with a key of its own. So no other node, though it holds the cluster key, can answer
for it.

Peer keys (docs/liveness.md "Peer keys"): peer queries and answers between two nodes that
both publish a peer key go under the key of their pair (`core.peer_keys`), which only those
two can compute. A `Keyring` that knows pair keys (`with_peer_keys`) binds each to its peer:
a PEER_REPLY under peer x's pair key must name x, one under the cluster key must not name a
peer that has a pair key, and the node-keyed kinds are never accepted under a pair key
(``owner``). Pair key ids may collide (4 bytes, one per peer): each candidate is tried.

`decode` raises only `WireError`, whose ``reason`` is one of `WIRE_ERRORS` (short, bounded:
fit for a metric label), whatever bytes it is given.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from eipctl.core.liveness_mac import MacKey
from eipctl.core.naming import is_dns1123_subdomain

__all__ = [
    "DIGEST_LENGTH",
    "EXT_LENGTH",
    "MIN_KEY_LENGTH",
    "NEVER_MS",
    "REPLY_NODE",
    "SESSION_LENGTH",
    "WIRE_ERRORS",
    "Flag",
    "Keyring",
    "Kind",
    "Packet",
    "ProbeEncoder",
    "WireError",
    "decode",
    "encode",
    "key_id",
    "peer_ext",
    "peer_silence_ms",
    "placement_digest",
    "probe_ext",
    "probe_ext_fields",
    "probe_head",
    "valid_node",
]

MAGIC: Final = b"EIPL"
VERSION: Final = 1
SESSION_LENGTH: Final = 8
KEY_ID_LENGTH: Final = 4
MAC_LENGTH: Final = 16
MIN_KEY_LENGTH: Final = 16
MAX_SEQ: Final = 2**64 - 1
EXT_LENGTH: Final = 8
DIGEST_LENGTH: Final = 6
MAX_NODES: Final = 0xFFFF
NO_EXT: Final = bytes(EXT_LENGTH)
NEVER_MS: Final = 0xFFFFFFFF
"""A peer reply's silence for "never heard a writing leader"."""
_HEADER: Final = struct.Struct("!4sBBBB8sQ4s")  # magic .. key id: 28 bytes
_MIN_PACKET: Final = _HEADER.size + 1 + MAC_LENGTH

WIRE_ERRORS: Final = frozenset(
    {"short", "magic", "version", "kind", "length", "key", "peer_key", "mac", "node", "owner"}
)
"""Every `WireError.reason`, in the order `decode` checks them (``peer_key``: a peer kind
under a key id this keyring does not hold, from a keyring that holds pair keys: the kernel
filter lets those through, so they are not a sampled refusal)."""


class Kind(enum.IntEnum):
    PROBE = 1
    REPLY = 2
    PROBE_EXT = 3
    PEER_QUERY = 4
    PEER_REPLY = 5

    @property
    def extended(self) -> bool:
        """Whether packets of this kind carry the 8 bytes of ``ext``."""
        return self >= Kind.PROBE_EXT

    @property
    def node_keyed(self) -> bool:
        """Whether packets of this kind go between a scheduler and one node's controller,
        under that node's key when it has one (peer packets never are)."""
        return self <= Kind.PROBE_EXT


class Flag(enum.IntFlag):
    NONE = 0
    FENCED = 1
    """A reply from a controller that has fenced itself: it holds nothing, give it no claims."""
    API_STALE = 2
    """A reply from a controller whose own API requests fail: it holds what it has (a writer
    vouches for it), but cannot learn of new claims; place none there."""
    EXTENDED = 4
    """A reply from a controller that reads PROBE_EXT and answers PEER_QUERY."""
    STANDING = 8
    """A probe from a prober that reports its standing: without it (a first-release
    scheduler) a controller must assume the prober may be a writing leader."""
    WRITER = 16
    """A probe from the scheduler leader while its Lease renewals succeed: it can move claims."""
    WRITER_HEARD = 32
    """A peer reply: the answering controller heard a writing leader within the last half
    probe silence."""


_KNOWN_FLAGS: Final = int(
    Flag.FENCED | Flag.API_STALE | Flag.EXTENDED | Flag.STANDING | Flag.WRITER | Flag.WRITER_HEARD
)
_KINDS: Final = {int(kind): kind for kind in Kind}
_FLAGS: Final = tuple(Flag(byte & _KNOWN_FLAGS) for byte in range(256))  # Flag(n) is slow


class WireError(ValueError):
    """Bytes that are not a packet we accept; ``reason`` is one of `WIRE_ERRORS`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@functools.lru_cache(maxsize=4096)
def valid_node(node: str) -> bool:
    """Whether ``node`` may be sent: an IpNode name (DNS-1123 subdomain, 1..253 ASCII).

    Every packet decoded asks (a regular expression, ~2 us) about the same few names: kept
    per name (bounded: names an attacker makes up only churn the cache)."""
    return is_dns1123_subdomain(node)


@dataclass(frozen=True, slots=True)
class Packet:
    """One probe or reply. ``node`` is the IpNode the probe is for / the reply is from."""

    kind: Kind
    node: str
    session: bytes
    seq: int
    flags: Flag = Flag.NONE
    ext: bytes = b""
    """8 bytes for the extended kinds (empty taken as zeros), none for PROBE and REPLY."""
    key_id: bytes = field(default=b"", compare=False)
    """The key id it came under (set by `decode`): a reply is signed with the key its probe
    came under. Not part of the packet's value."""
    key_owner: str = field(default="", compare=False)
    """For a packet under a pair key (set by `decode`): the peer whose pair key it is, so for
    a PEER_QUERY the node that asked. Empty otherwise."""

    def __post_init__(self) -> None:
        if self.kind.extended:
            if not self.ext:
                object.__setattr__(self, "ext", NO_EXT)
            if len(self.ext) != EXT_LENGTH:
                raise ValueError(f"ext must be {EXT_LENGTH} bytes, not {len(self.ext)}")
        elif self.ext:
            raise ValueError(f"a {self.kind.name} carries no ext")
        if not valid_node(self.node):
            raise ValueError(f"node {self.node!r} is not an IpNode name (DNS-1123 subdomain)")
        if len(self.session) != SESSION_LENGTH:
            raise ValueError(f"session must be {SESSION_LENGTH} bytes, not {len(self.session)}")
        if not 0 <= self.seq <= MAX_SEQ:
            raise ValueError(f"seq {self.seq} does not fit in 64 bits")


def key_id(key: bytes) -> bytes:
    """The 4 bytes that name ``key`` on the wire: derived, nothing to configure."""
    return hashlib.sha256(key).digest()[:KEY_ID_LENGTH]


class Keyring:
    """The shared secret keys: the first signs, every one is accepted.

    Rotation without a flag day: add the new key second, roll out; swap the order, roll out;
    remove the old key, roll out. At every step each pair of processes shares a key that one
    signs with and the other accepts.
    """

    __slots__ = (
        "_accepted",
        "_ids",
        "_node_signing",
        "_owners",
        "_peer_ids",
        "_peer_mode",
        "_peer_signing",
        "_required",
        "_signing",
        "_signing_id",
    )

    def __init__(self, keys: Iterable[bytes]) -> None:
        accepted: dict[bytes, bytes] = {}
        for n, key in enumerate(keys, 1):
            if len(key) < MIN_KEY_LENGTH:
                raise ValueError(
                    f"liveness key {n} is {len(key)} bytes; each key must be at least "
                    f"{MIN_KEY_LENGTH} bytes"
                )
            kid = key_id(key)
            if accepted.get(kid, key) != key:  # 2**-32 per pair; say so rather than misjudge
                raise ValueError(f"liveness key {n} has the key id of an earlier key")
            accepted.setdefault(kid, bytes(key))  # the same key twice is harmless: once
        if not accepted:
            raise ValueError("a liveness keyring needs at least one key")
        self._accepted = accepted
        self._ids = tuple(accepted)
        self._signing_id = self._ids[0]
        self._signing = accepted[self._signing_id]
        self._owners: dict[bytes, str] = {}  # node key id -> its node
        self._node_signing: dict[str, tuple[bytes, bytes]] = {}  # node -> (key id, key)
        self._required = False  # node-keyed kinds for a keyed node: its key only
        self._peer_ids: dict[bytes, tuple[tuple[str, bytes], ...]] = {}  # kid -> (peer, key)s
        self._peer_signing: dict[str, tuple[bytes, bytes]] = {}  # peer -> (key id, key)
        self._peer_mode = False  # this node speaks pair keys (`with_peer_keys`, even of none)

    def with_node_keys(self, node_keys: Mapping[str, bytes], *, required: bool = True) -> Keyring:
        """This keyring's cluster keys plus one key per node (node -> key), each bound to its
        node: node-keyed kinds (`Kind.node_keyed`) for a node in ``node_keys`` are signed
        with that node's key, and a packet under it that names another node is refused.
        ``required`` (the schedulers'): such packets for a keyed node are accepted under its
        key only, not under the cluster key; without (the controller's own keyring, while a
        scheduler may not have read its key yet) the cluster key still goes. Raises
        ValueError for a key too short, an invalid node name, or a key id already in use
        (2**-32 per pair)."""
        ring = Keyring(self._accepted[kid] for kid in self._ids)  # the cluster keys
        ring._required = required
        ring._signing_id, ring._signing = self._signing_id, self._signing
        for node, key in sorted(node_keys.items()):
            kid = _checked_key_id("node", node, key)
            if kid in ring._accepted:
                raise ValueError(f"node key for {node} has the key id of another key")
            ring._accepted[kid] = bytes(key)
            ring._owners[kid] = node
            ring._node_signing[node] = (kid, bytes(key))
        return ring

    def with_peer_keys(self, peer_keys: Mapping[str, bytes]) -> Keyring:
        """This keyring (cluster and node keys as they are) plus one pair key per peer (peer
        node -> key, `core.peer_keys.PeerIdentity.pair_key`): queries to a peer in it are
        signed with their pair key, and its answers are accepted under that key only.
        Raises ValueError for a key too short or an invalid node name."""
        ring = Keyring(self._accepted[kid] for kid in self._ids)
        ring._accepted = dict(self._accepted)
        ring._signing_id, ring._signing = self._signing_id, self._signing
        ring._owners, ring._node_signing = dict(self._owners), dict(self._node_signing)
        ring._required = self._required
        ring._peer_mode = True
        by_id: dict[bytes, list[tuple[str, bytes]]] = {}
        for peer, key in sorted(peer_keys.items()):
            kid = _checked_key_id("pair", peer, key)
            if kid in ring._accepted:  # 2**-32: leave this peer on the cluster key
                continue
            by_id.setdefault(kid, []).append((peer, bytes(key)))
            ring._peer_signing[peer] = (kid, bytes(key))
        ring._peer_ids = {kid: tuple(v) for kid, v in by_id.items()}
        return ring

    @property
    def peer_keyed(self) -> frozenset[str]:
        """The peers this keyring holds a pair key for."""
        return frozenset(self._peer_signing)

    @property
    def speaks_pair_keys(self) -> bool:
        """Whether this keyring came from `with_peer_keys` (a node with a peer key of its
        own): peer kinds under a key id it does not hold are then ``peer_key``, not ``key``."""
        return self._peer_mode

    def cluster_key(self, kid: bytes) -> bool:
        """Whether ``kid`` names one of the cluster keys (held by every controller)."""
        return kid in self._accepted and kid not in self._owners

    def key_of(self, kid: bytes, owner: str = "") -> bytes:
        """The key of id ``kid`` (of ``owner``'s pair, for a pair key); KeyError if none."""
        key = self._accepted.get(kid)
        if key is not None:
            return key
        for peer, pair in self._peer_ids[kid]:
            if peer == owner:
                return pair
        raise KeyError(kid)

    @property
    def node_keyed(self) -> frozenset[str]:
        """The nodes this keyring holds a key of their own for."""
        return frozenset(self._node_signing)

    def signer(self, node: str, kind: Kind) -> tuple[bytes, bytes]:
        """(key id, key) that a packet of ``kind`` about ``node`` is signed with."""
        own = (self._node_signing if kind.node_keyed else self._peer_signing).get(node)
        if own is not None:
            return own
        return self._signing_id, self._signing

    @classmethod
    def from_text(cls, text: str) -> Keyring:
        """One key per non-empty line, surrounding whitespace stripped; a line's UTF-8 bytes
        are the key (the format of a Kubernetes Secret mounted as a file)."""
        return cls(line.strip().encode() for line in text.splitlines() if line.strip())

    @property
    def key_ids(self) -> tuple[bytes, ...]:
        """The ids of the cluster keys, the signing key's first (safe to log: hex them)."""
        return self._ids

    @property
    def node_key_ids(self) -> tuple[bytes, ...]:
        """The ids of the node keys, by node name."""
        return tuple(kid for _, (kid, _) in sorted(self._node_signing.items()))

    def __repr__(self) -> str:  # never the keys themselves
        nodes = f", node_keys={len(self._node_signing)}" if self._node_signing else ""
        return f"Keyring(key_ids=[{', '.join(kid.hex() for kid in self._ids)}]{nodes})"


def _checked_key_id(what: str, node: str, key: bytes) -> bytes:
    """The key id of ``what`` key (node, pair) for ``node``; ValueError naming the rule."""
    if not valid_node(node):
        raise ValueError(f"{what} key for {node!r}: not an IpNode name")
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"{what} key for {node} is {len(key)} bytes; at least {MIN_KEY_LENGTH}")
    return key_id(key)


@functools.lru_cache(maxsize=1024)
def _mac_key(key: bytes) -> MacKey:
    """``key``'s pads hashed once (`MacKey`): a controller answering a flood, or the test bed
    answering for 1,000 nodes, MACs every datagram twice (the probe, the reply) under the
    same few keys."""
    return MacKey(key)


def _mac(key: bytes, body: bytes) -> bytes:
    return _mac_key(key).digest(body)[:MAC_LENGTH]


def encode(
    packet: Packet, keyring: Keyring, *, key_id: bytes | None = None, key_owner: str = ""
) -> bytes:
    """The packet's bytes, signed with the key `Keyring.signer` picks for it, or with the
    keyring's key of id ``key_id`` (a reply under the key its probe came under; of
    ``key_owner``'s pair for a pair key: `Packet.key_owner`)."""
    node = packet.node.encode("ascii")
    if key_id is None:
        kid, key = keyring.signer(packet.node, packet.kind)
    else:
        kid, key = key_id, keyring.key_of(key_id, key_owner)
    body = (
        _HEADER.pack(
            MAGIC,
            VERSION,
            packet.kind,
            int(packet.flags) & _KNOWN_FLAGS,
            len(node),
            packet.session,
            packet.seq,
            kid,
        )
        + node
        + packet.ext
    )
    return body + _mac(key, body)


def placement_digest(claims: Iterable[str]) -> bytes:
    """8 bytes naming a set of claim names: what a leader placed on a node, or what the
    node's controller sees placed on it. A claim's name is its IP (and, per node, its node),
    so equal digests mean the same addresses; order and repeats do not matter."""
    text = "\n".join(sorted(set(claims))).encode("ascii", "replace")
    return hashlib.sha256(text).digest()[:DIGEST_LENGTH]


def probe_ext(digest: bytes, nodes: int) -> bytes:
    """A PROBE_EXT's ext: the 6-byte digest and the prober's node count (capped)."""
    if len(digest) != DIGEST_LENGTH:
        raise ValueError(f"a digest is {DIGEST_LENGTH} bytes")
    return digest + struct.pack("!H", max(0, min(int(nodes), MAX_NODES)))


def probe_ext_fields(ext: bytes) -> tuple[bytes, int]:
    """(digest, node count) of a PROBE_EXT's ext."""
    return bytes(ext[:DIGEST_LENGTH]), int(struct.unpack_from("!H", ext, DIGEST_LENGTH)[0])


def peer_ext(silence_ms: int) -> bytes:
    """A PEER_REPLY's ext: ``silence_ms`` since a writing leader was heard, capped."""
    return struct.pack("!II", max(0, min(int(silence_ms), NEVER_MS)), 0)


def peer_silence_ms(ext: bytes) -> int:
    """The milliseconds a PEER_REPLY's ext says (`NEVER_MS`: never heard one)."""
    return int(struct.unpack_from("!I", ext)[0])


class ProbeEncoder:
    """Encodes a prober's probes to one node and checks that node's replies to them.

    What does not vary (node length, session, key id, node, the key's hashed pads) is made
    once, so a probe is a few concatenations and one MAC, and a reply is checked by comparing
    bytes before one MAC, with no `Packet` built: a prober does this 20,000 times a second at
    1,000 nodes."""

    __slots__ = ("_mac", "_post", "_pre")

    def __init__(self, node: str, session: bytes, keyring: Keyring) -> None:
        Packet(Kind.PROBE, node, session, 0)  # validates
        name = node.encode("ascii")
        kid, key = keyring.signer(node, Kind.PROBE)
        self._pre = bytes((len(name),)) + session  # the header from node length to session
        self._post = kid + name  # key id and node: the header's end and the body
        self._mac = MacKey(key)

    def encode(self, seq: int, flags: int, ext: bytes | None = None) -> bytes:
        """A PROBE, or a PROBE_EXT when ``ext`` (8 bytes, `probe_ext`) is given."""
        if not 0 <= seq <= MAX_SEQ:
            raise ValueError(f"seq {seq} does not fit in 64 bits")
        if ext is not None and len(ext) != EXT_LENGTH:
            raise ValueError(f"an ext is {EXT_LENGTH} bytes")
        head = probe_head(flags, extended=ext is not None)
        return self.sign(head, seq.to_bytes(8, "big"), ext or b"")

    def sign(self, head: bytes, seq: bytes, ext: bytes = b"") -> bytes:
        """A probe from parts a prober makes once a round: ``head`` (`probe_head`), the seq's
        8 bytes (big-endian) and the ext (8 bytes with an extended head, else empty)."""
        body = head + self._pre + seq + self._post + ext
        return body + self._mac.digest(body)[:MAC_LENGTH]

    def reply(self, data: bytes, after: int, upto: int) -> tuple[int, Flag] | None:
        """(seq, flags) of ``data`` if it is a REPLY to this encoder's probes, with a seq in
        (``after``, ``upto``], that `decode` accepts with this encoder's keyring: the same
        session, node and key id (the key its probes go under), the MAC intact. None for
        anything else (`decode` says why): the MAC is computed only if all the rest fits."""
        if data[_KEY_ID_AT:-MAC_LENGTH] != self._post or data[:_FLAGS_AT] != _REPLY_HEAD:
            return None  # the length is right once the key id and node are where they should be
        if data[_LENGTH_AT:_SEQ_AT] != self._pre:
            return None
        seq = int.from_bytes(data[_SEQ_AT:_KEY_ID_AT], "big")
        if not after < seq <= upto:
            return None
        end = len(data) - MAC_LENGTH
        if not hmac.compare_digest(self._mac.digest(data[:end])[:MAC_LENGTH], data[end:]):
            return None
        return seq, _FLAGS[data[_FLAGS_AT]]


def probe_head(flags: int, *, extended: bool) -> bytes:
    """A probe's first 7 bytes (magic, version, kind, flags): `ProbeEncoder.sign`'s ``head``."""
    return (_PROBE_EXT_HEADS if extended else _PROBE_HEADS)[int(flags) & _KNOWN_FLAGS]


_PROBE_HEADS: Final = tuple(
    MAGIC + bytes((VERSION, Kind.PROBE, f)) for f in range(_KNOWN_FLAGS + 1)
)
_PROBE_EXT_HEADS: Final = tuple(
    MAGIC + bytes((VERSION, Kind.PROBE_EXT, f)) for f in range(_KNOWN_FLAGS + 1)
)
_REPLY_HEAD: Final = MAGIC + bytes((VERSION, Kind.REPLY))
_FLAGS_AT: Final = 6
_LENGTH_AT: Final = 7
_SEQ_AT: Final = _LENGTH_AT + 1 + SESSION_LENGTH
_KEY_ID_AT: Final = _SEQ_AT + 8
REPLY_NODE: Final = slice(_HEADER.size, -MAC_LENGTH)
"""Where a REPLY's node name is (``data[REPLY_NODE]``), if it is one."""


def decode(data: bytes, keyring: Keyring) -> Packet:
    """The packet in ``data``, if it is well formed and MACed with a key of ``keyring``.

    Raises `WireError` (and nothing else) otherwise. Cheap checks come first, so garbage
    costs no HMAC; the MAC is checked before the node name is read.
    """
    if len(data) < _MIN_PACKET:
        raise WireError("short")
    magic, version, kind, flags, length, session, seq, kid = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireError("magic")
    if version != VERSION:
        raise WireError("version")
    if kind not in _KINDS:
        raise WireError("kind")
    ext = EXT_LENGTH if kind >= Kind.PROBE_EXT else 0
    end = _HEADER.size + length + ext
    if length == 0 or len(data) != end + MAC_LENGTH:
        raise WireError("length")
    body = bytes(data[:end])
    mac = bytes(data[end:])
    key = keyring._accepted.get(kid)
    pair_owner = ""
    if key is not None:
        if not hmac.compare_digest(_mac(key, body), mac):
            raise WireError("mac")
    else:
        candidates = keyring._peer_ids.get(kid)
        if candidates is None:
            peer_kind = kind >= Kind.PEER_QUERY and keyring._peer_mode
            raise WireError("peer_key" if peer_kind else "key")
        for peer, pair in candidates:
            if hmac.compare_digest(_mac(pair, body), mac):
                pair_owner = peer
                break
        else:
            raise WireError("mac")
    try:  # Packet checks the name (session and seq fit by construction)
        node = body[_HEADER.size : end - ext].decode("ascii")
        packet = Packet(
            _KINDS[kind], node, session, seq, _FLAGS[flags], body[end - ext : end], kid, pair_owner
        )
    except ValueError:  # UnicodeDecodeError included
        raise WireError("node") from None
    if keyring._peer_signing:
        if pair_owner and (
            packet.kind.node_keyed or (packet.kind == Kind.PEER_REPLY and node != pair_owner)
        ):
            raise WireError("owner")  # a probe or reply under a pair key, or another's answer
        if not pair_owner and packet.kind == Kind.PEER_REPLY and node in keyring._peer_signing:
            raise WireError("owner")  # a peer with a pair key answers under it only
    if keyring._node_signing and packet.kind.node_keyed:
        owner = keyring._owners.get(kid)
        if owner is not None and owner != node:
            raise WireError("owner")  # another node's key
        if owner is None and keyring._required and node in keyring._node_signing:
            raise WireError("owner")  # the cluster key, for a node with a key of its own
    return packet
