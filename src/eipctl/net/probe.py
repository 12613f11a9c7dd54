"""Probe before adding: does another MAC already answer for this address?

IPv4: RFC 5227 ARP probes (sender IP 0.0.0.0, so nobody's cache changes); a holder answers
with an ARP reply. IPv6: DAD neighbour solicitations from :: (RFC 4862 §5.4.2); a holder
answers with an NA to all nodes. Any ARP/NA for the address from a MAC that is not ours is a
conflict; the first one wins and is returned.

Trade-off: the probe window sits directly on the failover path (claim placed -> probe ->
add -> announce), so every millisecond spent listening is a millisecond of outage. RFC 5227
asks for 3 probes over 1-2 s plus 2 s of listening, made for DHCP-less hosts joining a LAN.
eipctl knows from the API that the address should be free, so it probes only to catch a
mistake (an admin or a partitioned node still holding it): the default of 3 probes 100 ms
apart and 300 ms in total costs 0.3 s of failover and still survives one or two lost frames
on a healthy LAN. Hosts that answer slower than that (loaded routers, arp_ignore settings)
go undetected; raise `interval` where correctness matters more than speed.

Not a conflict: simultaneous probes from another node (no holder yet), and our own frames.
Skip probing for the `all` placement policy, where every node holds the same IP on purpose.
"""

from __future__ import annotations

import asyncio
import time
from ipaddress import IPv4Address, IPv6Address

import structlog

from eipctl.net import frames
from eipctl.net.errors import FrameError, SocketError
from eipctl.net.link import IPAddress, ProbeConflict, parse_ip
from eipctl.net.metrics import PROBE_CONFLICTS, PROBES_SENT
from eipctl.net.sockets import PACKET_OUTGOING, packet_socket

log = structlog.get_logger(__name__)

DEFAULT_PROBES = 3
DEFAULT_INTERVAL = 0.1


def conflicting_mac(frame: bytes, ip: IPAddress, own_mac: bytes) -> bytes | None:
    """The MAC claiming `ip` in `frame`, if the frame is such a claim by someone else.

    Pure, so the matching rule is unit-tested without sockets.
    """
    try:
        if isinstance(ip, IPv4Address):
            arp = frames.parse_arp(frame)
            if arp.sender_ip == ip and arp.sender_mac != own_mac:
                return arp.sender_mac
            return None
        packet = frames.parse_ipv6_frame(frame)
        if packet.next_header != frames.IPPROTO_ICMPV6 or packet.hop_limit != 255:
            return None
        if not packet.payload or packet.payload[0] != frames.ICMPV6_NA:
            return None
        na = frames.parse_neighbour_advertisement(packet.payload)
    except FrameError:
        return None
    mac = na.target_mac or frame[6:12]
    if na.target == ip and mac != own_mac:
        return mac
    return None


async def probe(
    ifname: str,
    ip: str | IPAddress,
    /,
    *,
    probes: int = DEFAULT_PROBES,
    interval: float = DEFAULT_INTERVAL,
) -> ProbeConflict | None:
    """Send `probes` probes `interval` apart and listen until `probes * interval` seconds
    after the first; return the first conflict or None. Cancellable at any point.
    """
    addr = parse_ip(ip)
    if probes < 1 or interval <= 0:
        raise ValueError("probes must be >= 1 and interval > 0")
    ethertype = frames.ETH_P_ARP if isinstance(addr, IPv4Address) else frames.ETH_P_IPV6
    family = f"ipv{addr.version}"
    loop = asyncio.get_running_loop()
    async with packet_socket(ifname, ethertype) as (sock, mac):
        if isinstance(addr, IPv4Address):
            request = frames.arp_probe(mac, addr)
        else:
            assert isinstance(addr, IPv6Address)
            request = frames.neighbour_solicitation_dad_frame(mac, addr)

        async def send_probes() -> None:
            for n in range(probes):
                if n:
                    await asyncio.sleep(interval)
                try:
                    sock.send(request)
                except OSError as exc:
                    raise SocketError(f"probing {addr} on {ifname}: {exc}") from exc
                PROBES_SENT.labels(family=family).inc()

        async def listen() -> ProbeConflict:
            while True:
                try:
                    frame, sll = await loop.sock_recvfrom(sock, 2048)
                except OSError as exc:
                    raise SocketError(f"probing {addr} on {ifname}: {exc}") from exc
                if sll[2] == PACKET_OUTGOING:
                    continue
                other = conflicting_mac(frame, addr, mac)
                if other is not None:
                    return ProbeConflict(addr, other, time.monotonic() - started)

        started = time.monotonic()
        sender = asyncio.create_task(send_probes())
        try:
            async with asyncio.timeout(probes * interval):
                conflict = await listen()
        except TimeoutError:
            conflict = None
        finally:
            sender.cancel()
            try:
                await sender
            except asyncio.CancelledError:
                if not sender.cancelled():
                    raise
    if conflict is not None:
        PROBE_CONFLICTS.labels(family=family).inc()
        log.warning(
            "net.conflict",
            link=ifname,
            ip=str(addr),
            mac=conflict.mac_str,
            after_s=round(conflict.after, 3),
        )
    return conflict
