"""net/liveness.py over real UDP on loopback: who answers, which replies count, and once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from eipctl.core import liveness_filter
from eipctl.core.liveness_wire import (
    NEVER_MS,
    Flag,
    Keyring,
    Kind,
    Packet,
    ProbeEncoder,
    decode,
    encode,
    peer_ext,
    peer_silence_ms,
    placement_digest,
    probe_ext,
    probe_ext_fields,
)
from eipctl.core.outage import OutageVerdict, outage_verdict
from eipctl.metrics import REGISTRY
from eipctl.net.liveness import (
    CHUNK,
    LivenessProber,
    LivenessResponder,
    PeerQuerier,
    read_keyring,
)
from eipctl.net.liveness.sockets import DatagramSocket

KEYS = Keyring([b"liveness-test-key-0123456789"])
OTHER_KEYS = Keyring([b"some-other-key-0123456789"])
INTERVAL = 0.02
WAIT = 5.0  # generous: conditions are polled, never timed


def rejected(role: str, reason: str) -> float:
    labels = {"role": role, "reason": reason}
    return REGISTRY.get_sample_value("eipctl_liveness_packets_rejected_total", labels) or 0.0


async def eventually(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.005)


class Replies:
    def __init__(self) -> None:
        self.got: list[tuple[str, Flag]] = []

    def __call__(self, node: str, flags: Flag) -> None:
        self.got.append((node, flags))


@pytest_asyncio.fixture
async def responder() -> AsyncIterator[Callable[..., LivenessResponder]]:
    """Builds responders (not started); closes them afterwards."""
    made: list[LivenessResponder] = []

    def make(
        node: str = "node-a", keys: Keyring = KEYS, flags: Flag = Flag.NONE
    ) -> LivenessResponder:
        made.append(LivenessResponder(node, keys, flags=lambda: flags))
        return made[-1]

    yield make
    for each in made:
        each.close()
        await each.wait_closed()


@pytest_asyncio.fixture
async def prober() -> AsyncIterator[Callable[..., tuple[LivenessProber, Replies]]]:
    """Builds probers already running; stops and closes them afterwards."""
    made: list[tuple[LivenessProber, asyncio.Task[None]]] = []

    def make(
        keys: Keyring = KEYS,
        window: int = 8,
        on_reply: Callable[[str, Flag], None] | None = None,
        **callables: Any,
    ) -> tuple[LivenessProber, Replies]:
        """``callables``: `LivenessProber`'s ``standing``, ``digest`` and ``nodes``."""
        replies = Replies()
        prober = LivenessProber(
            keys, interval=INTERVAL, on_reply=on_reply or replies, window=window, **callables
        )
        made.append((prober, asyncio.create_task(prober.run())))
        return prober, replies

    yield make
    for prober, task in made:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        prober.close()
        await prober.wait_closed()


@pytest.fixture
def python_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No kernel filter: every datagram reaches the Python checks (what they refuse, and why,
    is what these tests read; test_liveness_filter_kernel.py tests the filter itself)."""
    monkeypatch.setattr(DatagramSocket, "attach", lambda self, program: False)


@pytest.fixture
def fake_node() -> Iterator[socket.socket]:
    """A raw UDP socket on loopback standing in for a node's responder."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        yield sock


async def next_probe(sock: socket.socket) -> tuple[Packet, tuple[str, int]]:
    async with asyncio.timeout(WAIT):
        data, source = await asyncio.get_running_loop().sock_recvfrom(sock, 2048)
    return decode(data, KEYS), source


def drain(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            sock.recv(2048)
        except BlockingIOError:
            return count
        count += 1


def port_of(sock: socket.socket) -> int:
    port: int = sock.getsockname()[1]
    return port


async def test_a_responder_answers_a_prober(responder, prober) -> None:
    node = responder()
    await node.start("127.0.0.1", 0)
    assert node.last_probe_at is None
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
    await eventually(lambda: len(replies.got) >= 3, "three replies")
    # EXTENDED: this responder reads PROBE_EXT and answers peers (docs/liveness.md)
    assert set(replies.got) == {("node-a", Flag.EXTENDED)}
    assert node.last_probe_at is not None
    assert node.last_probe_at <= asyncio.get_running_loop().time()


async def test_the_fenced_flag_passes_through(prober) -> None:
    fenced = False
    node = LivenessResponder("node-a", KEYS, flags=lambda: Flag.FENCED if fenced else Flag.NONE)
    await node.start("127.0.0.1", 0)
    try:
        scheduler, replies = prober()
        scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
        await eventually(lambda: ("node-a", Flag.EXTENDED) in replies.got, "a plain reply")
        fenced = True
        fenced_reply = ("node-a", Flag.FENCED | Flag.EXTENDED)
        await eventually(lambda: fenced_reply in replies.got, "a fenced reply")
    finally:
        node.close()
        await node.wait_closed()


@pytest.fixture
def every_refusal_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel filter lets every refusal it makes through to be counted (weight 1), not one
    in 2**SAMPLE_SHIFT at random: a test waiting for N counted refusals then needs N probes,
    not a random number of them (one in 64 at 50 probes a second missed 5 s now and then)."""
    monkeypatch.setattr(liveness_filter, "SAMPLE_SHIFT", 0)


@pytest.mark.usefixtures("every_refusal_sampled")
async def test_a_responder_ignores_probes_for_another_node(responder, prober) -> None:
    node_a = responder("node-a")
    await node_a.start("127.0.0.1", 0)
    before = rejected("responder", "other_node")
    scheduler, replies = prober()
    scheduler.set_targets({"node-b": ("127.0.0.1", node_a.port)})
    await eventually(lambda: rejected("responder", "other_node") >= before + 3, "3 refusals")
    assert replies.got == []
    assert node_a.last_probe_at is None


@pytest.mark.usefixtures("every_refusal_sampled")
async def test_a_probe_with_the_wrong_key_gets_no_reply_and_is_counted(responder, prober) -> None:
    node = responder()
    await node.start("127.0.0.1", 0)
    before = rejected("responder", "key")
    scheduler, replies = prober(keys=OTHER_KEYS)
    scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
    await eventually(lambda: rejected("responder", "key") >= before + 3, "3 refusals")
    assert replies.got == []
    assert node.last_probe_at is None


async def test_a_responder_answers_nobody_but_probes_it_can_verify(
    responder, fake_node: socket.socket
) -> None:
    node = responder()
    await node.start("127.0.0.1", 0)
    probe = Packet(Kind.PROBE, "node-a", b"s" * 8, 1)
    for datagram in (  # most are dropped by the kernel filter, any sampled one in Python
        b"garbage",
        encode(probe, OTHER_KEYS),
        encode(replace(probe, kind=Kind.REPLY), KEYS),
    ):
        fake_node.sendto(datagram, ("127.0.0.1", node.port))
    fake_node.sendto(encode(probe, KEYS), ("127.0.0.1", node.port))
    answer, source = await next_probe(fake_node)  # the only datagram that came back
    assert answer == replace(probe, kind=Kind.REPLY, flags=Flag.EXTENDED)
    assert source == ("127.0.0.1", node.port)
    assert drain(fake_node) == 0


def reply_to(probe: Packet, **changes: object) -> bytes:
    fields: dict[str, object] = {"kind": Kind.REPLY, "flags": Flag.NONE, **changes}
    return encode(replace(probe, **fields), KEYS)  # type: ignore[arg-type]


async def test_a_replayed_reply_is_not_accepted_twice(prober, fake_node: socket.socket) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    reply = reply_to(probe)
    fake_node.sendto(reply, source)
    await eventually(lambda: len(replies.got) == 1, "the reply accepted")
    before = rejected("prober", "replay")
    fake_node.sendto(reply, source)
    await eventually(lambda: rejected("prober", "replay") == before + 1, "the replay refused")
    assert replies.got == [("node-a", Flag.NONE)]


async def test_an_older_reply_after_a_newer_one_is_refused(prober, fake_node) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    first, source = await next_probe(fake_node)
    second, _ = await next_probe(fake_node)
    assert second.seq > first.seq
    before = rejected("prober", "replay")
    fake_node.sendto(reply_to(second), source)
    fake_node.sendto(reply_to(first), source)
    await eventually(lambda: rejected("prober", "replay") == before + 1, "the older refused")
    assert len(replies.got) == 1


async def test_a_reply_from_another_port_than_the_target_is_refused(
    prober, fake_node: socket.socket
) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    before = rejected("prober", "source")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as elsewhere:
        elsewhere.bind(("127.0.0.1", 0))
        elsewhere.sendto(reply_to(probe), source)
        await eventually(lambda: rejected("prober", "source") == before + 1, "refused")
    fake_node.sendto(reply_to(probe), source)  # the same reply from the target counts
    await eventually(lambda: len(replies.got) == 1, "accepted from the target")


async def test_a_reply_older_than_the_window_is_refused(prober, fake_node: socket.socket) -> None:
    scheduler, replies = prober(window=2)
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    await eventually(lambda: scheduler.seq >= probe.seq + 2, "two more rounds")
    before = rejected("prober", "stale")
    fake_node.sendto(reply_to(probe), source)
    await eventually(lambda: rejected("prober", "stale") == before + 1, "the stale refused")
    assert replies.got == []


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"session": b"not-ours"}, "session"),
        ({"node": "node-z"}, "unknown_node"),
        ({"kind": Kind.PROBE}, "not_reply"),
        ({"seq": 10**6}, "unsent_seq"),
    ],
)
async def test_replies_we_did_not_ask_for_are_refused(
    prober, fake_node: socket.socket, changes: dict[str, object], reason: str, python_checks
) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    before = rejected("prober", reason)
    fake_node.sendto(reply_to(probe, **changes), source)
    await eventually(lambda: rejected("prober", reason) == before + 1, f"refused as {reason}")
    assert replies.got == []


async def test_a_reply_signed_with_another_key_is_refused(prober, fake_node, python_checks) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    before = rejected("prober", "key")
    fake_node.sendto(encode(replace(probe, kind=Kind.REPLY), OTHER_KEYS), source)
    await eventually(lambda: rejected("prober", "key") == before + 1, "refused as key")
    assert replies.got == []


async def test_removing_a_target_stops_its_probes(prober, fake_node: socket.socket) -> None:
    scheduler, _ = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    await next_probe(fake_node)
    scheduler.set_targets({})
    drain(fake_node)  # loopback delivers at sendto: anything sent before is queued already
    seq = scheduler.seq
    await eventually(lambda: scheduler.seq >= seq + 3, "three more rounds")
    assert drain(fake_node) == 0


async def test_a_target_whose_endpoint_changed_starts_afresh(prober, fake_node) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    old_probe, source = await next_probe(fake_node)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as moved:
        moved.bind(("127.0.0.1", 0))
        moved.setblocking(False)
        scheduler.set_targets({"node-a": ("127.0.0.1", port_of(moved))})
        before = rejected("prober", "source")
        fake_node.sendto(reply_to(old_probe), source)  # the old endpoint no longer counts
        await eventually(lambda: rejected("prober", "source") == before + 1, "old refused")
        probe, source = await next_probe(moved)
        moved.sendto(reply_to(probe), source)
        await eventually(lambda: len(replies.got) == 1, "the new endpoint's reply")


async def test_a_round_larger_than_a_chunk_probes_every_target_once(
    prober, fake_node: socket.socket
) -> None:
    names = {f"node-{n}" for n in range(CHUNK * 2 + 5)}
    scheduler, _ = prober()
    scheduler.set_targets(dict.fromkeys(names, ("127.0.0.1", port_of(fake_node))))
    first, _ = await next_probe(fake_node)
    assert first.seq == 1  # the targets were set before the first round
    got = [first.node]
    for _ in range(len(names) + 1):  # bounded: a round that never ends fails below
        probe, _ = await next_probe(fake_node)
        if probe.seq != first.seq:
            break
        got.append(probe.node)
    else:
        raise AssertionError(f"round {first.seq} sent more than {len(names)} probes")
    assert sorted(got) == sorted(names)


def send_errors(role: str, reason: str) -> float:
    labels = {"role": role, "reason": reason}
    return REGISTRY.get_sample_value("eipctl_liveness_send_errors_total", labels) or 0.0


class FullBuffer:
    """Stands in for the prober's socket: every send finds the buffer full."""

    def sendto(self, data: bytes, address: object) -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")


async def test_a_full_send_buffer_drops_probes_and_the_rounds_go_on(
    prober, fake_node: socket.socket
) -> None:
    scheduler, _ = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    await next_probe(fake_node)
    real = scheduler._sockets[socket.AF_INET]
    scheduler._sockets[socket.AF_INET] = FullBuffer()  # type: ignore[assignment]
    before, seq = send_errors("prober", "EAGAIN"), scheduler.seq
    await eventually(lambda: send_errors("prober", "EAGAIN") >= before + 3, "three dropped")
    assert scheduler.seq >= seq + 3
    scheduler._sockets[socket.AF_INET] = real
    drain(fake_node)
    await next_probe(fake_node)  # and sends again once it can


async def test_a_failing_on_reply_does_not_stop_the_replies(responder, prober) -> None:
    node = responder()
    await node.start("127.0.0.1", 0)
    calls = 0

    def on_reply(name: str, flags: Flag) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("the consumer is broken")

    scheduler, _ = prober(on_reply=on_reply)
    scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
    await eventually(lambda: calls >= 3, "three replies, each raising")


async def test_a_responder_whose_flags_fail_does_not_answer(prober) -> None:
    def flags() -> Flag:
        raise RuntimeError("no idea whether we are fenced")

    node = LivenessResponder("node-a", KEYS, flags=flags)
    await node.start("127.0.0.1", 0)
    try:
        scheduler, replies = prober()
        scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
        await eventually(lambda: scheduler.seq >= 5, "five rounds")
        assert replies.got == []
        assert node.last_probe_at is not None  # the probes did arrive
    finally:
        node.close()
        await node.wait_closed()


async def test_a_late_round_causes_no_burst_of_catch_up_rounds(prober) -> None:
    scheduler, _ = prober()
    await eventually(lambda: scheduler.seq >= 2, "two rounds")
    seq = scheduler.seq
    time.sleep(20 * INTERVAL)  # the loop is blocked for 20 rounds
    unblocked = time.monotonic()
    await asyncio.sleep(INTERVAL / 4)
    since = time.monotonic() - unblocked
    assert scheduler.seq - seq <= 2 + since / INTERVAL  # one late round, then the cadence


async def test_close_releases_the_ports(responder, prober, fake_node: socket.socket) -> None:
    node = responder()
    await node.start("127.0.0.1", 0)
    scheduler, _ = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    _, (_, prober_port) = await next_probe(fake_node)
    node.close()
    node.close()  # idempotent
    scheduler.close()
    await node.wait_closed()
    await scheduler.wait_closed()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
        again.bind(("127.0.0.1", node.port))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
        again.bind(("0.0.0.0", prober_port))


async def test_a_taken_port_is_an_error_naming_it(responder) -> None:
    first = responder()
    await first.start("127.0.0.1", 0)
    with pytest.raises(OSError, match=f"port {first.port}"):
        await responder().start("127.0.0.1", first.port)


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
async def test_ipv6_works_like_ipv4(responder, prober) -> None:
    node = responder()
    await node.start("::1", 0)
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("0:0::1", node.port)})  # written another way: still ::1
    await eventually(lambda: len(replies.got) >= 2, "two replies over IPv6")


def test_bad_targets_are_refused_and_change_nothing() -> None:
    scheduler = LivenessProber(KEYS, interval=1.0, on_reply=Replies())
    scheduler.set_targets({"node-a": ("127.0.0.1", 9)})
    for bad in (
        {"Node-A": ("127.0.0.1", 9)},
        {"node-a": ("localhost", 9)},
        {"node-a": ("127.0.0.1", 0)},
        {"node-a": ("127.0.0.1", 65536)},
    ):
        with pytest.raises(ValueError):
            scheduler.set_targets({"node-b": ("127.0.0.2", 9), **bad})
    assert list(scheduler._targets) == ["node-a"]


def test_read_keyring_names_the_path(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("liveness-test-key-0123456789\n")
    assert read_keyring(str(keys)).key_ids == KEYS.key_ids
    keys.write_text("short\n")
    with pytest.raises(ValueError, match=f"{keys}.*at least 16 bytes"):
        read_keyring(str(keys))
    with pytest.raises(ValueError, match=str(tmp_path / "missing")):
        read_keyring(str(tmp_path / "missing"))


# -- holding through control-plane outages: PROBE_EXT, writers' probes, peer queries -----------

SESSION = bytes(range(8))
QUERY_SESSION = bytes(range(8, 16))  # a querier is another process than the prober
DIGEST = placement_digest(["10-0-0-1", "10-0-0-2"])
EXT = probe_ext(DIGEST, 3)  # what a leader knowing 3 nodes sends a node holding two claims
NO_DIGEST = bytes(len(DIGEST))


class Probes:
    """An ``on_probe`` that records what it is told."""

    def __init__(self) -> None:
        self.got: list[tuple[Flag, bytes | None]] = []
        self.arrived: list[float] = []

    def __call__(self, flags: Flag, ext: bytes | None, arrived: float) -> None:
        self.got.append((flags, ext))
        self.arrived.append(arrived)


@pytest_asyncio.fixture
async def started() -> AsyncIterator[Callable[..., Awaitable[LivenessResponder]]]:
    """Starts responders on 127.0.0.1 with any constructor options; closes them afterwards."""
    made: list[LivenessResponder] = []

    async def start(node: str = "node-a", **options: Any) -> LivenessResponder:
        options.setdefault("flags", lambda: Flag.NONE)
        made.append(LivenessResponder(node, KEYS, **options))
        await made[-1].start("127.0.0.1", 0)
        return made[-1]

    yield start
    for each in made:
        each.close()
        await each.wait_closed()


def extended_reply(probe: Packet) -> bytes:
    """The reply of a controller of this release to ``probe`` (a PROBE or a PROBE_EXT)."""
    return reply_to(probe, flags=Flag.EXTENDED, ext=b"")


async def exchange(sock: socket.socket, port: int, datagram: bytes) -> Packet:
    """Send ``datagram`` to 127.0.0.1:``port`` from ``sock`` and decode the answer."""
    sock.sendto(datagram, ("127.0.0.1", port))
    answer, source = await next_probe(sock)
    assert source == ("127.0.0.1", port)
    return answer


async def test_a_probe_ext_hands_its_ext_to_on_probe_and_gets_an_extended_reply(
    started, fake_node: socket.socket
) -> None:
    probes = Probes()
    node = await started(on_probe=probes, flags=lambda: Flag.API_STALE)
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    writer = Flag.STANDING | Flag.WRITER
    reply = await exchange(fake_node, node.port, encoder.encode(7, writer, EXT))
    assert reply == Packet(Kind.REPLY, "node-a", SESSION, 7, Flag.API_STALE | Flag.EXTENDED)
    assert probes.got == [(writer, EXT)]
    # a plain probe is answered the same way, and on_probe hears of it without a digest
    reply = await exchange(fake_node, node.port, encoder.encode(8, Flag.STANDING))
    assert reply == Packet(Kind.REPLY, "node-a", SESSION, 8, Flag.API_STALE | Flag.EXTENDED)
    assert probes.got == [(writer, EXT), (Flag.STANDING, None)]


async def test_a_failing_on_probe_does_not_stop_the_answers(
    started, fake_node: socket.socket
) -> None:
    def on_probe(flags: Flag, ext: bytes | None, arrived: float) -> None:
        raise RuntimeError("the consumer is broken")

    node = await started(on_probe=on_probe)
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    reply = await exchange(fake_node, node.port, encoder.encode(1, Flag.WRITER, EXT))
    assert reply.kind is Kind.REPLY and reply.seq == 1
    assert node.last_writer_at is not None


@pytest.mark.parametrize("extended", [False, True])
@pytest.mark.parametrize(
    ("flags", "writer"),
    [
        (Flag.STANDING | Flag.WRITER, True),
        (Flag.WRITER, True),
        (Flag.NONE, True),  # no standing: a first-release scheduler, maybe the leader
        (Flag.STANDING, False),
    ],
)
async def test_which_probes_are_a_writers(
    started, fake_node: socket.socket, flags: Flag, writer: bool, extended: bool
) -> None:
    node = await started()
    assert node.last_writer_at is None and node.writer_silence() is None
    loop = asyncio.get_running_loop()
    before = loop.time()
    probe = ProbeEncoder("node-a", SESSION, KEYS).encode(1, flags, EXT if extended else None)
    await exchange(fake_node, node.port, probe)
    assert node.last_probe_at is not None
    assert before <= node.last_probe_at <= loop.time()
    assert node.standing_seen is bool(flags & Flag.STANDING)
    if writer:
        assert node.last_writer_at == node.last_probe_at
        silence = node.writer_silence()
        assert silence is not None and 0 <= silence <= loop.time() - before
    else:
        assert node.last_writer_at is None
        assert node.writer_silence() is None


async def test_a_standing_only_probe_leaves_the_last_writer_time_alone(
    started, fake_node: socket.socket
) -> None:
    node = await started()
    encoder = ProbeEncoder("node-a", SESSION, KEYS)
    await exchange(fake_node, node.port, encoder.encode(1, Flag.STANDING | Flag.WRITER))
    written = node.last_writer_at
    assert written is not None
    await asyncio.sleep(0.01)
    await exchange(fake_node, node.port, encoder.encode(2, Flag.STANDING, EXT))
    assert node.last_writer_at == written
    assert node.last_probe_at is not None and node.last_probe_at > written


async def test_the_prober_sends_plain_probes_until_a_reply_says_extended(
    prober, fake_node: socket.socket
) -> None:
    standing = Flag.STANDING | Flag.WRITER
    asked: list[str] = []

    def digest(node: str) -> bytes:
        asked.append(node)
        return DIGEST

    scheduler, replies = prober(
        window=16, standing=lambda: standing, digest=digest, nodes=lambda: 7
    )
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    for _ in range(3):  # nothing heard yet: plain probes, whatever our standing
        probe, source = await next_probe(fake_node)
        assert probe.kind is Kind.PROBE and probe.ext == b""
        assert probe.flags == Flag.STANDING | Flag.WRITER
    # a first-release controller's reply (no EXTENDED): still plain probes
    fake_node.sendto(reply_to(probe), source)
    await eventually(lambda: len(replies.got) == 1, "the plain reply accepted")
    drain(fake_node)
    probe, source = await next_probe(fake_node)
    assert probe.kind is Kind.PROBE
    assert asked == []
    # EXTENDED: PROBE_EXT with the digest of what the writer places there, and nodes()
    fake_node.sendto(extended_reply(probe), source)
    await eventually(lambda: len(replies.got) == 2, "the extended reply accepted")
    drain(fake_node)
    probe, source = await next_probe(fake_node)
    assert probe.kind is Kind.PROBE_EXT
    assert probe_ext_fields(probe.ext) == (DIGEST, 7)
    assert probe.flags == Flag.STANDING | Flag.WRITER
    assert asked and set(asked) == {"node-a"}
    # no longer a writer: PROBE_EXT still, but the digest is zeros and WRITER is gone
    standing = Flag.STANDING
    for _ in range(200):
        fake_node.sendto(extended_reply(probe), source)
        probe, source = await next_probe(fake_node)
        if not probe.flags & Flag.WRITER:
            break
    assert probe.flags == Flag.STANDING
    assert probe.kind is Kind.PROBE_EXT
    assert probe_ext_fields(probe.ext) == (NO_DIGEST, 7)  # the node count all the same


async def test_a_probe_always_says_standing(prober, fake_node: socket.socket) -> None:
    def broken() -> Flag:
        raise RuntimeError("who leads?")

    for standing in (lambda: Flag.WRITER, broken):
        scheduler, _ = prober(window=16, standing=standing)
        scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
        probe, _ = await next_probe(fake_node)
        assert probe.flags & Flag.STANDING
        assert bool(probe.flags & Flag.WRITER) is (standing is not broken)
        scheduler.set_targets({})
        await asyncio.sleep(2 * INTERVAL)
        drain(fake_node)


async def test_a_failing_digest_vouches_for_nothing(prober, fake_node: socket.socket) -> None:
    def digest(node: str) -> bytes:
        raise RuntimeError("no claims listed yet")

    scheduler, replies = prober(
        window=16, standing=lambda: Flag.STANDING | Flag.WRITER, digest=digest
    )
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    fake_node.sendto(extended_reply(probe), source)
    await eventually(lambda: len(replies.got) == 1, "the extended reply accepted")
    drain(fake_node)
    probe, _ = await next_probe(fake_node)
    assert probe.kind is Kind.PROBE_EXT
    assert probe_ext_fields(probe.ext) == (NO_DIGEST, 1)  # no nodes(): its own target count
    assert probe.flags == Flag.STANDING  # WRITER dropped: a zero digest vouches for nothing


async def test_the_prober_falls_back_to_plain_probes_after_half_a_window_unanswered(
    prober, fake_node: socket.socket
) -> None:
    """A controller rolled back to the first release drops kind 3: after window // 2 rounds
    without an accepted reply it gets kind 1 again, and kind 3 once it says EXTENDED again."""
    window = 8
    scheduler, replies = prober(
        standing=lambda: Flag.STANDING | Flag.WRITER,
        digest=lambda node: DIGEST,
        window=window,
    )
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    for _ in range(200):  # answer the freshest probe, EXTENDED, until kind 3 comes
        drain(fake_node)
        probe, source = await next_probe(fake_node)
        if probe.kind is Kind.PROBE_EXT:
            break
        fake_node.sendto(extended_reply(probe), source)
    assert probe.kind is Kind.PROBE_EXT
    count = len(replies.got)
    fake_node.sendto(extended_reply(probe), source)  # the last answer
    await eventually(lambda: len(replies.got) == count + 1, "the last reply accepted")
    last = probe.seq
    drain(fake_node)  # probes sent before it was accepted
    seen: list[tuple[int, Kind]] = []
    for _ in range(4 * window):  # bounded: kind 1 must come back within half a window
        probe, source = await next_probe(fake_node)
        seen.append((probe.seq, probe.kind))
        if probe.kind is Kind.PROBE:
            break
    else:
        raise AssertionError(f"still kind 3 after {len(seen)} probes unanswered: {seen}")
    for seq, kind in seen:
        assert (kind is Kind.PROBE_EXT) == (seq - last <= window // 2), (last, seen)
    assert seen[-1][0] > last + window // 2
    # it answers again, EXTENDED: kind 3 again
    count = len(replies.got)
    fake_node.sendto(extended_reply(probe), source)
    await eventually(lambda: len(replies.got) == count + 1, "the new reply accepted")
    drain(fake_node)
    probe, _ = await next_probe(fake_node)
    assert probe.kind is Kind.PROBE_EXT and probe_ext_fields(probe.ext)[0] == DIGEST


def peer_answers(answer: str) -> float:
    value = REGISTRY.get_sample_value("eipctl_liveness_peer_answers_total", {"answer": answer})
    return value or 0.0


async def hear_a_writer(node: LivenessResponder) -> None:
    """Probe ``node`` once as the writing leader, from a socket of our own."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as leader:
        leader.bind(("127.0.0.1", 0))
        leader.setblocking(False)
        probe = ProbeEncoder(node._node, SESSION, KEYS).encode(1, Flag.STANDING | Flag.WRITER)
        await exchange(leader, node.port, probe)
    assert node.last_writer_at is not None


async def test_a_peer_query_is_answered_with_the_writer_silence(
    started, fake_node: socket.socket, python_checks
) -> None:
    heard = await started("node-b", writer_heard_within=WAIT)
    never = await started("node-c")
    await hear_a_writer(heard)
    loop = asyncio.get_running_loop()
    query = Packet(Kind.PEER_QUERY, "node-b", QUERY_SESSION, 42)
    before = loop.time()
    answer = await exchange(fake_node, heard.port, encode(query, KEYS))
    assert answer.kind is Kind.PEER_REPLY
    assert (answer.node, answer.session, answer.seq) == ("node-b", QUERY_SESSION, 42)
    assert answer.flags == Flag.WRITER_HEARD
    assert heard.last_writer_at is not None
    assert peer_silence_ms(answer.ext) <= int((loop.time() - heard.last_writer_at) * 1000)
    assert peer_silence_ms(answer.ext) >= int((before - heard.last_writer_at) * 1000) - 1
    assert answer.ext[4:] == bytes(4)
    query = replace(query, node="node-c", seq=43)
    answer = await exchange(fake_node, never.port, encode(query, KEYS))
    assert (answer.kind, answer.node, answer.seq) == (Kind.PEER_REPLY, "node-c", 43)
    assert answer.flags == Flag.NONE
    assert answer.ext == peer_ext(NEVER_MS)
    # a query for another node is refused like a probe for another node
    before_refused = rejected("responder", "other_node")
    query = replace(query, node="node-b", seq=44)
    fake_node.sendto(encode(query, KEYS), ("127.0.0.1", never.port))
    await eventually(lambda: rejected("responder", "other_node") > before_refused, "refused")
    assert drain(fake_node) == 0


async def test_a_writer_heard_longer_ago_than_writer_heard_within_is_not_flagged(
    started, fake_node: socket.socket
) -> None:
    node = await started("node-b", writer_heard_within=0.05)
    await hear_a_writer(node)
    await asyncio.sleep(0.1)
    answer = await exchange(
        fake_node, node.port, encode(Packet(Kind.PEER_QUERY, "node-b", QUERY_SESSION, 1), KEYS)
    )
    assert answer.flags == Flag.NONE
    assert 100 <= peer_silence_ms(answer.ext) < NEVER_MS


async def test_a_querier_gathers_the_writer_silences_of_its_peers(started) -> None:
    asking = await started("node-a")
    heard = await started("node-b")
    never = await started("node-c")
    querier = PeerQuerier("node-a", asking)
    querier.set_peers(
        {
            "node-a": ("127.0.0.1", asking.port),  # itself: skipped
            "node-b": ("127.0.0.1", heard.port),
            "node-c": ("127.0.0.1", never.port),
        }
    )
    assert set(querier.peers) == {"node-b", "node-c"}
    await hear_a_writer(heard)
    no_writer = peer_answers("no_writer")
    loop = asyncio.get_running_loop()
    started_at = loop.time()
    # heard_within 0: no answer ends the round early, both are awaited
    answers = await querier.ask(within=WAIT, resend_every=WAIT, heard_within=0.0)
    elapsed = loop.time() - started_at
    assert elapsed < WAIT  # every peer answered: no waiting for ``within``
    by_node = {a.node: a.writer_silence for a in answers}
    assert set(by_node) == {"node-b", "node-c"}
    assert by_node["node-c"] is None
    silence_b = by_node["node-b"]
    assert silence_b is not None
    assert heard.last_writer_at is not None
    assert 0 <= silence_b <= loop.time() - heard.last_writer_at
    assert peer_answers("no_writer") == no_writer + 2
    # with a larger heard_within, node-b's answer says it hears a writer
    verdict = outage_verdict(
        await querier.ask(within=WAIT, resend_every=WAIT, heard_within=WAIT),
        known=3,
        heard_within=WAIT,
    )
    assert verdict is OutageVerdict.WRITER_HEARD


async def test_a_querier_with_no_peers_returns_at_once(started) -> None:
    querier = PeerQuerier("node-a", await started("node-a"))
    querier.set_peers({"node-a": ("127.0.0.1", 9)})
    async with asyncio.timeout(WAIT):
        assert await querier.ask(within=WAIT * 10, resend_every=1.0, heard_within=0.1) == []


async def test_peer_replies_the_querier_did_not_ask_for_are_refused_and_counted(
    started, fake_node: socket.socket
) -> None:
    asking = await started("node-a")
    querier = PeerQuerier("node-a", asking)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as node_c:
        node_c.bind(("127.0.0.1", 0))
        node_c.setblocking(False)
        querier.set_peers(
            {"node-b": ("127.0.0.1", port_of(fake_node)), "node-c": ("127.0.0.1", port_of(node_c))}
        )
        target = ("127.0.0.1", asking.port)
        round_ = asyncio.create_task(querier.ask(within=WAIT, resend_every=WAIT, heard_within=0.0))
        query, source = await next_probe(fake_node)
        assert (query.kind, query.node) == (Kind.PEER_QUERY, "node-b")
        assert source == target  # queries leave from the responder's socket
        query_c, _ = await next_probe(node_c)
        assert (query_c.session, query_c.seq, query_c.node) == (query.session, query.seq, "node-c")

        def answer(**changes: Any) -> bytes:
            fields: dict[str, Any] = {"kind": Kind.PEER_REPLY, "ext": peer_ext(0), **changes}
            return encode(replace(query, **fields), KEYS)

        good = answer(ext=peer_ext(1500))
        # not this querier's session: the kernel filter drops it (test_liveness_filter_kernel);
        # the same check in Python, for a socket without the filter
        other = replace(query, kind=Kind.PEER_REPLY, ext=peer_ext(0), session=bytes(8))
        assert querier._received(other, ("127.0.0.1", port_of(fake_node))) == "session"
        for datagram, sock, reason in [
            (answer(seq=query.seq - 1), fake_node, "stale"),  # an earlier round's
            (answer(node="node-z"), fake_node, "unknown_node"),
            (answer(), node_c, "source"),  # node-b's answer from node-c's address
        ]:
            before = rejected("querier", reason)
            sock.sendto(datagram, target)
            await eventually(lambda r=reason, b=before: rejected("querier", r) > b, reason)
        fake_node.sendto(good, target)
        before = rejected("querier", "replay")
        fake_node.sendto(good, target)  # the same answer again, in the same round
        await eventually(lambda: rejected("querier", "replay") > before, "the replay refused")
        assert not round_.done()  # node-c has not answered yet
        node_c.sendto(answer(node="node-c", ext=peer_ext(NEVER_MS)), target)
        async with asyncio.timeout(WAIT):
            answers = await round_
        assert {a.node: a.writer_silence for a in answers} == {"node-b": 1.5, "node-c": None}
        # between rounds: nobody asked
        before = rejected("querier", "no_query")
        fake_node.sendto(good, target)
        await eventually(lambda: rejected("querier", "no_query") > before, "refused: no round")
        # the next round: the recorded answer of the last is stale
        drain(fake_node)
        drain(node_c)
        round_ = asyncio.create_task(querier.ask(within=0.5, resend_every=WAIT, heard_within=0.0))
        await next_probe(fake_node)
        before = rejected("querier", "stale")
        fake_node.sendto(good, target)
        await eventually(lambda: rejected("querier", "stale") > before, "the old answer refused")
        async with asyncio.timeout(WAIT):
            assert await round_ == []


async def test_a_peer_that_does_not_answer_ends_the_round_after_within(
    started, fake_node: socket.socket
) -> None:
    asking = await started("node-a")
    answering = await started("node-b")
    querier = PeerQuerier("node-a", asking)
    querier.set_peers(
        {"node-b": ("127.0.0.1", answering.port), "node-d": ("127.0.0.1", port_of(fake_node))}
    )
    loop = asyncio.get_running_loop()
    within = 1.0
    started_at = loop.time()
    async with asyncio.timeout(WAIT):
        answers = await querier.ask(within=within, resend_every=0.2, heard_within=0.1)
    elapsed = loop.time() - started_at
    assert within - 0.05 <= elapsed < WAIT
    assert [(a.node, a.writer_silence) for a in answers] == [("node-b", None)]
    # the silent peer was asked again (a lost datagram must not end a hold), in one round
    queries = []
    while True:
        try:
            data = fake_node.recv(2048)
        except BlockingIOError:
            break
        queries.append(decode(data, KEYS))
    assert len(queries) >= 2
    assert {(q.kind, q.node, q.session) for q in queries} == {
        (Kind.PEER_QUERY, "node-d", queries[0].session)
    }
    seqs = [q.seq for q in queries]  # each resend a seq of its own: none is a replay
    assert seqs == sorted(set(seqs))


async def test_a_reply_without_extended_makes_the_probes_plain_again(
    prober, fake_node: socket.socket
) -> None:
    """A controller rolled back to the first release answers plain probes without EXTENDED:
    it gets kind 1 from then on, not kind 3 again after its next reply."""
    scheduler, replies = prober(
        window=16, standing=lambda: Flag.STANDING | Flag.WRITER, digest=lambda node: DIGEST
    )
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    for _ in range(200):
        drain(fake_node)
        probe, source = await next_probe(fake_node)
        if probe.kind is Kind.PROBE_EXT:
            break
        fake_node.sendto(extended_reply(probe), source)
    assert probe.kind is Kind.PROBE_EXT
    for _ in range(3):  # every accepted reply without EXTENDED: plain probes next
        count = len(replies.got)
        fake_node.sendto(reply_to(probe, flags=Flag.NONE, ext=b""), source)
        await eventually(lambda c=count: len(replies.got) == c + 1, "the plain reply accepted")
        drain(fake_node)
        probe, source = await next_probe(fake_node)
        assert probe.kind is Kind.PROBE


async def test_a_peer_hearing_a_writer_ends_the_round_without_waiting_for_the_others(
    started, fake_node: socket.socket
) -> None:
    asking = await started("node-a")
    heard = await started("node-b")
    await hear_a_writer(heard)
    querier = PeerQuerier("node-a", asking)
    querier.set_peers(
        {"node-b": ("127.0.0.1", heard.port), "node-d": ("127.0.0.1", port_of(fake_node))}
    )
    # node-d never answers; within is far beyond WAIT, so only the early end can pass
    async with asyncio.timeout(WAIT):
        answers = await querier.ask(within=40.0, resend_every=WAIT, heard_within=WAIT)
    assert [a.node for a in answers] == ["node-b"]
    assert outage_verdict(answers, known=3, heard_within=WAIT) is OutageVerdict.WRITER_HEARD


# -- node keys: no node answers for another (docs/liveness.md "Node keys") -------------------

KEY_A = b"node-a-own-liveness-key-0123"
KEY_B = b"node-b-own-liveness-key-0123"


async def test_a_node_with_its_own_key_is_probed_and_answers_under_it(responder, prober) -> None:
    """Before the scheduler has read node-a's key it probes under the cluster key and
    node-a answers under that; after, both sides use node-a's key, through the kernel
    filters (the scheduler's stops checking key ids, node-a's admits its own)."""
    node = responder(keys=KEYS.with_node_keys({"node-a": KEY_A}, required=False))
    await node.start("127.0.0.1", 0)
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", node.port)})
    await eventually(lambda: len(replies.got) >= 2, "replies under the cluster key")
    scheduler.set_node_keys({"node-a": KEY_A})
    before = len(replies.got)
    await eventually(lambda: len(replies.got) >= before + 3, "replies under node-a's key")
    assert set(replies.got) == {("node-a", Flag.EXTENDED)}


async def test_a_scheduler_that_knows_a_nodes_key_takes_no_reply_for_it_under_another(
    prober, fake_node: socket.socket, python_checks: None
) -> None:
    """The forger holds the cluster key and its own node key: neither makes a reply for
    node-a count, FENCED (a live node declared dead) or plain (a dead one kept alive)."""
    scheduler, replies = prober()
    scheduler.set_node_keys({"node-a": KEY_A, "node-b": KEY_B})
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    forger = KEYS.with_node_keys({"node-b": KEY_B}, required=False)
    before = rejected("prober", "owner")
    async with asyncio.timeout(WAIT):
        data, source = await asyncio.get_running_loop().sock_recvfrom(fake_node, 2048)
    probe = decode(data, KEYS.with_node_keys({"node-a": KEY_A}))
    assert probe.key_id == KEYS.with_node_keys({"node-a": KEY_A}).node_key_ids[0]
    for flags in (Flag.FENCED, Flag.NONE):
        forged = Packet(Kind.REPLY, "node-a", probe.session, probe.seq, flags)
        fake_node.sendto(encode(forged, forger), source)  # the cluster key
        fake_node.sendto(encode(forged, forger, key_id=forger.node_key_ids[0]), source)
    await eventually(lambda: rejected("prober", "owner") == before + 4, "four forgeries refused")
    assert replies.got == []
    genuine = Packet(Kind.REPLY, "node-a", probe.session, probe.seq, Flag.NONE)
    fake_node.sendto(encode(genuine, KEYS.with_node_keys({"node-a": KEY_A})), source)
    await eventually(lambda: replies.got == [("node-a", Flag.NONE)], "node-a's own reply")
