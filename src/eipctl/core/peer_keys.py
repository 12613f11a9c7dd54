"""Peer keys: a key for each pair of controllers, which only those two can compute.

Why ([hostile], docs/liveness.md "Peer keys"): a node cut off from the control plane asks its
peers whether they hear a writing leader, and holds its addresses when more than half say
no. Under the cluster key, which every controller holds, one compromised node could answer
in every peer's name and keep a cut-off node holding while the leader moves its claims. So
each controller publishes an X25519 public key on its IpNode (spec.livenessPeerKey, which
only it may write: the own-node admission policy), and the peer packets between nodes a
and b go under ``pair_key(a, b)``: the Diffie-Hellman secret of a's private key and b's
public key (equal to b's private with a's public), bound to both names. A third node knows
neither private key, so it can answer in its own name only.

The private key is derived from the node key (`core.node_keys`; its file is kept across
restarts), so a restart publishes the same public key and no peer has to learn it again.
Pure: the X25519 arithmetic is the `cryptography` package's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from eipctl.core.liveness_wire import valid_node

__all__ = [
    "PUBLIC_KEY_LENGTH",
    "PeerIdentity",
    "parse_public_key",
]

PUBLIC_KEY_LENGTH: Final = 32
_PRIVATE_LABEL: Final = b"eipctl liveness peer x25519 v1"
_PAIR_LABEL: Final = b"eipctl liveness peer pair v1"


def parse_public_key(text: str) -> bytes:
    """The 32 bytes of a published public key (standard base64); ValueError otherwise."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("livenessPeerKey is not base64") from None
    if len(raw) != PUBLIC_KEY_LENGTH:
        raise ValueError(f"livenessPeerKey is {len(raw)} bytes, not {PUBLIC_KEY_LENGTH}")
    return raw


class PeerIdentity:
    """One node's X25519 key pair, derived from its node key; computes its pair keys."""

    __slots__ = ("_cache", "_node", "_private", "public_key")

    def __init__(self, node: str, node_key: bytes) -> None:
        if not valid_node(node):
            raise ValueError(f"node {node!r} is not an IpNode name")
        seed = hmac.digest(node_key, _PRIVATE_LABEL, "sha256")
        self._node = node
        self._private = X25519PrivateKey.from_private_bytes(seed)
        self.public_key: bytes = self._private.public_key().public_bytes_raw()
        self._cache: dict[tuple[str, bytes], bytes] = {}

    @property
    def public_text(self) -> str:
        """The public key as the IpNode publishes it."""
        return base64.b64encode(self.public_key).decode("ascii")

    def pair_key(self, peer: str, peer_public: bytes) -> bytes:
        """The key this node and ``peer`` (publishing ``peer_public``) share; the same on
        both sides. ValueError for an invalid peer name or a public key that gives no
        secret (a low-order point: anyone could compute the result)."""
        if not valid_node(peer) or peer == self._node:
            raise ValueError(f"no pair key with {peer!r}")
        cached = self._cache.get((peer, peer_public))
        if cached is not None:
            return cached
        if len(peer_public) != PUBLIC_KEY_LENGTH:
            raise ValueError(f"a public key is {PUBLIC_KEY_LENGTH} bytes")
        shared = self._private.exchange(X25519PublicKey.from_public_bytes(peer_public))
        first, second = sorted((self._node, peer))
        names = f"{first}\0{second}".encode("ascii")
        key = hmac.digest(shared, _PAIR_LABEL + b"\0" + names, "sha256")
        if len(self._cache) > 4 * 65536:  # bounded: a churning cluster must not grow it
            self._cache.clear()
        self._cache[(peer, peer_public)] = key
        return key

    def __repr__(self) -> str:  # never the private key
        digest = hashlib.sha256(self.public_key).hexdigest()[:8]
        return f"PeerIdentity(node={self._node!r}, public={digest})"
