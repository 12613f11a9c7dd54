"""Pure builders and parsers for the frames eipctl sends and reads. Bytes in, values out.

No sockets here (those live in `announce` and `probe`), so every byte is unit-tested.
Layouts: ARP per RFC 826; announcement/probe forms per RFC 5227 §2.1 and §2.3; the ARP
reply form of a gratuitous ARP per RFC 2002 §4.6; NS/NA per RFC 4861 §4.3/§4.4; DAD per
RFC 4862 §5.4.2; the ICMPv6 checksum per RFC 4443 §2.3 and RFC 8200 §8.1.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

from eipctl.net.errors import FrameError

ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
ETH_BROADCAST = b"\xff" * 6
ETH_MIN_FRAME = 60  # without FCS; AF_PACKET does not pad short frames on every driver
ARP_REQUEST = 1
ARP_REPLY = 2
ICMPV6_NS = 135
ICMPV6_NA = 136
IPPROTO_ICMPV6 = 58
NA_FLAG_ROUTER = 0x80000000
NA_FLAG_SOLICITED = 0x40000000
NA_FLAG_OVERRIDE = 0x20000000
ALL_NODES = IPv6Address("ff02::1")
_ZERO_MAC = b"\x00" * 6
_ARP = struct.Struct("!HHBBH6s4s6s4s")
_ETH = struct.Struct("!6s6sH")
_IPV6 = struct.Struct("!IHBB16s16s")


@dataclass(frozen=True, slots=True)
class ArpPacket:
    op: int
    sender_mac: bytes
    sender_ip: IPv4Address
    target_mac: bytes
    target_ip: IPv4Address


@dataclass(frozen=True, slots=True)
class NeighbourAdvertisement:
    target: IPv6Address
    router: bool
    solicited: bool
    override: bool
    target_mac: bytes | None  # from the Target Link-Layer Address option, if present


@dataclass(frozen=True, slots=True)
class Ipv6Packet:
    source: IPv6Address
    destination: IPv6Address
    next_header: int
    hop_limit: int
    payload: bytes


def _mac(mac: bytes) -> bytes:
    if len(mac) != 6:
        raise ValueError(f"a MAC is 6 bytes, got {len(mac)}")
    return mac


def mac_to_str(mac: bytes) -> str:
    """``02:00:00:00:00:01``: the one text form of a MAC in logs, events and IpNode status."""
    return ":".join(f"{b:02x}" for b in mac)


def _ethernet(dst: bytes, src: bytes, ethertype: int, payload: bytes) -> bytes:
    frame = _ETH.pack(dst, src, ethertype) + payload
    return frame.ljust(ETH_MIN_FRAME, b"\x00")


def _arp(op: int, sha: bytes, spa: IPv4Address, tha: bytes, tpa: IPv4Address) -> bytes:
    return _ARP.pack(1, 0x0800, 6, 4, op, sha, spa.packed, tha, tpa.packed)


def arp_frame(
    op: int, sha: bytes, spa: IPv4Address, tha: bytes, tpa: IPv4Address, *, dst: bytes
) -> bytes:
    """Any IPv4-over-Ethernet ARP frame (the named builders below are the ones eipctl uses)."""
    return _ethernet(_mac(dst), _mac(sha), ETH_P_ARP, _arp(op, sha, spa, _mac(tha), tpa))


def arp_announcement(mac: bytes, ip: IPv4Address) -> bytes:
    """Gratuitous ARP, request form (RFC 5227 ARP Announcement): SPA = TPA = ip, THA zero.

    The form every Linux neighbour table accepts as an update of an existing entry.
    """
    mac = _mac(mac)
    return _ethernet(ETH_BROADCAST, mac, ETH_P_ARP, _arp(ARP_REQUEST, mac, ip, _ZERO_MAC, ip))


def arp_reply_announcement(mac: bytes, ip: IPv4Address) -> bytes:
    """Gratuitous ARP, reply form (RFC 2002 §4.6): THA = SHA, SPA = TPA, broadcast.

    Some old stacks only learn from replies; sending both forms covers them.
    """
    mac = _mac(mac)
    return _ethernet(ETH_BROADCAST, mac, ETH_P_ARP, _arp(ARP_REPLY, mac, ip, mac, ip))


def arp_probe(mac: bytes, ip: IPv4Address) -> bytes:
    """RFC 5227 ARP Probe: SPA 0.0.0.0 so no receiver updates its cache from it."""
    mac = _mac(mac)
    zero = IPv4Address(0)
    return _ethernet(ETH_BROADCAST, mac, ETH_P_ARP, _arp(ARP_REQUEST, mac, zero, _ZERO_MAC, ip))


def parse_arp(frame: bytes) -> ArpPacket:
    """Read an Ethernet frame carrying an IPv4-over-Ethernet ARP packet."""
    if len(frame) < _ETH.size + _ARP.size:
        raise FrameError(f"ARP frame too short: {len(frame)} bytes")
    _dst, _src, ethertype = _ETH.unpack_from(frame)
    if ethertype != ETH_P_ARP:
        raise FrameError(f"not ARP: ethertype 0x{ethertype:04x}")
    htype, ptype, hlen, plen, op, sha, spa, tha, tpa = _ARP.unpack_from(frame, _ETH.size)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4):
        raise FrameError("ARP packet is not IPv4 over Ethernet")
    if op not in (ARP_REQUEST, ARP_REPLY):
        raise FrameError(f"unknown ARP op {op}")
    return ArpPacket(op, sha, IPv4Address(spa), tha, IPv4Address(tpa))


def solicited_node_multicast(ip: IPv6Address) -> IPv6Address:
    """ff02::1:ffXX:XXXX from the low 24 bits (RFC 4291 §2.7.1)."""
    return IPv6Address(b"\xff\x02" + b"\x00" * 9 + b"\x01\xff" + ip.packed[13:])


def multicast_mac(ip: IPv6Address) -> bytes:
    """33:33 + the low 32 bits of an IPv6 multicast address (RFC 2464 §7)."""
    return b"\x33\x33" + ip.packed[12:]


def icmpv6_checksum(src: IPv6Address, dst: IPv6Address, body: bytes) -> int:
    """Internet checksum over the IPv6 pseudo-header and the ICMPv6 message."""
    data = src.packed + dst.packed + struct.pack("!I3xB", len(body), IPPROTO_ICMPV6) + body
    if len(data) % 2:
        data += b"\x00"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def neighbour_advertisement(target: IPv6Address, mac: bytes) -> bytes:
    """Unsolicited NA body (RFC 4861 §4.4, §7.2.6): O=1, S=0, R=0, TLLA option.

    Checksum left zero: a raw ICMPv6 socket has the kernel fill it in.
    """
    return (
        struct.pack("!BBHI", ICMPV6_NA, 0, 0, NA_FLAG_OVERRIDE)
        + target.packed
        + struct.pack("!BB", 2, 1)
        + _mac(mac)
    )


def neighbour_solicitation_dad_frame(mac: bytes, target: IPv6Address) -> bytes:
    """A complete Ethernet frame: DAD NS from :: to the target's solicited-node group.

    RFC 4862 §5.4.2: source unspecified, no Source Link-Layer Address option, hop limit 255.
    Built whole (checksum included) because a raw ICMPv6 socket will not send from ::.
    """
    src = IPv6Address(0)
    dst = solicited_node_multicast(target)
    body = struct.pack("!BBHI", ICMPV6_NS, 0, 0, 0) + target.packed
    body = body[:2] + struct.pack("!H", icmpv6_checksum(src, dst, body)) + body[4:]
    header = _IPV6.pack(6 << 28, len(body), IPPROTO_ICMPV6, 255, src.packed, dst.packed)
    return _ethernet(multicast_mac(dst), _mac(mac), ETH_P_IPV6, header + body)


def parse_ipv6_frame(frame: bytes) -> Ipv6Packet:
    """Read an Ethernet frame carrying IPv6 (no extension headers expected for ND)."""
    if len(frame) < _ETH.size + _IPV6.size:
        raise FrameError(f"IPv6 frame too short: {len(frame)} bytes")
    _dst, _src, ethertype = _ETH.unpack_from(frame)
    if ethertype != ETH_P_IPV6:
        raise FrameError(f"not IPv6: ethertype 0x{ethertype:04x}")
    vtf, plen, nh, hlim, src, dst = _IPV6.unpack_from(frame, _ETH.size)
    if vtf >> 28 != 6:
        raise FrameError(f"IP version {vtf >> 28}, expected 6")
    start = _ETH.size + _IPV6.size
    if len(frame) < start + plen:
        raise FrameError("IPv6 payload truncated")
    return Ipv6Packet(IPv6Address(src), IPv6Address(dst), nh, hlim, frame[start : start + plen])


def parse_neighbour_advertisement(body: bytes) -> NeighbourAdvertisement:
    """Read an ICMPv6 NA message (from the ICMPv6 type byte on)."""
    if len(body) < 24:
        raise FrameError(f"NA too short: {len(body)} bytes")
    icmp_type, code, _csum, flags = struct.unpack_from("!BBHI", body)
    if icmp_type != ICMPV6_NA or code != 0:
        raise FrameError(f"not a neighbour advertisement: type {icmp_type} code {code}")
    target = IPv6Address(body[8:24])
    tlla: bytes | None = None
    pos = 24
    while pos + 2 <= len(body):
        opt_type, opt_len = body[pos], body[pos + 1]
        if opt_len == 0 or pos + opt_len * 8 > len(body):
            raise FrameError("malformed NDP option")
        if opt_type == 2 and opt_len == 1:
            tlla = body[pos + 2 : pos + 8]
        pos += opt_len * 8
    return NeighbourAdvertisement(
        target=target,
        router=bool(flags & NA_FLAG_ROUTER),
        solicited=bool(flags & NA_FLAG_SOLICITED),
        override=bool(flags & NA_FLAG_OVERRIDE),
        target_mac=tlla,
    )
