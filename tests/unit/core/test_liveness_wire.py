"""core/liveness_wire.py: the liveness packet, its MAC and its keys."""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from eipctl.core.liveness_wire import (
    MIN_KEY_LENGTH,
    NEVER_MS,
    WIRE_ERRORS,
    Flag,
    Keyring,
    Kind,
    Packet,
    ProbeEncoder,
    WireError,
    decode,
    encode,
    key_id,
    peer_ext,
    peer_silence_ms,
    placement_digest,
    probe_ext,
    probe_ext_fields,
)

OLD = b"old-key-0123456789abcdef"
NEW = b"new-key-0123456789abcdef"
KEYS = Keyring([OLD])
KEY_A = b"node-a-own-key-0123456789"
KEY_B = b"node-b-own-key-0123456789"
SESSION = bytes(range(8))
PROBE = Packet(Kind.PROBE, "node-a", SESSION, 7)

label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)
nodes = st.one_of(
    st.lists(label, min_size=1, max_size=4).map(".".join),
    st.just("a" * 253),
    st.just("n"),
)
flags = st.integers(0, 63).map(Flag)
plain = st.builds(
    Packet,
    kind=st.sampled_from([Kind.PROBE, Kind.REPLY]),
    node=nodes,
    session=st.binary(min_size=8, max_size=8),
    seq=st.integers(0, 2**64 - 1),
    flags=flags,
)
extended = st.builds(
    Packet,
    kind=st.sampled_from([Kind.PROBE_EXT, Kind.PEER_QUERY, Kind.PEER_REPLY]),
    node=nodes,
    session=st.binary(min_size=8, max_size=8),
    seq=st.integers(0, 2**64 - 1),
    flags=flags,
    ext=st.binary(min_size=8, max_size=8),
)
packets = st.one_of(plain, extended)


def forge(
    node: bytes,
    *,
    key: bytes = OLD,
    magic: bytes = b"EIPL",
    version: int = 1,
    kind: int = 1,
    flags: int = 0,
    length: int | None = None,
    ext: bytes = b"",
) -> bytes:
    """Bytes laid out by hand (the documented layout), MACed with ``key``."""
    kid = hashlib.sha256(key).digest()[:4]
    header = struct.pack(
        "!4sBBBB8sQ4s",
        magic,
        version,
        kind,
        flags,
        len(node) if length is None else length,
        SESSION,
        7,
        kid,
    )
    body = header + node + ext
    return body + hmac.new(key, body, hashlib.sha256).digest()[:16]


def reason(data: bytes, keyring: Keyring = KEYS) -> str:
    with pytest.raises(WireError) as caught:
        decode(data, keyring)
    return caught.value.reason


def test_the_layout_is_the_documented_one() -> None:
    assert encode(PROBE, KEYS) == forge(b"node-a")
    fenced = replace(PROBE, kind=Kind.REPLY, flags=Flag.FENCED)
    assert encode(fenced, KEYS) == forge(b"node-a", kind=2, flags=1)
    assert len(encode(PROBE, KEYS)) == 28 + len("node-a") + 16


@given(packets)
def test_round_trip(packet: Packet) -> None:
    assert decode(encode(packet, KEYS), KEYS) == packet


def test_the_extended_kinds_carry_8_bytes_more_before_the_mac() -> None:
    digest = bytes(range(1, 9))
    probe = Packet(Kind.PROBE_EXT, "node-a", SESSION, 7, Flag.STANDING | Flag.WRITER, digest)
    assert encode(probe, KEYS) == forge(b"node-a", kind=3, flags=24, ext=digest)
    assert len(encode(probe, KEYS)) == 28 + len("node-a") + 8 + 16
    query = Packet(Kind.PEER_QUERY, "node-a", SESSION, 7)
    assert query.ext == bytes(8)  # zeros when not given
    # a first-release decoder's length check refuses kind 3 as long as kind 1 (its "kind"
    # check comes first): what a plain PROBE of that length would be is refused as "length"
    assert reason(forge(b"node-a", kind=1, ext=digest)) == "length"
    assert reason(forge(b"node-a", kind=3)) == "length"


def test_ext_belongs_to_the_extended_kinds_only() -> None:
    with pytest.raises(ValueError, match="no ext"):
        Packet(Kind.PROBE, "node-a", SESSION, 7, ext=bytes(8))
    with pytest.raises(ValueError, match="8 bytes"):
        Packet(Kind.PROBE_EXT, "node-a", SESSION, 7, ext=bytes(7))


@given(nodes, st.integers(0, 2**64 - 1), flags, st.none() | st.binary(min_size=8, max_size=8))
def test_the_probe_encoder_gives_the_bytes_of_encode(
    node: str, seq: int, flag: Flag, digest: bytes | None
) -> None:
    kind = Kind.PROBE if digest is None else Kind.PROBE_EXT
    expected = encode(Packet(kind, node, SESSION, seq, flag, digest or b""), KEYS)
    assert ProbeEncoder(node, SESSION, KEYS).encode(seq, flag, digest) == expected


def test_the_probe_encoder_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="64 bits"):
        ProbeEncoder("node-a", SESSION, KEYS).encode(2**64, Flag.NONE)
    with pytest.raises(ValueError, match="8 bytes"):
        ProbeEncoder("node-a", SESSION, KEYS).encode(1, Flag.NONE, b"short")


@given(
    st.lists(st.from_regex(r"[a-z0-9-]{1,20}(\.[a-z0-9-]{1,10})?", fullmatch=True)), st.randoms()
)
def test_the_placement_digest_names_the_set(names: list[str], rnd: object) -> None:
    shuffled = list(names)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert placement_digest(shuffled + shuffled[:1]) == placement_digest(names)
    assert len(placement_digest(names)) == 6
    # one claim more (a name the strategy cannot draw: two dots) is another set
    assert placement_digest([*names, "x.y.z"]) != placement_digest(names)


@given(st.binary(min_size=6, max_size=6), st.integers(-5, 2**20))
def test_a_probe_ext_carries_the_digest_and_the_node_count_capped(
    digest: bytes, nodes: int
) -> None:
    ext = probe_ext(digest, nodes)
    assert len(ext) == 8
    assert probe_ext_fields(ext) == (digest, max(0, min(nodes, 0xFFFF)))


def test_a_probe_ext_needs_a_6_byte_digest() -> None:
    with pytest.raises(ValueError, match="6 bytes"):
        probe_ext(bytes(8), 3)


@given(st.integers(-5, 2**40))
def test_a_peer_silence_round_trips_capped(ms: int) -> None:
    assert peer_silence_ms(peer_ext(ms)) == max(0, min(ms, NEVER_MS))


@given(packets, st.data())
def test_any_single_bit_flip_is_refused(packet: Packet, data: st.DataObject) -> None:
    raw = bytearray(encode(packet, KEYS))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1), label="bit")
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(WireError):
        decode(bytes(raw), KEYS)


@given(st.binary(max_size=400))
@example(b"")
@example(forge(b"node-a")[:-1])
def test_arbitrary_bytes_give_a_packet_or_a_wire_error(data: bytes) -> None:
    try:
        decode(data, KEYS)
    except WireError as exc:
        assert exc.reason in WIRE_ERRORS


@given(packets, st.integers(0, 400), st.integers(0, 400), st.binary(max_size=40))
def test_mangled_packets_give_a_packet_or_a_wire_error(
    packet: Packet, start: int, stop: int, patch: bytes
) -> None:
    raw = encode(packet, KEYS)
    mangled = raw[:start] + patch + raw[stop:]
    try:
        decoded = decode(mangled, KEYS)
    except WireError as exc:
        assert exc.reason in WIRE_ERRORS
    else:
        assert mangled == raw and decoded == packet


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "short"),
        (forge(b"node-a")[:44], "short"),
        (b"XXXX" + forge(b"node-a")[4:], "magic"),
        (forge(b"node-a", version=2), "version"),
        (forge(b"node-a", kind=0), "kind"),
        (forge(b"node-a", kind=6), "kind"),
        (forge(b"node-a", length=5), "length"),
        (forge(b"node-a", length=7), "length"),
        (forge(b"node-a", length=0), "length"),
        (forge(b"node-a") + b"\x00", "length"),
        (forge(b"node-a", key=NEW), "key"),
        (forge(b"node-a")[:-1] + b"\x00", "mac"),
        (forge(b"Node-A"), "node"),
        (forge(b"node_a"), "node"),
        (forge(b"-node"), "node"),
        (forge(b"n\xc3\xa9"), "node"),
        (forge(b"a" * 254), "node"),
    ],
)
def test_each_refusal_has_its_reason(data: bytes, why: str) -> None:
    assert reason(data) == why


def test_every_reason_is_reachable() -> None:
    reached = {
        reason(b""),
        reason(b"XXXX" + forge(b"node-a")[4:]),
        reason(forge(b"node-a", version=2)),
        reason(forge(b"node-a", kind=6)),
        reason(forge(b"node-a", length=5)),
        reason(forge(b"node-a", key=NEW)),
        reason(forge(b"node-a")[:-1] + b"\x00"),
        reason(forge(b"Node-A")),
        reason(forge(b"node-a", kind=2), Keyring([OLD]).with_node_keys({"node-a": KEY_A})),
        reason(forge(b"node-a", kind=4, key=NEW, ext=bytes(8)), KEYS.with_peer_keys({})),
    }
    assert reached == WIRE_ERRORS


def test_unknown_flag_bits_are_ignored() -> None:
    assert decode(forge(b"node-a", flags=0xC0), KEYS).flags == Flag.NONE
    assert decode(forge(b"node-a", flags=0xC1), KEYS).flags == Flag.FENCED


def test_a_packet_signed_with_an_unknown_key_is_refused_as_key() -> None:
    assert reason(encode(PROBE, Keyring([NEW]))) == "key"


def test_a_keyring_with_new_and_old_accepts_the_old_and_signs_with_the_new() -> None:
    rotating = Keyring([NEW, OLD])
    assert decode(encode(PROBE, Keyring([OLD])), rotating) == PROBE
    signed = encode(PROBE, rotating)
    assert signed[24:28] == hashlib.sha256(NEW).digest()[:4]
    assert reason(signed, Keyring([OLD])) == "key"
    assert rotating.key_ids == (
        hashlib.sha256(NEW).digest()[:4],
        hashlib.sha256(OLD).digest()[:4],
    )


@pytest.mark.parametrize(
    "fleet",
    [
        [[OLD], [OLD, NEW]],  # step 1 rolling out: the new key added second
        [[OLD, NEW], [NEW, OLD]],  # step 2 rolling out: the order swapped
        [[NEW, OLD], [NEW]],  # step 3 rolling out: the old key removed
    ],
)
def test_every_pair_of_processes_agrees_at_every_step_of_a_rotation(
    fleet: list[list[bytes]],
) -> None:
    for sender in fleet:
        for receiver in fleet:
            assert decode(encode(PROBE, Keyring(sender)), Keyring(receiver)) == PROBE


def test_short_keys_are_refused_naming_the_rule() -> None:
    with pytest.raises(ValueError, match=f"at least {MIN_KEY_LENGTH} bytes"):
        Keyring([OLD, b"x" * (MIN_KEY_LENGTH - 1)])
    Keyring([b"x" * MIN_KEY_LENGTH])
    with pytest.raises(ValueError, match="at least one key"):
        Keyring([])


def test_from_text_reads_one_key_per_non_empty_line() -> None:
    text = f"\n  {NEW.decode()}  \n\n\t{OLD.decode()}\n"
    assert Keyring.from_text(text).key_ids == Keyring([NEW, OLD]).key_ids
    assert Keyring.from_text("é" * 8).key_ids == Keyring(["é".encode() * 8]).key_ids  # UTF-8
    with pytest.raises(ValueError, match="at least 16 bytes"):
        Keyring.from_text("short\n")
    with pytest.raises(ValueError, match="at least one key"):
        Keyring.from_text(" \n\n")


def test_the_same_key_twice_counts_once() -> None:
    assert Keyring([OLD, OLD]).key_ids == Keyring([OLD]).key_ids


def test_a_keyring_never_shows_its_keys() -> None:
    shown = repr(Keyring([NEW, OLD]))
    assert "key" in shown and NEW.decode() not in shown and OLD.decode() not in shown


@pytest.mark.parametrize(
    "fields",
    [
        {"node": ""},
        {"node": "Node-A"},
        {"node": "a" * 254},
        {"node": "node-é"},
        {"session": b"1234567"},
        {"session": b"123456789"},
        {"seq": -1},
        {"seq": 2**64},
    ],
)
def test_a_packet_refuses_what_it_cannot_carry(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        replace(PROBE, **fields)  # type: ignore[arg-type]


# -- node keys ([hostile]: no node answers for another) -------------------------------------

SCHEDULERS = KEYS.with_node_keys({"node-a": KEY_A, "node-b": KEY_B})


def test_node_keyed_kinds_go_under_the_nodes_own_key_peer_kinds_under_the_cluster_key() -> None:
    kid_a = hashlib.sha256(KEY_A).digest()[:4]
    reply = Packet(Kind.REPLY, "node-a", SESSION, 7, Flag.FENCED)
    assert encode(reply, SCHEDULERS)[24:28] == kid_a
    assert decode(encode(reply, SCHEDULERS), SCHEDULERS) == reply
    assert decode(encode(reply, SCHEDULERS), SCHEDULERS).key_id == kid_a
    probe = ProbeEncoder("node-a", SESSION, SCHEDULERS).encode(7, Flag.STANDING)
    assert probe[24:28] == kid_a
    query = Packet(Kind.PEER_QUERY, "node-a", SESSION, 7)
    assert encode(query, SCHEDULERS)[24:28] == KEYS.key_ids[0]
    assert decode(encode(query, KEYS), SCHEDULERS) == query  # peers: the cluster key
    unkeyed = Packet(Kind.REPLY, "node-c", SESSION, 7)
    assert encode(unkeyed, SCHEDULERS)[24:28] == KEYS.key_ids[0]
    assert decode(encode(unkeyed, KEYS), SCHEDULERS) == unkeyed


def test_no_node_answers_for_another_though_it_holds_the_cluster_key() -> None:
    """The forgery of the issue: node-b, holding the cluster key and its own, forges a
    FENCED reply (a live neighbour declared dead) and a plain one (a dead one kept alive)
    for node-a. Both are refused; node-a's own reply is not."""
    node_b = KEYS.with_node_keys({"node-b": KEY_B}, required=False)  # what node-b holds
    for flags in (Flag.FENCED, Flag.NONE):
        forged = Packet(Kind.REPLY, "node-a", SESSION, 7, flags)
        assert reason(encode(forged, node_b), SCHEDULERS) == "owner"  # under the cluster key
        assert reason(encode(forged, node_b, key_id=node_b.node_key_ids[0]), SCHEDULERS) == (
            "owner"  # under node-b's own key
        )
    node_a = KEYS.with_node_keys({"node-a": KEY_A}, required=False)
    genuine = Packet(Kind.REPLY, "node-a", SESSION, 7, Flag.FENCED)
    assert decode(encode(genuine, node_a), SCHEDULERS) == genuine


def test_a_controller_takes_probes_under_its_key_or_the_cluster_key_and_answers_in_kind() -> None:
    """Its own keyring is not `required`: a scheduler that has not read its key yet probes
    under the cluster key, and the reply goes back under the key the probe came under."""
    node_a = KEYS.with_node_keys({"node-a": KEY_A}, required=False)
    for signer in (KEYS, SCHEDULERS):
        probe = decode(ProbeEncoder("node-a", SESSION, signer).encode(7, Flag.STANDING), node_a)
        reply = Packet(Kind.REPLY, "node-a", SESSION, 7)
        assert decode(encode(reply, node_a, key_id=probe.key_id), signer) == reply
    # another node's key is no key of node-a's: refused before the MAC is even checked
    assert (
        reason(
            ProbeEncoder("node-a", SESSION, KEYS.with_node_keys({"node-a": KEY_B})).encode(
                7, Flag.NONE
            ),
            node_a,
        )
        == "key"
    )


@given(
    signer=st.sampled_from(["cluster", "node-a", "node-b"]),
    about=st.sampled_from(["node-a", "node-b", "node-c"]),
    kind=st.sampled_from(list(Kind)),
)
def test_a_scheduler_accepts_a_node_keyed_packet_only_under_that_nodes_key(
    signer: str, about: str, kind: Kind
) -> None:
    """Independent oracle: the rule in words. Node-keyed kinds about a keyed node: its key
    only; about an unkeyed node, or any peer kind: the cluster key (or the node's own)."""
    own = {"node-a": KEY_A, "node-b": KEY_B}
    key = OLD if signer == "cluster" else own[signer]
    ext = bytes(8) if kind.extended else b""
    data = forge(about.encode(), key=key, kind=int(kind), ext=ext)
    keyed = about in own
    if kind in (Kind.PROBE, Kind.REPLY, Kind.PROBE_EXT):
        ok = signer == about if keyed else signer == "cluster"
    else:
        ok = True  # a peer kind: the owner rule does not apply, every key of the ring goes
    if ok:
        assert decode(data, SCHEDULERS).node == about
    else:
        assert reason(data, SCHEDULERS) == "owner"


def test_node_keys_are_checked_like_keys() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        KEYS.with_node_keys({"node-a": b"short"})
    with pytest.raises(ValueError, match="not an IpNode name"):
        KEYS.with_node_keys({"Node_A": KEY_A})
    with pytest.raises(ValueError, match="key id of another key"):
        KEYS.with_node_keys({"node-a": OLD})
    assert SCHEDULERS.node_keyed == {"node-a", "node-b"}
    assert SCHEDULERS.key_ids == KEYS.key_ids  # node keys are no cluster keys
    assert "node-a" not in repr(SCHEDULERS) and KEY_A.hex() not in repr(SCHEDULERS)
    again = SCHEDULERS.with_node_keys({"node-b": KEY_B})  # replaces, does not add up
    assert again.node_keyed == {"node-b"}


# --- pair keys (core.peer_keys): peer packets between two nodes that both publish a key ---
PAIR_AB = b"pair-key-of-node-a-and-node-b-01"  # what PeerIdentity.pair_key gives both ends
PAIR_AC = b"pair-key-of-node-a-and-node-c-01"
ON_A = KEYS.with_node_keys({"node-a": KEY_A}, required=False).with_peer_keys(
    {"node-b": PAIR_AB, "node-c": PAIR_AC}
)
ON_B = KEYS.with_node_keys({"node-b": KEY_B}, required=False).with_peer_keys({"node-a": PAIR_AB})


def test_a_query_goes_under_the_pair_key_and_its_answer_comes_back_under_it() -> None:
    query = Packet(Kind.PEER_QUERY, "node-b", SESSION, 7)
    sent = encode(query, ON_A)
    assert sent[24:28] == hashlib.sha256(PAIR_AB).digest()[:4]
    got = decode(sent, ON_B)
    assert got == query and got.key_owner == "node-a"  # node-b knows who asked
    answer = Packet(Kind.PEER_REPLY, "node-b", SESSION, 7, ext=bytes(8))
    back = decode(encode(answer, ON_B, key_id=got.key_id, key_owner=got.key_owner), ON_A)
    assert back == answer and back.key_owner == "node-b"


def test_no_node_answers_a_peer_query_in_another_peers_name() -> None:
    """[hostile] (a): node-c, a peer of node-a holding the cluster key and its own pair key
    with node-a, forges node-b's answer. Under the cluster key: refused, node-b has a pair
    key with node-a; under node-c's pair key: refused, that key speaks for node-c only."""
    forged = Packet(Kind.PEER_REPLY, "node-b", SESSION, 7, ext=bytes(8))
    on_c = KEYS.with_peer_keys({"node-a": PAIR_AC})
    assert reason(encode(forged, KEYS), ON_A) == "owner"
    kid_ac = hashlib.sha256(PAIR_AC).digest()[:4]
    assert reason(encode(forged, on_c, key_id=kid_ac, key_owner="node-a"), ON_A) == "owner"
    own = Packet(Kind.PEER_REPLY, "node-c", SESSION, 7, ext=bytes(8))
    assert decode(encode(own, on_c, key_id=kid_ac, key_owner="node-a"), ON_A).node == "node-c"


def test_a_peer_without_a_pair_key_still_answers_under_the_cluster_key() -> None:
    """A peer of an older release (no published key) is asked and answers as before."""
    old = Packet(Kind.PEER_REPLY, "node-d", SESSION, 7, ext=bytes(8))
    assert encode(Packet(Kind.PEER_QUERY, "node-d", SESSION, 7), ON_A)[24:28] == KEYS.key_ids[0]
    assert decode(encode(old, KEYS), ON_A) == old


def test_probes_and_replies_are_never_taken_under_a_pair_key() -> None:
    for kind in (Kind.PROBE, Kind.REPLY, Kind.PROBE_EXT):
        ext = bytes(8) if kind.extended else b""
        assert reason(forge(b"node-a", key=PAIR_AB, kind=int(kind), ext=ext), ON_B) == "owner"


def test_an_unknown_key_id_on_a_peer_kind_is_peer_key_only_for_a_pair_key_speaker() -> None:
    query = forge(b"node-b", key=NEW, kind=int(Kind.PEER_QUERY), ext=bytes(8))
    assert reason(query, ON_B) == "peer_key"  # a peer that knows us not yet: relist
    assert reason(query, KEYS) == "key"
    assert reason(forge(b"node-b", key=NEW), ON_B) == "key"  # a probe: plain refusal
    assert ON_B.speaks_pair_keys and not KEYS.speaks_pair_keys
    assert KEYS.with_peer_keys({}).speaks_pair_keys


def test_colliding_pair_key_ids_are_each_tried() -> None:
    """Key ids are 4 bytes: among thousands of peers two may share one."""
    ring = KEYS.with_peer_keys({"node-b": PAIR_AB, "node-c": PAIR_AC})
    kid_b = hashlib.sha256(PAIR_AB).digest()[:4]
    ring._peer_ids = {kid_b: (("node-b", PAIR_AB), ("node-c", PAIR_AC))}  # forced collision
    from_c = Packet(Kind.PEER_REPLY, "node-c", SESSION, 7, ext=bytes(8))
    data = bytearray(encode(from_c, KEYS.with_peer_keys({"node-a": PAIR_AC})))
    data[24:28] = kid_b  # the same key, shown under the colliding id: MAC recomputed
    body = bytes(data[:-16])
    data[-16:] = hmac.new(PAIR_AC, body, hashlib.sha256).digest()[:16]
    assert decode(bytes(data), ring).key_owner == "node-c"


def test_pair_keys_are_checked_like_keys() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        KEYS.with_peer_keys({"node-b": b"short"})
    with pytest.raises(ValueError, match="not an IpNode name"):
        KEYS.with_peer_keys({"Node_B": PAIR_AB})
    assert ON_A.peer_keyed == {"node-b", "node-c"}
    assert ON_A.node_keyed == {"node-a"} and ON_A.key_ids == KEYS.key_ids
    assert PAIR_AB.hex() not in repr(ON_A)


def test_cluster_key_names_the_cluster_keys_only() -> None:
    """Not a node's own key (bound to its node), not a key id this keyring does not hold."""
    ring = Keyring([OLD, NEW]).with_node_keys({"node-a": KEY_A})
    assert ring.cluster_key(key_id(OLD)) and ring.cluster_key(key_id(NEW))
    assert not ring.cluster_key(key_id(KEY_A))
    assert not ring.cluster_key(key_id(KEY_B))


def test_a_packet_naming_no_node_is_refused_for_its_length() -> None:
    """Long enough only thanks to its extension, well MACed: still no node, refused as
    malformed before its name is read."""
    assert reason(forge(b"", kind=Kind.PROBE_EXT, ext=bytes(8))) == "length"


def test_a_reply_from_another_node_is_no_reply_to_this_encoders_probes() -> None:
    """Same session, same key, a seq in range, a name of the same length: still another
    node's sign of life, not this one's."""
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    own = encode(Packet(Kind.REPLY, "node-a", SESSION, 8), KEYS)
    assert encoder.reply(own, 7, 9) == (8, Flag(0))
    other = encode(Packet(Kind.REPLY, "node-b", SESSION, 8), KEYS)
    assert encoder.reply(other, 7, 9) is None


def test_only_a_pair_keyed_peers_answers_are_bound_to_its_pair_key() -> None:
    """node-b has a pair key with node-a, yet its query under the cluster key (it has not
    read node-a's key yet) is taken: only its PEER_REPLY must come under the pair key."""
    query = Packet(Kind.PEER_QUERY, "node-b", SESSION, 7)
    assert decode(encode(query, KEYS), ON_A) == query
    answer = Packet(Kind.PEER_REPLY, "node-b", SESSION, 7, ext=bytes(8))
    assert reason(encode(answer, KEYS), ON_A) == "owner"
