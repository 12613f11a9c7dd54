"""Announce an address: gratuitous ARP (IPv4) or unsolicited neighbour advertisement (IPv6).

Schedule: `count` rounds, `interval` seconds apart (default 3 x 1.1 s). Why 1.1 s: Linux
ignores an ordinary ARP update of a neighbour entry within `locktime` (1 s by default) of
the previous one; only frames it recognises as gratuitous ARP override that (verified in
tests/e2e/test_net_kernel_facts.py). Spacing rounds just past the window means that even on
receivers that do not grant the override, one announcement lands after any competing update
(the old holder's last reply, a proxy's answer) and wins. Repetition also covers lost frames.

Per IPv4 round: one request-form and one reply-form GARP (receivers differ in which they
learn from). Per IPv6 round: one NA to ff02::1 with the Override flag.
Receivers with default settings (arp_accept=0, accept_untracked_na=0) only *update* entries
they already have; that is exactly the failover case: routers that had the old MAC.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from ipaddress import IPv4Address, IPv6Address

import structlog

from eipctl.net import frames
from eipctl.net.errors import SocketError
from eipctl.net.link import IPAddress, parse_ip
from eipctl.net.metrics import ANNOUNCEMENTS_SENT
from eipctl.net.sockets import hardware_address, icmpv6_socket, packet_socket

log = structlog.get_logger(__name__)

DEFAULT_COUNT = 3
DEFAULT_INTERVAL = 1.1


StillOurs = Callable[[], bool]
"""Asked before every round: False stops the schedule (the holder may no longer answer)."""
RoundSent = Callable[[], None]
"""Called after each round's frames are out (the controller reports Bound after the first)."""


async def _rounds(count: int, interval: float, still_ours: StillOurs | None) -> AsyncIterator[int]:
    """The rounds of a schedule, `interval` apart, while `still_ours()` holds. A process
    frozen (SIGSTOP) or starved between two rounds must not send the next one late: by then
    the address may have moved, and a stale gratuitous ARP would point clients back here."""
    for round_no in range(count):
        if round_no:
            await asyncio.sleep(interval)
        if still_ours is not None and not still_ours():
            return
        yield round_no


async def _announce_ipv4(
    ifname: str,
    ip: IPv4Address,
    count: int,
    interval: float,
    still_ours: StillOurs | None,
    *,
    on_round: RoundSent | None,
) -> int:
    """Owns one AF_PACKET socket for the whole schedule (opening one per round would cost
    an RCU grace period each time)."""
    sent = 0
    async with packet_socket(ifname) as (sock, mac):
        batch = (frames.arp_announcement(mac, ip), frames.arp_reply_announcement(mac, ip))
        async for _ in _rounds(count, interval, still_ours):
            try:
                for frame in batch:
                    sock.send(frame)
            except OSError as exc:
                raise SocketError(f"sending GARP for {ip} on {ifname}: {exc}") from exc
            ANNOUNCEMENTS_SENT.labels(family="ipv4").inc(len(batch))
            sent += len(batch)
            if on_round is not None:
                on_round()
    return sent


async def _announce_ipv6(
    ifname: str,
    ip: IPv6Address,
    count: int,
    interval: float,
    still_ours: StillOurs | None,
    *,
    on_round: RoundSent | None,
) -> int:
    """Owns one raw ICMPv6 socket, bound to the announced address, for the schedule."""
    sent = 0
    body = frames.neighbour_advertisement(ip, hardware_address(ifname))
    with icmpv6_socket(ifname, ip) as (sock, index):
        async for _ in _rounds(count, interval, still_ours):
            try:
                sock.sendto(body, (str(frames.ALL_NODES), 0, 0, index))
            except OSError as exc:
                raise SocketError(f"sending NA for {ip} on {ifname}: {exc}") from exc
            ANNOUNCEMENTS_SENT.labels(family="ipv6").inc()
            sent += 1
            if on_round is not None:
                on_round()
    return sent


async def announce(
    ifname: str,
    ip: str | IPAddress,
    /,
    *,
    count: int = DEFAULT_COUNT,
    interval: float = DEFAULT_INTERVAL,
    still_ours: StillOurs | None = None,
    on_round: RoundSent | None = None,
) -> int:
    """Announce `ip` on `ifname` `count` times, `interval` seconds apart; returns frames sent.

    The address must already be on the link (IPv6: it is bound as the source). Cancelling
    stops the remaining rounds at once; a `NetError` stops them too and propagates; so does
    `still_ours()` turning False before a round. `on_round()` runs after each round is out.
    """
    addr = parse_ip(ip)
    if count < 1 or interval < 0:
        raise ValueError("count must be >= 1 and interval >= 0")
    if isinstance(addr, IPv4Address):
        sent = await _announce_ipv4(ifname, addr, count, interval, still_ours, on_round=on_round)
    else:
        sent = await _announce_ipv6(ifname, addr, count, interval, still_ours, on_round=on_round)
    log.info("net.announced", link=ifname, ip=str(addr), frames=sent, rounds=count)
    return sent
