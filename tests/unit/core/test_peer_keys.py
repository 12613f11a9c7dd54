from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.peer_keys import PUBLIC_KEY_LENGTH, PeerIdentity, parse_public_key

keys = st.binary(min_size=16, max_size=64)
names = st.from_regex(r"\Anode-[a-z0-9]{1,8}\Z")


@given(key_a=keys, key_b=keys, name_a=names, name_b=names)
def test_both_ends_of_a_pair_compute_the_same_key(
    key_a: bytes, key_b: bytes, name_a: str, name_b: str
) -> None:
    if name_a == name_b:
        return
    a, b = PeerIdentity(name_a, key_a), PeerIdentity(name_b, key_b)
    assert a.pair_key(name_b, b.public_key) == b.pair_key(name_a, a.public_key)


@given(key_a=keys, key_b=keys, key_c=keys)
def test_a_third_node_computes_neither_key_of_the_other_pairs(
    key_a: bytes, key_b: bytes, key_c: bytes
) -> None:
    """What node-c can compute with what is published (its own pairs) is never a-b's key."""
    a, b, c = (
        PeerIdentity(n, k) for n, k in (("node-a", key_a), ("node-b", key_b), ("node-c", key_c))
    )
    ab = a.pair_key("node-b", b.public_key)
    assert ab not in {c.pair_key("node-a", a.public_key), c.pair_key("node-b", b.public_key)}


def test_the_pair_key_is_bound_to_the_names() -> None:
    """The same two key pairs under other names give another key: a node cannot reuse a
    public key it saw to speak as another name."""
    a, b = PeerIdentity("node-a", b"a" * 32), PeerIdentity("node-b", b"b" * 32)
    renamed = PeerIdentity("node-x", b"a" * 32)
    assert renamed.public_key == a.public_key
    assert renamed.pair_key("node-b", b.public_key) != a.pair_key("node-b", b.public_key)


def test_the_key_pair_is_the_node_keys_so_a_restart_publishes_the_same() -> None:
    assert (
        PeerIdentity("node-a", b"k" * 32).public_key == PeerIdentity("node-a", b"k" * 32).public_key
    )
    assert (
        PeerIdentity("node-a", b"k" * 32).public_key != PeerIdentity("node-a", b"j" * 32).public_key
    )


def test_public_keys_round_trip_and_garbage_is_refused() -> None:
    a = PeerIdentity("node-a", b"a" * 32)
    assert parse_public_key(a.public_text) == a.public_key
    assert len(a.public_key) == PUBLIC_KEY_LENGTH
    for bad, why in (
        ("not base64!", "not base64"),
        (base64.b64encode(b"x" * 31).decode(), "31 bytes"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_public_key(bad)


def test_no_pair_key_with_itself_a_bad_name_or_a_low_order_point() -> None:
    a = PeerIdentity("node-a", b"a" * 32)
    with pytest.raises(ValueError):
        a.pair_key("node-a", a.public_key)
    with pytest.raises(ValueError):
        a.pair_key("Node_B", a.public_key)
    with pytest.raises(ValueError):  # the all-zero point: a "secret" everyone knows
        a.pair_key("node-b", bytes(32))
    with pytest.raises(ValueError):
        PeerIdentity("Node_A", b"a" * 32)
    assert "a" * 8 not in repr(a)


class _CountingKey:
    """Wraps a private key and counts its Diffie-Hellman exchanges."""

    def __init__(self, key: X25519PrivateKey) -> None:
        self.key, self.exchanges = key, 0

    def exchange(self, peer: X25519PublicKey) -> bytes:
        self.exchanges += 1
        return self.key.exchange(peer)


def test_each_peers_pair_key_is_computed_once_not_once_per_packet() -> None:
    """The pair keys are cached for every peer, not only the last one: a node alternating
    between its peers' packets must not pay an X25519 exchange for each."""
    node = PeerIdentity("node-a", b"a" * 32)
    counting = _CountingKey(node._private)
    node._private = counting  # type: ignore[assignment]
    peers = {f"node-{n}": PeerIdentity(f"node-{n}", bytes([n]) * 32).public_key for n in range(3)}
    first = {name: node.pair_key(name, public) for name, public in peers.items()}
    again = {name: node.pair_key(name, public) for name, public in peers.items()}
    assert again == first
    assert counting.exchanges == len(peers)
