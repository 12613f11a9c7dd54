"""The names eipctl gives the objects it writes into FRR: route-maps, prefix-lists, BFD profiles.

Apart from the renderer because a name is a contract of its own: the sections that define
an object and those that refer to it must agree, and FRR keeps the names across reloads.

A per-peer name is ``eipctl-<kind>-<peer>`` when that is a plain word of at most 63
characters, else a truncated, sanitised form with a hash suffix after ``_`` (which no
Kubernetes name contains, so the two forms never collide).

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = [
    "CONNECTED_ROUTE_MAP",
    "DENY_ALL_ROUTE_MAP",
    "MAX_FRR_NAME",
    "bfd_profile_name",
    "frr_name",
    "out_route_map_name",
    "prefix_list_name",
]

CONNECTED_ROUTE_MAP: Final = "eipctl-connected"
DENY_ALL_ROUTE_MAP: Final = "eipctl-deny-all"
MAX_FRR_NAME: Final = 63
"""FRR's BFD profile names are at most 64 characters; every name here keeps under that."""

_PLAIN: Final = re.compile(r"[a-z0-9][a-z0-9.-]*")
_UNSAFE: Final = re.compile(r"[^a-z0-9.-]")


def frr_name(prefix: str, name: str) -> str:
    """``<prefix>-<name>`` if that is a plain word of at most 63 characters, else a sanitised
    truncation with an 8-hex-digit hash of ``name`` after ``_``."""
    word = f"{prefix}-{name}"
    if _PLAIN.fullmatch(name) and len(word) <= MAX_FRR_NAME:
        return word
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    keep = MAX_FRR_NAME - len(prefix) - 2 - len(digest)
    return f"{prefix}-{_UNSAFE.sub('_', name)[:keep]}_{digest}"


def out_route_map_name(peer: str) -> str:
    return frr_name("eipctl-out", peer)


def prefix_list_name(peer: str) -> str:
    return frr_name("eipctl-pools", peer)


def bfd_profile_name(peer: str) -> str:
    return frr_name("eipctl-bfd", peer)
