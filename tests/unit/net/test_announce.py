"""Announce schedule and cancellation, with the socket-owning senders replaced."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import pytest

from eipctl.net import announce as announce_mod
from eipctl.net import frames
from eipctl.net.announce import announce
from eipctl.net.probe import probe


class FakeSocket:
    def __init__(self, log: list[tuple[bytes, float]]) -> None:
        self.log = log

    def send(self, frame: bytes) -> int:
        self.log.append((frame, asyncio.get_running_loop().time()))
        return len(frame)

    def sendto(self, body: bytes, address: object) -> int:
        return self.send(body)


MAC = b"\x02\x00\x00\x00\x00\x01"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bytes, float]]:
    """Replace the socket owners: frames are recorded with their send time (the loop's
    clock: virtual under ``run_virtual``)."""
    log: list[tuple[bytes, float]] = []

    @contextlib.asynccontextmanager
    async def packet_socket(ifname: str) -> AsyncIterator[tuple[FakeSocket, bytes]]:
        yield FakeSocket(log), MAC

    @contextlib.contextmanager
    def icmpv6_socket(ifname: str, source: IPv6Address) -> Iterator[tuple[FakeSocket, int]]:
        yield FakeSocket(log), 7

    monkeypatch.setattr(announce_mod, "packet_socket", packet_socket)
    monkeypatch.setattr(announce_mod, "icmpv6_socket", icmpv6_socket)
    monkeypatch.setattr(announce_mod, "hardware_address", lambda ifname: MAC)
    return log


def test_ipv4_rounds_send_both_forms_spaced(
    sent: list[tuple[bytes, float]], run_virtual: Callable[[Coroutine[Any, Any, int]], int]
) -> None:
    """On a virtual clock (tests/virtual_clock.py): rounds exactly ``interval`` apart."""
    assert run_virtual(announce("eth0", "192.0.2.1", count=3, interval=0.05)) == 6
    assert [f for f, _ in sent] == [
        frames.arp_announcement(MAC, IPv4Address("192.0.2.1")),
        frames.arp_reply_announcement(MAC, IPv4Address("192.0.2.1")),
    ] * 3
    assert [t for _, t in sent[1::2]] == [t for _, t in sent[::2]]  # both forms at once
    rounds = [t for _, t in sent[::2]]
    assert [b - a for a, b in itertools.pairwise(rounds)] == pytest.approx([0.05, 0.05])


async def test_ipv6_sends_na(sent: list[tuple[bytes, float]]) -> None:
    assert await announce("eth0", "2001:db8::1", count=2, interval=0) == 2
    body = frames.neighbour_advertisement(IPv6Address("2001:db8::1"), MAC)
    assert [f for f, _ in sent] == [body, body]


async def test_cancel_stops_remaining_rounds(sent: list[tuple[bytes, float]]) -> None:
    task = asyncio.create_task(announce("eth0", "192.0.2.1", count=5, interval=10))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(sent) == 2  # the first round's two frames


@pytest.mark.parametrize(("ip", "per_round"), [("192.0.2.1", 2), ("2001:db8::1", 1)])
async def test_a_round_is_sent_only_while_the_address_is_still_ours(
    sent: list[tuple[bytes, float]], ip: str, per_round: int
) -> None:
    """A process frozen between two rounds (SIGSTOP, a starved loop) wakes up after the
    address may have moved: the round it owes is dropped once `still_ours()` says no."""
    asked: list[int] = []

    def still_ours() -> bool:
        asked.append(len(sent))
        return len(asked) <= 2  # yes for the first two rounds, then no

    assert await announce("eth0", ip, count=4, interval=0, still_ours=still_ours) == 2 * per_round
    assert len(sent) == 2 * per_round
    assert asked == [0, per_round, 2 * per_round]  # asked before each round, stops at once
    assert await announce("eth0", ip, count=2, interval=0, still_ours=lambda: False) == 0
    assert len(sent) == 2 * per_round


@pytest.mark.parametrize(("count", "interval"), [(0, 1.0), (1, -1.0)])
async def test_announce_rejects_bad_schedule(count: int, interval: float) -> None:
    with pytest.raises(ValueError, match="count"):
        await announce("eth0", "192.0.2.1", count=count, interval=interval)


@pytest.mark.parametrize(("probes", "interval"), [(0, 0.1), (1, 0.0)])
async def test_probe_rejects_bad_schedule(probes: int, interval: float) -> None:
    with pytest.raises(ValueError, match="probes"):
        await probe("eth0", "192.0.2.1", probes=probes, interval=interval)


async def test_bad_address_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="does not appear"):
        await announce("eth0", "not-an-ip")
