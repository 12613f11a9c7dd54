"""Frame builders against byte layouts written out by hand from the RFCs."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv6Address

import pytest

from eipctl.net import frames
from eipctl.net.errors import FrameError

MAC = bytes.fromhex("021122334455")
V4 = IPv4Address("192.0.2.7")
V6 = IPv6Address("2001:db8::7")
PAD = "00" * 18  # 42-byte ARP frame padded to the 60-byte Ethernet minimum


def hexjoin(*parts: str) -> bytes:
    return bytes.fromhex("".join(p.replace(" ", "") for p in parts))


def test_arp_announcement_request_form() -> None:
    assert frames.arp_announcement(MAC, V4) == hexjoin(
        "ffffffffffff 021122334455 0806",  # broadcast, our MAC, ARP
        "0001 0800 06 04 0001",  # Ethernet/IPv4, request
        "021122334455 c0000207",  # SHA, SPA = the IP
        "000000000000 c0000207",  # THA zero, TPA = the IP (RFC 5227 §2.3)
        PAD,
    )


def test_arp_announcement_reply_form_has_tha_equal_sha() -> None:
    assert frames.arp_reply_announcement(MAC, V4) == hexjoin(
        "ffffffffffff 021122334455 0806",
        "0001 0800 06 04 0002",
        "021122334455 c0000207",
        "021122334455 c0000207",  # RFC 2002 §4.6: THA = SHA
        PAD,
    )


def test_arp_probe_has_zero_sender_ip() -> None:
    assert frames.arp_probe(MAC, V4) == hexjoin(
        "ffffffffffff 021122334455 0806",
        "0001 0800 06 04 0001",
        "021122334455 00000000",  # SPA 0.0.0.0 (RFC 5227 §2.1.1)
        "000000000000 c0000207",
        PAD,
    )


def test_frames_are_padded_to_ethernet_minimum() -> None:
    for build in (frames.arp_announcement, frames.arp_reply_announcement, frames.arp_probe):
        assert len(build(MAC, V4)) == 60


def test_unsolicited_na_body() -> None:
    assert frames.neighbour_advertisement(V6, MAC) == hexjoin(
        "88 00 0000",  # type 136, code 0, checksum left to the kernel
        "20000000",  # R=0 S=0 O=1
        "20010db8000000000000000000000007",  # target
        "02 01 021122334455",  # Target Link-Layer Address option, 1 x 8 octets
    )


def test_solicited_node_multicast_and_mac() -> None:
    ip = IPv6Address("2001:db8::aabb:ccdd")
    assert frames.solicited_node_multicast(ip) == IPv6Address("ff02::1:ffbb:ccdd")
    assert frames.multicast_mac(frames.solicited_node_multicast(ip)) == hexjoin("3333ffbbccdd")


def test_dad_neighbour_solicitation_frame() -> None:
    frame = frames.neighbour_solicitation_dad_frame(MAC, V6)
    assert frame == hexjoin(
        "3333ff000007 021122334455 86dd",  # to the solicited-node group's MAC
        "60000000 0018 3a ff",  # v6, payload 24, ICMPv6, hop limit 255
        "00000000000000000000000000000000",  # source :: (DAD)
        "ff0200000000000000000001ff000007",  # ff02::1:ff00:7
        "87 00 4ce1 00000000",  # NS, checksum (hand-summed, see below), reserved
        "20010db8000000000000000000000007",  # target, and no SLLA option (RFC 4862)
    )


def test_checksum_verifies_to_all_ones() -> None:
    """RFC 1071: summing a message that includes its checksum gives 0xffff."""
    frame = frames.neighbour_solicitation_dad_frame(MAC, V6)
    pkt = frames.parse_ipv6_frame(frame)
    data = pkt.source.packed + pkt.destination.packed
    data += struct.pack("!I3xB", len(pkt.payload), 58) + pkt.payload
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    assert total == 0xFFFF


def test_parse_arp_roundtrip() -> None:
    arp = frames.parse_arp(frames.arp_reply_announcement(MAC, V4))
    assert arp == frames.ArpPacket(frames.ARP_REPLY, MAC, V4, MAC, V4)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\xff" * 12 + b"\x08\x00" + b"\x00" * 46, "not ARP"),
        (frames.arp_probe(MAC, V4)[:14] + b"\x00\x06" + frames.arp_probe(MAC, V4)[16:], "not IPv4"),
        (frames.arp_probe(MAC, V4)[:20] + b"\x00\x09" + frames.arp_probe(MAC, V4)[22:], "op 9"),
    ],
)
def test_parse_arp_rejects_garbage(data: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        frames.parse_arp(data)


def test_parse_na_roundtrip_and_flags() -> None:
    body = bytearray(frames.neighbour_advertisement(V6, MAC))
    body[4] |= 0xC0  # set R and S as well
    na = frames.parse_neighbour_advertisement(bytes(body))
    assert na == frames.NeighbourAdvertisement(V6, True, True, True, MAC)


def test_parse_na_without_option() -> None:
    na = frames.parse_neighbour_advertisement(frames.neighbour_advertisement(V6, MAC)[:24])
    assert na.target_mac is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x88\x00", "too short"),
        (b"\x87" + b"\x00" * 23, "not a neighbour advertisement"),
        (frames.neighbour_advertisement(V6, MAC)[:25] + b"\x00" * 7, "malformed"),
        (frames.neighbour_advertisement(V6, MAC)[:24] + b"\x02\x05" + b"\x00" * 6, "malformed"),
    ],
)
def test_parse_na_rejects_garbage(data: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        frames.parse_neighbour_advertisement(data)


def test_parse_ipv6_frame_rejects_garbage() -> None:
    frame = frames.neighbour_solicitation_dad_frame(MAC, V6)
    with pytest.raises(FrameError, match="too short"):
        frames.parse_ipv6_frame(frame[:30])
    with pytest.raises(FrameError, match="not IPv6"):
        frames.parse_ipv6_frame(frames.arp_probe(MAC, V4))
    with pytest.raises(FrameError, match="version 4"):
        frames.parse_ipv6_frame(frame[:14] + b"\x40" + frame[15:])
    with pytest.raises(FrameError, match="truncated"):
        frames.parse_ipv6_frame(frame[:-4])


def test_bad_mac_length_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="6 bytes"):
        frames.arp_probe(b"\x01\x02", V4)
