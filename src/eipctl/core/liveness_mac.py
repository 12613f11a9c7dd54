"""`MacKey`: HMAC-SHA256 under one key, with the key's pads hashed once.

A prober MACs 20,000 small datagrams a second at 1,000 nodes (every probe it sends, every
reply it reads), under a handful of keys. `hmac.digest` sets the key up on every call
(OpenSSL looks the digest up and hashes both padded keys: ~2 µs a message); `MacKey` hashes
the padded keys once and copies the two hash states per message (RFC 2104, as `hmac.HMAC`
does without OpenSSL's HMAC): the same bytes in ~0.8 µs.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["MacKey"]

BLOCK: Final = 64
"""SHA-256's block size: the key is padded (or first hashed) to it."""
_INNER: Final = bytes(b ^ 0x36 for b in range(256))
_OUTER: Final = bytes(b ^ 0x5C for b in range(256))


class MacKey:
    """``digest(message)`` is ``hmac.digest(key, message, "sha256")``."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > BLOCK:
            key = hashlib.sha256(key).digest()
        padded = bytes(key).ljust(BLOCK, b"\0")
        self._inner = hashlib.sha256(padded.translate(_INNER))
        self._outer = hashlib.sha256(padded.translate(_OUTER))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()
