"""Kernel behaviour the announce schedule relies on (docs/networking.md), checked on this kernel.

Frames are forged from namespace A with arbitrary source MACs; B's neighbour table is read
after each one. B runs the defaults: arp_accept=0, locktime=100 (1 s).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest

from eipctl.net import frames
from eipctl.net.announce import announce
from eipctl.net.sockets import packet_socket
from eipctl.sandbox.namespaces import Namespace, NamespaceSet, call_in_netns, why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

EIP = IPv4Address("198.51.100.10")
ROUTER = IPv4Address("198.51.100.1")


def mac(n: int) -> bytes:
    return bytes([2, 0, 0, 0, 0, n])


async def send(frame: bytes) -> None:
    async with packet_socket("ea0") as (sock, _mac):
        sock.send(frame)


@pytest.fixture
def bed() -> Iterator[tuple[Namespace, Namespace]]:
    with NamespaceSet() as tb:
        a, b = tb.namespace("a"), tb.namespace("b")
        tb.veth(a, "ea0", b, "eb0")
        b.ip("addr add 198.51.100.1/24 dev eb0")
        yield a, b


def entry(b: Namespace) -> str:
    return b.ip(f"neigh show {EIP} dev eb0").strip()


def deliver(a: Namespace, b: Namespace, frame: bytes) -> str:
    call_in_netns(a.name, send, frame)
    deadline = time.monotonic() + 0.2  # give the softirq time; entries never change later
    before = entry(b)
    while time.monotonic() < deadline and entry(b) == before:
        time.sleep(0.005)
    return entry(b)


def test_defaults(bed: tuple[Namespace, Namespace]) -> None:
    _, b = bed
    out = b.exec("sysctl", "-n", "net.ipv4.neigh.eb0.locktime", "net.ipv4.conf.eb0.arp_accept")
    assert out.split() == ["100", "0"]


def test_garp_does_not_create_an_entry_with_arp_accept_0(bed: tuple[Namespace, Namespace]) -> None:
    a, b = bed
    assert deliver(a, b, frames.arp_announcement(mac(1), EIP)) == ""


def test_locktime_blocks_plain_replies_but_not_garps(bed: tuple[Namespace, Namespace]) -> None:
    a, b = bed
    bmac = b.mac("eb0")
    plain_reply = frames.arp_frame(frames.ARP_REPLY, mac(3), EIP, bmac, ROUTER, dst=bmac)
    reply_tha_zero = frames.arp_frame(
        frames.ARP_REPLY, mac(4), EIP, b"\0" * 6, EIP, dst=frames.ETH_BROADCAST
    )
    b.ip(f"neigh replace {EIP} lladdr 02:00:00:00:00:99 dev eb0 nud stale")
    assert "02:00:00:00:00:01" in deliver(a, b, frames.arp_announcement(mac(1), EIP))
    # within 1 s: another GARP still wins (the kernel's is_garp override) ...
    assert "02:00:00:00:00:02" in deliver(a, b, frames.arp_announcement(mac(2), EIP))
    # ... an ordinary reply and a reply-form GARP without THA = SHA do not
    assert "02:00:00:00:00:02" in deliver(a, b, plain_reply)
    assert "02:00:00:00:00:02" in deliver(a, b, reply_tha_zero)
    assert "02:00:00:00:00:05" in deliver(a, b, frames.arp_reply_announcement(mac(5), EIP))
    time.sleep(1.1)  # past locktime: the ordinary reply is accepted now
    assert "02:00:00:00:00:03" in deliver(a, b, plain_reply)


def test_unsolicited_na_updates_but_never_creates(bed: tuple[Namespace, Namespace]) -> None:
    a, b = bed
    b.ip("addr add 2001:db8::1/64 dev eb0")
    a.ip("addr add 2001:db8::10/128 dev ea0 nodad")
    a.ip("addr add 2001:db8::11/128 dev ea0 nodad")
    b.ip("neigh replace 2001:db8::10 lladdr 02:00:00:00:00:99 dev eb0 nud stale")
    call_in_netns(a.name, announce, "ea0", "2001:db8::11", count=1)
    call_in_netns(a.name, announce, "ea0", "2001:db8::10", count=1)
    want = frames.mac_to_str(a.mac("ea0"))
    deadline = time.monotonic() + 2
    while want not in b.ip("neigh show 2001:db8::10 dev eb0"):
        assert time.monotonic() < deadline, "NA did not update the existing entry"
        time.sleep(0.005)
    assert b.ip("neigh show 2001:db8::11 dev eb0").strip() == ""
    assert b.exec("sysctl", "-n", "net.ipv6.conf.eb0.accept_untracked_na").strip() == "0"
