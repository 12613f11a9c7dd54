"""The pure conflict-matching rule of the prober (sockets are covered in tests/e2e)."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv6Address

from eipctl.net import frames
from eipctl.net.probe import conflicting_mac

OURS = bytes.fromhex("020000000001")
THEIRS = bytes.fromhex("020000000002")
V4 = IPv4Address("203.0.113.5")
V6 = IPv6Address("2001:db8::5")


def na_frame(src_mac: bytes, target: IPv6Address, tlla: bytes | None, hop: int = 255) -> bytes:
    body = frames.neighbour_advertisement(target, tlla or src_mac)
    if tlla is None:
        body = body[:24]
    header = struct.pack("!IHBB", 6 << 28, len(body), 58, hop)
    header += IPv6Address("fe80::2").packed + frames.ALL_NODES.packed
    return b"\x33\x33\x00\x00\x00\x01" + src_mac + b"\x86\xdd" + header + body


def test_arp_reply_from_holder_is_conflict() -> None:
    assert conflicting_mac(frames.arp_reply_announcement(THEIRS, V4), V4, OURS) == THEIRS


def test_own_frames_and_other_ips_and_probes_are_not() -> None:
    assert conflicting_mac(frames.arp_reply_announcement(OURS, V4), V4, OURS) is None
    other = IPv4Address("203.0.113.6")
    assert conflicting_mac(frames.arp_announcement(THEIRS, other), V4, OURS) is None
    assert conflicting_mac(frames.arp_probe(THEIRS, V4), V4, OURS) is None  # no holder yet


def test_garbage_is_ignored() -> None:
    assert conflicting_mac(b"\x00" * 10, V4, OURS) is None
    assert conflicting_mac(b"\x00" * 10, V6, OURS) is None


def test_na_from_holder_is_conflict_using_tlla_or_source_mac() -> None:
    assert conflicting_mac(na_frame(THEIRS, V6, THEIRS), V6, OURS) == THEIRS
    assert conflicting_mac(na_frame(THEIRS, V6, None), V6, OURS) == THEIRS


def test_na_rules() -> None:
    assert conflicting_mac(na_frame(THEIRS, V6, THEIRS, hop=64), V6, OURS) is None  # off-link
    assert conflicting_mac(na_frame(OURS, V6, OURS), V6, OURS) is None
    assert conflicting_mac(na_frame(THEIRS, IPv6Address("2001:db8::6"), THEIRS), V6, OURS) is None
    dad = frames.neighbour_solicitation_dad_frame(THEIRS, V6)
    assert conflicting_mac(dad, V6, OURS) is None
