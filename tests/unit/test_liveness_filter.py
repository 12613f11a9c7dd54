"""core/liveness_filter.py: the kernel filters admit what the Python checks accept and drop
what they refuse on the header alone, judged by a reference interpreter of classic BPF (the
real kernel runs them in tests/unit/net/test_liveness_filter_kernel.py)."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eipctl.core import liveness_filter as lf
from eipctl.core.liveness_wire import (
    Flag,
    Keyring,
    Kind,
    Packet,
    WireError,
    decode,
    encode,
)

KEYS = Keyring([b"liveness-filter-key-0123456789"])
OLD = Keyring([b"liveness-filter-old-0123456789"])
BOTH = Keyring([b"liveness-filter-key-0123456789", b"liveness-filter-old-0123456789"])
STRANGER = Keyring([b"liveness-filter-stranger-012345"])
SESSION = bytes(range(8))
UDP = b"\x12\x34\x23\x11\x00\x00\x00\x00"  # ports, length, checksum: the filter reads none
V4_SOURCE = "198.51.100.7"


def ip_header(source: str = V4_SOURCE) -> bytes:
    address = ipaddress.ip_address(source)
    if address.version == 4:
        return b"\x45" + bytes(11) + address.packed + bytes(4)
    return b"\x60" + bytes(7) + address.packed + bytes(16)


def run(
    program: Sequence[lf.Insn],
    payload: bytes,
    *,
    source: str = V4_SOURCE,
    rand: int = 1,
    udp: bytes = UDP,
) -> int:
    """What the kernel returns for ``payload`` arriving from ``source`` (0: dropped)."""
    packet, net = udp + payload, ip_header(source)
    a = x = 0
    pc = 0
    while True:
        insn = program[pc]
        pc += 1
        code, k = insn.code, insn.k
        if code in (lf.LD_W_ABS, lf.LD_H_ABS, lf.LD_B_ABS):
            size = {lf.LD_W_ABS: 4, lf.LD_H_ABS: 2, lf.LD_B_ABS: 1}[code]
            if k == lf.SKF_AD_RANDOM:
                a = rand
                continue
            data, at = (net, k - lf.SKF_NET_OFF) if k >= lf.SKF_NET_OFF else (packet, k)
            if at + size > len(data):
                return 0  # a load past the end drops the packet
            a = int.from_bytes(data[at : at + size], "big")
        elif code == lf.LD_W_LEN:
            a = len(packet)
        elif code == lf.LDX_W_LEN:
            x = len(packet)
        elif code == lf.ALU_ADD_K:
            a = (a + k) & 0xFFFFFFFF
        elif code == lf.ALU_AND_K:
            a &= k
        elif code == lf.JMP_JA:
            pc += k
        elif code in (lf.JMP_JEQ_K, lf.JMP_JGE_K, lf.JMP_JEQ_X):
            taken = {
                lf.JMP_JEQ_K: a == k,
                lf.JMP_JGE_K: a >= k,
                lf.JMP_JEQ_X: a == x,
            }[code]
            pc += insn.jt if taken else insn.jf
        elif code == lf.RET_K:
            return k
        else:
            raise AssertionError(f"opcode {code:#x} is not one the interpreter knows")


def responder(node: str = "node-a", **kwargs: object) -> list[lf.Insn]:
    return lf.responder_filter(node, KEYS.key_ids, **kwargs)  # type: ignore[arg-type]


def prober() -> list[lf.Insn]:
    return lf.prober_filter(SESSION, KEYS.key_ids)


names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True)
seqs = st.integers(0, 2**64 - 1)
exts = st.binary(min_size=8, max_size=8)


@given(node=names, seq=seqs, ext=exts, flags=st.integers(0, 255))
def test_every_probe_and_peer_query_for_the_node_is_admitted(
    node: str, seq: int, ext: bytes, flags: int
) -> None:
    program = responder(node)
    for kind, extension in ((Kind.PROBE, b""), (Kind.PROBE_EXT, ext), (Kind.PEER_QUERY, ext)):
        packet = Packet(kind, node, SESSION, seq, Flag(flags & 63), extension)
        assert run(program, encode(packet, KEYS)) == lf.KEEP


@given(node=names, other=names, seq=seqs, ext=exts)
def test_peer_replies_from_any_node_are_admitted_and_probes_for_another_are_not(
    node: str, other: str, seq: int, ext: bytes
) -> None:
    program = responder(node)
    reply = Packet(Kind.PEER_REPLY, other, SESSION, seq, Flag.NONE, ext)
    assert run(program, encode(reply, KEYS)) == lf.KEEP
    probe = encode(Packet(Kind.PROBE, other, SESSION, seq), KEYS)
    assert run(program, probe) == (lf.KEEP if other == node else 0)


def test_the_responder_drops_replies_strangers_truncated_and_oversized_datagrams() -> None:
    program = responder()
    probe = encode(Packet(Kind.PROBE, "node-a", SESSION, 7), KEYS)
    refused = {
        "a reply": encode(Packet(Kind.REPLY, "node-a", SESSION, 7), KEYS),
        "a stranger's key": encode(Packet(Kind.PROBE, "node-a", SESSION, 7), STRANGER),
        "truncated": probe[:-1],
        "one byte more": probe + b"\0",
        "no MAC": probe[:-16],
        "a name longer by one": encode(Packet(Kind.PROBE, "node-aa", SESSION, 7), KEYS),
        "garbage": b"\xff" * 64,
        "empty": b"",
        "oversized": probe + bytes(400),
        "version 2": probe[:4] + b"\x02" + probe[5:],
        "kind 6": probe[:5] + b"\x06" + probe[6:],
    }
    for what, datagram in refused.items():
        assert run(program, datagram) == 0, what
    assert run(program, probe) == lf.KEEP


def test_a_wrong_mac_under_a_key_in_force_passes_the_filter_for_python_to_refuse() -> None:
    probe = bytearray(encode(Packet(Kind.PROBE, "node-a", SESSION, 7), KEYS))
    probe[-1] ^= 1
    assert run(responder(), bytes(probe)) == lf.KEEP
    with pytest.raises(WireError, match="mac"):
        decode(bytes(probe), KEYS)


def test_every_key_in_force_is_admitted_during_a_rotation() -> None:
    program = lf.responder_filter("node-a", BOTH.key_ids)
    for keys in (KEYS, OLD):
        assert run(program, encode(Packet(Kind.PROBE, "node-a", SESSION, 1), keys)) == lf.KEEP
    assert run(responder(), encode(Packet(Kind.PROBE, "node-a", SESSION, 1), OLD)) == 0


@given(seq=seqs, node=names)
def test_the_prober_admits_only_replies_in_its_own_session(seq: int, node: str) -> None:
    program = prober()
    reply = Packet(Kind.REPLY, node, SESSION, seq, Flag.FENCED)
    assert run(program, encode(reply, KEYS)) == lf.KEEP
    other = Packet(Kind.REPLY, node, bytes(8), seq)
    assert run(program, encode(other, KEYS)) == 0
    probe = Packet(Kind.PROBE, node, SESSION, seq)
    assert run(program, encode(probe, KEYS)) == 0


@settings(max_examples=300)
@given(data=st.binary(max_size=320))
def test_what_the_filters_admit_passes_every_header_check_of_decode(data: bytes) -> None:
    header_reasons = {"short", "magic", "version", "kind", "length", "key"}
    for program in (responder(), prober()):
        if run(program, data) == 0:
            continue
        try:
            decode(data, KEYS)
        except WireError as exc:
            assert exc.reason not in header_reasons


@given(data=st.binary(max_size=80))
def test_refusals_are_sampled_one_in_sample_weight(data: bytes) -> None:
    # any length: one shorter than the shortest packet is refused, and sampled, too
    """``ld rand`` & (2**SAMPLE_SHIFT - 1) == 0 lets a refused datagram through."""
    for program in (responder(), prober()):
        if run(program, data, rand=1) == 0:
            assert run(program, data, rand=0) == lf.KEEP
            assert run(program, data, rand=1 << lf.SAMPLE_SHIFT) == lf.KEEP
    assert lf.sample_weight(True) == 1 << lf.SAMPLE_SHIFT
    assert lf.sample_weight(False) == 1


@pytest.mark.parametrize("denied", ["198.51.100.7", "2001:db8::7"])
def test_a_denied_source_is_dropped_unsampled_and_others_are_not(denied: str) -> None:
    program = responder(denied=[denied, "203.0.113.9"])
    probe = encode(Packet(Kind.PROBE, "node-a", SESSION, 7), KEYS)
    assert run(program, probe, source=denied, rand=0) == 0
    neighbour = "198.51.100.8" if ":" not in denied else "2001:db8::8"
    assert run(program, probe, source=neighbour) == lf.KEEP


def test_limits_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="key ids"):
        lf.responder_filter("node-a", [bytes(4)] * (lf.MAX_KEYS + 1))
    with pytest.raises(ValueError, match="at least one key"):
        lf.responder_filter("node-a", [])
    many = [f"198.51.100.{n}" for n in range(lf.MAX_DENIED + 1)]
    with pytest.raises(ValueError, match="denies at most"):
        lf.responder_filter("node-a", KEYS.key_ids, denied=many)
    with pytest.raises(ValueError, match="session"):
        lf.prober_filter(b"short", KEYS.key_ids)


def test_the_longest_programs_assemble_and_pack() -> None:
    """The most keys, the most denied IPv6 sources and the longest name still fit the
    forward jumps of classic BPF."""
    keys = [struct.pack("!I", n) for n in range(lf.MAX_KEYS)]
    denied = [f"2001:db8::{n:x}" for n in range(lf.MAX_DENIED)]
    program = lf.responder_filter("n" * 253, keys, denied=denied)
    assert all(len(insn.pack()) == 8 for insn in program)
    assert len(program) < 4096


PAIR = Keyring([b"a-pair-key-of-node-a-and-node-b"])  # a key id the filter cannot list


@given(node=names, seq=seqs, ext=exts)
def test_with_pair_keys_peer_kinds_pass_any_key_id_and_probes_only_the_keys_in_force(
    node: str, seq: int, ext: bytes
) -> None:
    program = responder(node, peers_any_key=True, querier_session=SESSION)
    query = Packet(Kind.PEER_QUERY, node, bytes(8), seq, Flag.NONE, ext)
    answer = Packet(Kind.PEER_REPLY, "node-z", SESSION, seq, Flag.NONE, ext)
    for packet in (query, answer):
        assert run(program, encode(packet, PAIR)) == lf.KEEP  # Python tries the pair keys
        assert run(program, encode(packet, KEYS)) == lf.KEEP
    for kind, extension in ((Kind.PROBE, b""), (Kind.PROBE_EXT, ext)):
        probe = Packet(kind, node, SESSION, seq, Flag.NONE, extension)
        assert run(program, encode(probe, KEYS)) == lf.KEEP
        assert run(program, encode(probe, PAIR), rand=1) == 0  # no probe under a pair key
    for_another = Packet(Kind.PEER_QUERY, node + "x", bytes(8), seq, Flag.NONE, ext)
    assert run(program, encode(for_another, PAIR), rand=1) == 0


@given(session=st.binary(min_size=8, max_size=8), seq=seqs, ext=exts)
def test_peer_answers_must_echo_the_queriers_session(session: bytes, seq: int, ext: bytes) -> None:
    program = responder(querier_session=SESSION)
    answer = Packet(Kind.PEER_REPLY, "node-b", session, seq, Flag.NONE, ext)
    assert run(program, encode(answer, KEYS), rand=1) == (lf.KEEP if session == SESSION else 0)


@pytest.mark.parametrize("denied", ["198.51.100.7", "2001:db8::7"])
def test_a_denied_trusted_source_still_passes_from_its_trusted_ports(denied: str) -> None:
    """The UDP source port is the first 2 bytes of what the filter sees (UDP above)."""
    program = responder(denied={denied: {0x1234, 4000}})
    probe = encode(Packet(Kind.PROBE, "node-a", SESSION, 7), KEYS)
    assert run(program, probe, source=denied) == lf.KEEP  # UDP's source port: 0x1234
    forged = UDP_FROM_5555 + probe
    assert run_raw(program, forged, source=denied) == 0
    with pytest.raises(ValueError, match="ports"):
        responder(denied={denied: set(range(lf.MAX_ALLOWED_PORTS + 1))})


UDP_FROM_5555 = b"\x15\xb3" + UDP[2:]


def run_raw(program: Sequence[lf.Insn], packet: bytes, *, source: str) -> int:
    """`run` for a datagram whose UDP header is given (``packet`` starts with it)."""
    return run(program, packet[len(UDP) :], source=source, udp=packet[: len(UDP)])
