"""Classic BPF programs that drop, in the kernel, the liveness datagrams a socket would refuse.

Why: every datagram that reaches Python costs a wake-up and a decode before it is refused, so
a flood of garbage at 60-100k packets/s, which any pod can send, starved the responder and the
prober until their replies were late and live nodes were declared dead ([hostile]). A socket
filter (``SO_ATTACH_FILTER``) runs in the kernel on each datagram before it is queued; what it
drops costs no wake-up at all.

What each program admits is a subset of what `liveness_wire.decode` and the role's own checks
accept, judged on the fixed header only (the MAC still needs the key, in Python):

- both: magic, version, a key id in force, a length that matches the header's node length
  and the kind (``ext`` for the extended kinds);
- the responder: kinds PROBE, PROBE_EXT and PEER_QUERY addressed to its own node (length and
  name compared), and PEER_REPLY echoing its querier's session (from any node: the querier
  checks the rest); sources on the deny list (`core.flood.FloodGuard`) are dropped first, a
  trusted one except from the UDP source ports it is trusted from.
  Once it holds pair keys (`core.peer_keys`: one per peer, more than a filter can list) the
  peer kinds pass under any key id, probes still only under the keys in force;
- the prober: kind REPLY echoing its own session (8 random bytes that only its probes carry,
  so a flood that did not see them is dropped whatever else it gets right).

One datagram in ``2**sample_shift`` that fails those checks is let through anyway
(``ld rand``), so Python still counts refusals by reason (scaled back up by `sample_weight`)
and logs them: a wrong key or a wrong node name stays visible to an operator.

Programs are lists of `Insn`; the socket edge (`net.liveness.sockets`) packs and attaches
them. Offsets are as the kernel runs a UDP socket's filter: 0 is the UDP header, so the
payload starts at 8, ``len`` counts the header too, and the IP header is reached through
``SKF_NET_OFF``.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from eipctl.core.liveness_wire import (
    EXT_LENGTH,
    KEY_ID_LENGTH,
    MAC_LENGTH,
    MAGIC,
    SESSION_LENGTH,
    VERSION,
    Kind,
)

__all__ = [
    "MAX_DENIED",
    "MAX_KEYS",
    "SAMPLE_SHIFT",
    "Insn",
    "prober_filter",
    "responder_filter",
    "sample_weight",
]

UDP_HEADER: Final = 8
HEADER: Final = 28
"""The liveness header before the node name (`liveness_wire._HEADER`)."""
MAX_NAME: Final = 253
SAMPLE_SHIFT: Final = 6
"""One refused datagram in 64 reaches Python to be counted and logged."""
MAX_KEYS: Final = 8
MAX_DENIED: Final = 16
"""Sources a responder drops in the kernel at once (`core.flood.FloodGuard` keeps the list)."""
MAX_ALLOWED_PORTS: Final = 4
"""Ports a denied source is still admitted from (a trusted sender's: `core.flood`)."""

# classic BPF opcodes (linux/filter.h)
LD_W_ABS: Final = 0x20
LD_B_ABS: Final = 0x30
LD_H_ABS: Final = 0x28
LD_W_LEN: Final = 0x80
LDX_W_LEN: Final = 0x81
ALU_ADD_K: Final = 0x04
ALU_AND_K: Final = 0x54
JMP_JA: Final = 0x05
JMP_JEQ_K: Final = 0x15
JMP_JGE_K: Final = 0x35
JMP_JEQ_X: Final = 0x1D
RET_K: Final = 0x06
SKF_AD_RANDOM: Final = 0xFFFFF000 + 56
SKF_NET_OFF: Final = 0xFFF00000
KEEP: Final = 0xFFFFFFFF
"""A return value: keep the whole datagram."""

_OFF_MAGIC: Final = UDP_HEADER
_OFF_VERSION: Final = UDP_HEADER + 4
_OFF_KIND: Final = UDP_HEADER + 5
_OFF_NAME_LENGTH: Final = UDP_HEADER + 7
_OFF_SESSION: Final = UDP_HEADER + 8
_OFF_KEY_ID: Final = UDP_HEADER + 24
_OFF_NAME: Final = UDP_HEADER + HEADER
_FIXED: Final = UDP_HEADER + HEADER + MAC_LENGTH
"""Bytes of a datagram besides its node name and ext (as ``len`` counts them)."""


@dataclass(frozen=True, slots=True)
class Insn:
    """One classic BPF instruction (``struct sock_filter``)."""

    code: int
    jt: int = 0
    jf: int = 0
    k: int = 0

    def pack(self) -> bytes:
        return struct.pack("HBBI", self.code, self.jt, self.jf, self.k)


@dataclass(frozen=True, slots=True)
class _Jump:
    """A conditional jump to labels, resolved by `_assemble` (None: the next instruction)."""

    code: int
    k: int
    true: str | None
    false: str | None


@dataclass(frozen=True, slots=True)
class _Goto:
    """An unconditional jump to a label (``ja``, whose offset is 32 bits)."""

    label: str


_Op = Insn | _Jump | _Goto | str  # a str is a label


def _assemble(ops: Sequence[_Op]) -> list[Insn]:
    """Resolve labels into forward jump offsets (classic BPF jumps only forward, <= 255)."""
    where: dict[str, int] = {}
    count = 0
    for op in ops:
        if isinstance(op, str):
            if op in where:
                raise ValueError(f"label {op} twice")
            where[op] = count
        else:
            count += 1
    program: list[Insn] = []
    for op in ops:
        if isinstance(op, str):
            continue
        if isinstance(op, Insn):
            program.append(op)
            continue
        here = len(program)
        if isinstance(op, _Goto):
            program.append(Insn(JMP_JA, k=where[op.label] - here - 1))
            continue

        def offset(label: str | None, at: int = here) -> int:
            if label is None:
                return 0
            distance = where[label] - at - 1
            if not 0 <= distance <= 255:
                raise ValueError(f"jump to {label} is {distance} instructions: out of range")
            return distance

        program.append(Insn(op.code, offset(op.true), offset(op.false), op.k))
    return program


def _word(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4].ljust(4, b"\0"), "big")


def _bytes_equal(offset: int, data: bytes, miss: str) -> list[_Op]:
    """Compare ``data`` with the datagram at ``offset``, a word (then a byte) at a time."""
    ops: list[_Op] = []
    whole = len(data) - len(data) % 4
    for at in range(0, whole, 4):
        ops += [Insn(LD_W_ABS, k=offset + at), _Jump(JMP_JEQ_K, _word(data, at), None, miss)]
    for at in range(whole, len(data)):
        ops += [Insn(LD_B_ABS, k=offset + at), _Jump(JMP_JEQ_K, data[at], None, miss)]
    return ops


def _header(key_ids: Sequence[bytes] | None, miss: str) -> list[_Op]:
    """At least the shortest packet (so a short one is refused, and sampled, before a load
    past its end drops it unseen), magic, version and a key id in force (any key id for
    None: a scheduler that holds one key per node)."""
    if key_ids is not None and not key_ids:
        raise ValueError("a liveness filter needs at least one key id")
    if key_ids is not None and len(key_ids) > MAX_KEYS:
        raise ValueError(f"a liveness filter takes at most {MAX_KEYS} key ids")
    ops: list[_Op] = [
        Insn(LD_W_LEN),
        _Jump(JMP_JGE_K, _FIXED + 1, None, miss),
        Insn(LD_W_ABS, k=_OFF_MAGIC),
        _Jump(JMP_JEQ_K, _word(MAGIC, 0), None, miss),
        Insn(LD_B_ABS, k=_OFF_VERSION),
        _Jump(JMP_JEQ_K, VERSION, None, miss),
    ]
    if key_ids is None:
        return ops
    return ops + _key_in(key_ids, miss, "key_ok")


def _key_in(key_ids: Sequence[bytes], miss: str, label: str) -> list[_Op]:
    """The header's key id is one of ``key_ids`` (``label``: this check's own exit)."""
    if len(key_ids) > MAX_KEYS:
        raise ValueError(f"a liveness filter takes at most {MAX_KEYS} key ids")
    ops: list[_Op] = [Insn(LD_W_ABS, k=_OFF_KEY_ID)]
    for kid in key_ids[:-1]:
        ops.append(_Jump(JMP_JEQ_K, _key(kid), label, None))
    return [*ops, _Jump(JMP_JEQ_K, _key(key_ids[-1]), None, miss), label]


def _key(kid: bytes) -> int:
    if len(kid) != KEY_ID_LENGTH:
        raise ValueError(f"a key id is {KEY_ID_LENGTH} bytes")
    return _word(kid, 0)


def _length_matches(extra: int, accept: str, miss: str) -> list[_Op]:
    """``len`` == the fixed part + the header's node length + ``extra`` (the ext)."""
    return [
        Insn(LDX_W_LEN),
        Insn(LD_B_ABS, k=_OFF_NAME_LENGTH),
        _Jump(JMP_JGE_K, 1, None, miss),
        Insn(ALU_ADD_K, k=_FIXED + extra),
        _Jump(JMP_JEQ_X, 0, accept, miss),
    ]


def _ending() -> list[_Op]:
    """The shared exits: keep, or a refusal sampled one in 2**SAMPLE_SHIFT."""
    return [
        "refuse",
        Insn(LD_W_ABS, k=SKF_AD_RANDOM),
        Insn(ALU_AND_K, k=(1 << SAMPLE_SHIFT) - 1),
        _Jump(JMP_JEQ_K, 0, "accept", "drop"),
        "accept",
        Insn(RET_K, k=KEEP),
        "drop",
        Insn(RET_K, k=0),
    ]


def _deny(sources: Iterable[str] | Mapping[str, Collection[int]]) -> list[_Op]:
    """Drop (not sampled) datagrams from ``sources``: the flood guard has judged them. A
    mapping gives each source the UDP source ports it is still admitted from (a trusted
    sender's, whose address a flood forges: `core.flood`)."""
    given = sources if isinstance(sources, Mapping) else dict.fromkeys(sources, ())
    denied: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, frozenset[int]] = {}
    for source, ports in given.items():
        address = ipaddress.ip_address(source.partition("%")[0])
        denied[address] = denied.get(address, frozenset()) | frozenset(ports)
    if len(denied) > MAX_DENIED:
        raise ValueError(f"a liveness filter denies at most {MAX_DENIED} sources")
    ops: list[_Op] = []
    for n, address in enumerate(sorted(denied, key=str)):
        raw, ports = address.packed, sorted(denied[address])
        if len(ports) > MAX_ALLOWED_PORTS:
            raise ValueError(f"a denied source keeps at most {MAX_ALLOWED_PORTS} ports")
        offset = 12 if address.version == 4 else 8  # the source in an IPv4 / IPv6 header
        ops += _net_equal(SKF_NET_OFF + offset, raw, f"deny_next_{n}")
        if ports:
            ops.append(Insn(LD_H_ABS, k=0))  # the UDP source port
            ops += [_Jump(JMP_JEQ_K, port, f"deny_next_{n}", None) for port in ports]
        ops += [Insn(RET_K, k=0), f"deny_next_{n}"]
    return ops


def _net_equal(offset: int, raw: bytes, miss: str) -> list[_Op]:
    return [
        op
        for at in range(0, len(raw), 4)
        for op in (Insn(LD_W_ABS, k=offset + at), _Jump(JMP_JEQ_K, _word(raw, at), None, miss))
    ]


def responder_filter(
    node: str,
    key_ids: Sequence[bytes],
    *,
    denied: Iterable[str] | Mapping[str, Collection[int]] = (),
    peers_any_key: bool = False,
    querier_session: bytes | None = None,
) -> list[Insn]:
    """The program for a controller's responder socket (see the module docstring).
    ``peers_any_key``: PEER_QUERY and PEER_REPLY pass under any key id (a controller that
    holds a pair key per peer, `core.peer_keys`, more than a filter can list), probes still
    under ``key_ids`` only. ``querier_session``: a PEER_REPLY must echo it (the session of
    this node's `PeerQuerier`, which only its queries carry)."""
    name = node.encode("ascii")
    if not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"node name {node!r} does not fit a liveness packet")
    if querier_session is not None and len(querier_session) != SESSION_LENGTH:
        raise ValueError(f"a session is {SESSION_LENGTH} bytes")
    if not key_ids:
        raise ValueError("a liveness filter needs at least one key id")
    own = _FIXED + len(name)
    probe_keys = _key_in(key_ids, "refuse", "plain_key") if peers_any_key else []
    ops: list[_Op] = [
        *_deny(denied),
        *_header(None if peers_any_key else key_ids, "refuse"),
        Insn(LD_B_ABS, k=_OFF_KIND),
        _Jump(JMP_JEQ_K, Kind.PEER_REPLY, "peer_reply", None),
        _Jump(JMP_JEQ_K, Kind.PROBE, "plain", None),
        _Jump(JMP_JEQ_K, Kind.PROBE_EXT, "extended", None),
        _Jump(JMP_JEQ_K, Kind.PEER_QUERY, "query", "refuse"),
        "plain",
        *probe_keys,
        Insn(LD_W_LEN),
        _Jump(JMP_JEQ_K, own, "ours", "refuse"),
        "extended",
        *(_key_in(key_ids, "refuse", "extended_key") if peers_any_key else []),
        "query",
        Insn(LD_W_LEN),
        _Jump(JMP_JEQ_K, own + EXT_LENGTH, "ours", "refuse"),
        "ours",
        Insn(LD_B_ABS, k=_OFF_NAME_LENGTH),
        _Jump(JMP_JEQ_K, len(name), None, "refuse"),
        *_bytes_equal(_OFF_NAME, name[:32], "refuse"),  # the MAC covers the rest
        _Goto("accept"),
        "peer_reply",
        *([] if querier_session is None else _bytes_equal(_OFF_SESSION, querier_session, "refuse")),
        *_length_matches(EXT_LENGTH, "accept", "refuse"),
        *_ending(),
    ]
    return _assemble(ops)


def prober_filter(
    session: bytes,
    key_ids: Sequence[bytes] | None,
    *,
    denied: Iterable[str] | Mapping[str, Collection[int]] = (),
) -> list[Insn]:
    """The program for a scheduler replica's prober socket (see the module docstring).
    ``key_ids`` None: any key id (a replica holding node keys, one per node, which no
    filter of `MAX_KEYS` can list; the session, which only its probes carry, still has
    to match)."""
    if len(session) != SESSION_LENGTH:
        raise ValueError(f"a session is {SESSION_LENGTH} bytes")
    ops: list[_Op] = [
        *_deny(denied),
        *_header(key_ids, "refuse"),
        Insn(LD_B_ABS, k=_OFF_KIND),
        _Jump(JMP_JEQ_K, Kind.REPLY, None, "refuse"),
        *_bytes_equal(_OFF_SESSION, session, "refuse"),
        *_length_matches(0, "accept", "refuse"),
        *_ending(),
    ]
    return _assemble(ops)


def sample_weight(filtered: bool) -> int:
    """How many refusals one that reached Python stands for: a socket with the filter sees
    one in ``2**SAMPLE_SHIFT`` of those the filter checks for."""
    return 1 << SAMPLE_SHIFT if filtered else 1
