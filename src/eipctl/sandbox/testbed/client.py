"""What the upstream client sees: TCP answers, ARP answers, probe series with gaps.

All of it runs on a loop whose thread joined the client namespace, so every socket here is
the client's: TCP connects go through the client's routing and neighbour table exactly as a
router's would. ARP "who answers" probes are RFC 5227 probes (sender IP 0.0.0.0) from a
made-up MAC, so the answers never touch the client's own neighbour table (which tests watch
for the effect of gratuitous ARP).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eipctl.sandbox.testbed.loop import BackgroundLoop
from eipctl.sandbox.testbed.network import LINK
from eipctl.sandbox.testbed.responder import SERVICE_PORT

PROBE_MAC = bytes.fromhex("02e2e2000001")
ETH_P_ARP = 0x0806


@dataclass(frozen=True)
class Sample:
    ip: str
    sent: float  # time.monotonic() when the probe started
    answer: str | None  # the node name that answered, or None
    took: float
    reset: bool = False
    """Unanswered because a node reset the connection (reset, or a broken pipe: the reset
    came while the client wrote): the IP was reachable, but the connection was cut
    (opened to one holder, its next packet reached the other)."""


@dataclass
class ProbeSeries:
    """Probes fired every `interval` at each IP; `samples` fills in while it runs."""

    ips: list[str]
    interval: float
    timeout: float
    samples: list[Sample] = field(default_factory=list)
    started: float = 0.0
    stopped: float = 0.0
    _task: asyncio.Task[None] | None = None

    def of(self, ip: str) -> list[Sample]:
        return sorted((s for s in self.samples if s.ip == ip), key=lambda s: s.sent)

    def longest_gap(self, ip: str) -> float:
        """Longest time between the starts of two consecutive answered probes (window ends
        count as answered: a silent start or end is a gap too)."""
        times = [self.started] + [s.sent for s in self.of(ip) if s.answer] + [self.stopped]
        return max(b - a for a, b in itertools.pairwise(times))

    def longest_outage(self, ip: str) -> float:
        """Longest run of unanswered probes, from the last answered probe before it to the
        first answered one after it (start times). A pause of the prober itself, with no
        probe failing, is not an outage; an outage still open at the end runs to the end."""
        return self._longest_outage(ip, lambda s: True)

    def _longest_outage(self, ip: str, counts: Callable[[Sample], bool]) -> float:
        """`longest_outage`, where only the failed probes for which `counts` holds fail."""
        longest, last_ok, failing = 0.0, self.started, False
        for s in self.of(ip):
            if s.answer:
                if failing:
                    longest = max(longest, s.sent - last_ok)
                last_ok, failing = s.sent, False
            elif counts(s):
                failing = True
        if failing:
            longest = max(longest, self.stopped - last_ok)
        return longest

    def longest_probe_pause(self, ip: str) -> float:
        """Longest time between two probe starts: how well the prober kept its rhythm."""
        times = [s.sent for s in self.of(ip)]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def stalls(self, ip: str, longer_than: float = 0.1) -> list[tuple[float, float]]:
        """The prober's own pauses: (start, end) of each stretch longer than `longer_than`
        between two consecutive probe starts (the test process did not run its loop)."""
        times = [s.sent for s in self.of(ip)]
        return [(a, b) for a, b in itertools.pairwise(times) if b - a > longer_than]

    def longest_outage_outside_stalls(self, ip: str, longer_than: float = 0.1) -> float:
        """`longest_outage` without the failed probes that were in flight during one of the
        prober's pauses (`stalls`). The prober and the bed's responders run in the test
        process: when it is starved of CPU past a probe's timeout, the probes in flight fail
        though the path and the address are fine. Those probes count as neither answered nor
        failed; a failure outside any pause still counts, from the last answer before it to
        the first after it (across a pause, if one lies in between)."""
        stalls = self.stalls(ip, longer_than)

        def outside(s: Sample) -> bool:
            return not any(a < s.sent + s.took and s.sent < b for a, b in stalls)

        return self._longest_outage(ip, outside)

    def longest_loss(self, ip: str, longer_than: float = 0.1) -> float:
        """`longest_outage_outside_stalls` without the connections cut by a move (`Sample.
        reset`): what is left is time in which no node answered the IP at all. A connection
        open while an IP moves between nodes on layer 2 is cut whatever eipctl does (its
        state is on the old node); `cut` counts them."""
        stalls = self.stalls(ip, longer_than)

        def lost(s: Sample) -> bool:
            in_stall = any(a < s.sent + s.took and s.sent < b for a, b in stalls)
            return not in_stall and not s.reset

        return self._longest_outage(ip, lost)

    def cut(self, ip: str) -> int:
        """Probes whose connection a node reset (see `Sample.reset`)."""
        return sum(1 for s in self.of(ip) if s.reset)

    def answerers(self, ip: str) -> list[str]:
        """Distinct node names that answered, in the order they first did."""
        seen: list[str] = []
        for s in self.of(ip):
            if s.answer and s.answer not in seen:
                seen.append(s.answer)
        return seen

    def first_answer_after(self, ip: str, t: float, by: str | None = None) -> float | None:
        """When (sent time) the first probe after `t` was answered (by `by`, if given)."""
        for s in self.of(ip):
            if s.sent >= t and s.answer and (by is None or s.answer == by):
                return s.sent
        return None


@dataclass
class ArpWatch:
    """ARP probes for each IP every `period`; `replies` collects (time, ip, mac)."""

    ips: list[str]
    period: float
    replies: list[tuple[float, str, str]] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def macs_per_round(self, ip: str) -> list[tuple[float, set[str]]]:
        out = []
        for i, start in enumerate(self.rounds):
            end = self.rounds[i + 1] if i + 1 < len(self.rounds) else float("inf")
            macs = {m for t, a, m in self.replies if a == ip and start <= t < end}
            out.append((start, macs))
        return out

    def longest_double_answer(self, ip: str) -> float:
        """Longest stretch of consecutive rounds in which two or more MACs answered for `ip`."""
        longest, run_start = 0.0, None
        rounds = self.macs_per_round(ip)
        for i, (start, macs) in enumerate(rounds):
            if len(macs) >= 2:
                if run_start is None:
                    run_start = start
                end = rounds[i + 1][0] if i + 1 < len(rounds) else start + self.period
                longest = max(longest, end - run_start)
            else:
                run_start = None
        return longest

    def all_macs(self, ip: str) -> set[str]:
        return {m for _, a, m in self.replies if a == ip}


def _arp_probe(target: str) -> bytes:
    tpa = ipaddress.IPv4Address(target).packed
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, PROBE_MAC, b"\0" * 4, b"\0" * 6, tpa)
    return b"\xff" * 6 + PROBE_MAC + struct.pack("!H", ETH_P_ARP) + arp


def _parse_arp_reply(frame: bytes) -> tuple[str, str] | None:
    """(sender IP, sender MAC) of an ARP reply addressed to our probe MAC."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x06" or frame[0:6] != PROBE_MAC:
        return None
    op = struct.unpack("!H", frame[20:22])[0]
    if op != 2:
        return None
    return str(ipaddress.IPv4Address(frame[28:32])), frame[22:28].hex(":")


class Client:
    """The client namespace's point of view; synchronous methods for tests."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self.loop = BackgroundLoop("client", netns=netns)

    def close(self) -> None:
        self.loop.stop()

    # ---- TCP ----

    @staticmethod
    async def _ask(ip: str, seconds: float, port: int = SERVICE_PORT) -> str | None:
        return (await Client._ask_detailed(ip, seconds, port))[0]

    @staticmethod
    async def _ask_detailed(
        ip: str, seconds: float, port: int = SERVICE_PORT
    ) -> tuple[str | None, bool]:
        """(the node that answered or None, whether the connection was reset)."""
        try:
            async with asyncio.timeout(seconds):
                reader, writer = await asyncio.open_connection(ip, port)
                try:
                    line = await reader.readline()
                finally:
                    writer.close()
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
            return None, True  # a node reset it: cut, see `Sample.reset`
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            return None, False
        text = line.decode().strip()
        return text or None, False

    def ask(self, ip: str, timeout: float = 1.0) -> str | None:
        """Dial ip:8080 from the client; the name of the node that answered, or None."""
        return self.loop.run(self._ask(ip, timeout))

    def ask_all(self, ips: Iterable[str], timeout: float = 1.0) -> dict[str, str | None]:
        ips = list(ips)

        async def all_of() -> list[str | None]:
            return await asyncio.gather(*(self._ask(ip, timeout) for ip in ips))

        return dict(zip(ips, self.loop.run(all_of()), strict=True))

    def start_probes(
        self, ips: Iterable[str], interval: float = 0.02, timeout: float = 0.5
    ) -> ProbeSeries:
        """Start probing every IP every `interval` (each probe is a fresh TCP connection)."""
        series = ProbeSeries(list(ips), interval, timeout)

        async def one(ip: str) -> None:
            sent = time.monotonic()
            answer, reset = await self._ask_detailed(ip, timeout)
            series.samples.append(Sample(ip, sent, answer, time.monotonic() - sent, reset))

        async def run() -> None:
            pending: set[asyncio.Task[None]] = set()
            series.started = next_at = time.monotonic()
            try:
                while True:
                    for ip in series.ips:
                        task = asyncio.create_task(one(ip))
                        pending.add(task)
                        task.add_done_callback(pending.discard)
                    next_at += interval
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            finally:
                if pending:
                    await asyncio.wait(pending, timeout=timeout + 0.5)

        async def launch() -> None:
            series._task = asyncio.create_task(run())

        self.loop.run(launch())
        return series

    def stop_probes(self, series: ProbeSeries) -> ProbeSeries:
        async def stop() -> None:
            assert series._task is not None
            series._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await series._task
            series.stopped = time.monotonic()

        self.loop.run(stop())
        return series

    # ---- ARP ----

    def start_arp_watch(self, ips: Iterable[str], period: float = 0.05) -> ArpWatch:
        """Ask "who has IP?" every `period` and record every MAC that answers."""
        watch = ArpWatch([ip for ip in ips if ipaddress.ip_address(ip).version == 4], period)

        async def run() -> None:
            loop = asyncio.get_running_loop()
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
            sock.bind((LINK, ETH_P_ARP))
            sock.setblocking(False)

            def readable() -> None:
                while True:
                    try:
                        frame = sock.recv(2048)
                    except BlockingIOError:
                        return
                    parsed = _parse_arp_reply(frame)
                    if parsed is not None:
                        watch.replies.append((time.monotonic(), *parsed))

            loop.add_reader(sock.fileno(), readable)
            try:
                while True:
                    watch.rounds.append(time.monotonic())
                    for ip in watch.ips:
                        with contextlib.suppress(OSError):
                            sock.send(_arp_probe(ip))
                    await asyncio.sleep(period)
            finally:
                loop.remove_reader(sock.fileno())
                sock.close()

        async def launch() -> None:
            watch._task = asyncio.create_task(run())

        self.loop.run(launch())
        return watch

    def stop_arp_watch(self, watch: ArpWatch) -> ArpWatch:
        async def stop() -> None:
            assert watch._task is not None
            watch._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch._task

        self.loop.run(stop())
        return watch

    def arp_who_has(self, ip: str, listen: float = 0.2) -> set[str]:
        """Every MAC that answers one ARP probe for `ip` within `listen` seconds."""
        watch = self.start_arp_watch([ip], period=listen)
        time.sleep(listen * 1.5)
        self.stop_arp_watch(watch)
        return watch.all_macs(ip)
