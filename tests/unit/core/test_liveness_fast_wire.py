"""The prober's per-datagram wire path: `MacKey` is HMAC-SHA256, `ProbeEncoder.sign` gives the
bytes of `encode`, and `ProbeEncoder.reply` accepts exactly the replies that `decode` accepts
for its node, session, key and seq window (it refuses the rest, which the prober then decodes
in full for the reason)."""

from __future__ import annotations

import hmac
import os

from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.liveness_mac import MacKey
from eipctl.core.liveness_wire import (
    Flag,
    Keyring,
    Kind,
    Packet,
    ProbeEncoder,
    decode,
    encode,
    probe_head,
)

KEY = b"cluster-key-0123456789"
KEY_A = b"node-a-own-key-0123456789"
KEYS = Keyring([KEY])
NODE_KEYS = KEYS.with_node_keys({"node-a": KEY_A})
SESSION = bytes(range(8))
flags = st.integers(0, 255).map(Flag)


@given(st.binary(min_size=0, max_size=200), st.binary(max_size=300))
def test_a_mac_key_gives_the_hmac_of_its_key(key: bytes, message: bytes) -> None:
    assert MacKey(key).digest(message) == hmac.digest(key, message, "sha256")


@given(st.integers(0, 2**64 - 1), st.integers(0, 63), st.none() | st.binary(min_size=8, max_size=8))
def test_a_signed_probe_is_the_encoded_probe(seq: int, bits: int, ext: bytes | None) -> None:
    for keyring in (KEYS, NODE_KEYS):
        encoder = ProbeEncoder("node-a", SESSION, keyring)
        signed = encoder.sign(
            probe_head(bits, extended=ext is not None), seq.to_bytes(8, "big"), ext or b""
        )
        assert signed == encoder.encode(seq, Flag(bits), ext)
        kind = Kind.PROBE if ext is None else Kind.PROBE_EXT
        assert signed == encode(
            Packet(kind, "node-a", SESSION, seq, Flag(bits), ext or b""), keyring
        )


def reply(seq: int, flag: Flag = Flag.NONE, keyring: Keyring = KEYS, **changes: object) -> bytes:
    fields: dict[str, object] = {"node": "node-a", "session": SESSION, "seq": seq, "flags": flag}
    fields.update(changes)
    return encode(Packet(Kind.REPLY, **fields), keyring)  # type: ignore[arg-type]


@given(st.integers(1, 2**64 - 1), flags)
def test_a_fresh_reply_is_read_with_its_flags(seq: int, flag: Flag) -> None:
    for keyring in (KEYS, NODE_KEYS):
        datagram = reply(seq, flag, keyring)
        decoded = decode(datagram, keyring)
        got = ProbeEncoder("node-a", SESSION, keyring).reply(datagram, 0, seq)
        assert got == (decoded.seq, decoded.flags) == (seq, flag & Flag(63))


def test_a_reply_outside_the_window_is_left_to_decode() -> None:
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    assert encoder.reply(reply(10), 9, 10) == (10, Flag.NONE)
    assert encoder.reply(reply(10), 10, 12) is None  # replayed, or older than accepted
    assert encoder.reply(reply(10), 2, 9) is None  # a seq not sent yet


def test_only_a_reply_for_its_node_session_and_key_is_read() -> None:
    encoder = ProbeEncoder("node-a", SESSION, NODE_KEYS)
    assert encoder.reply(reply(5, keyring=NODE_KEYS), 0, 9) == (5, Flag.NONE)
    assert encoder.reply(reply(5), 0, 9) is None  # the cluster key, not node-a's own
    assert encoder.reply(reply(5, keyring=NODE_KEYS, node="node-b"), 0, 9) is None
    assert encoder.reply(reply(5, keyring=NODE_KEYS, session=bytes(8)), 0, 9) is None
    probe = encode(Packet(Kind.PROBE, "node-a", SESSION, 5), NODE_KEYS)
    assert encoder.reply(probe, 0, 9) is None  # not a reply
    other = Keyring([b"another-key-0123456789"]).with_node_keys({"node-a": KEY_A})
    assert encoder.reply(reply(5, keyring=other), 0, 9) == (5, Flag.NONE)  # the same key
    assert ProbeEncoder("node-a", SESSION, KEYS).reply(reply(5, keyring=NODE_KEYS), 0, 9) is None


@given(st.data())
def test_any_damage_to_a_reply_makes_it_unread(data: st.DataObject) -> None:
    good = reply(7, Flag.EXTENDED)
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    at = data.draw(st.integers(0, len(good) - 1))
    bad = bytearray(good)
    bad[at] ^= data.draw(st.integers(1, 255))
    assert encoder.reply(bytes(bad), 0, 2**64 - 1) is None
    assert encoder.reply(good[:at] + good[at + 1 :], 0, 2**64 - 1) is None
    assert encoder.reply(good + os.urandom(data.draw(st.integers(1, 4))), 0, 2**64 - 1) is None
