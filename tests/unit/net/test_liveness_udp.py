"""net/liveness.py over real UDP on loopback: who answers, which replies count, and once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

from eipctl.core.liveness_wire import Flag, Keyring, Kind, Packet, decode, encode
from eipctl.metrics import REGISTRY
from eipctl.net.liveness import CHUNK, LivenessProber, LivenessResponder, read_keyring

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
        keys: Keyring = KEYS, window: int = 8, on_reply: Callable[[str, Flag], None] | None = None
    ) -> tuple[LivenessProber, Replies]:
        replies = Replies()
        prober = LivenessProber(
            keys, interval=INTERVAL, on_reply=on_reply or replies, window=window
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


async def test_a_responder_ignores_probes_for_another_node(responder, prober) -> None:
    node_a = responder("node-a")
    await node_a.start("127.0.0.1", 0)
    before = rejected("responder", "other_node")
    scheduler, replies = prober()
    scheduler.set_targets({"node-b": ("127.0.0.1", node_a.port)})
    await eventually(lambda: rejected("responder", "other_node") >= before + 3, "3 refusals")
    assert replies.got == []
    assert node_a.last_probe_at is None


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
    before = rejected("responder", "not_probe")
    for datagram in (
        b"garbage",
        encode(probe, OTHER_KEYS),
        encode(replace(probe, kind=Kind.REPLY), KEYS),
    ):
        fake_node.sendto(datagram, ("127.0.0.1", node.port))
    await eventually(lambda: rejected("responder", "not_probe") >= before + 1, "the reply refused")
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
    prober, fake_node: socket.socket, changes: dict[str, object], reason: str
) -> None:
    scheduler, replies = prober()
    scheduler.set_targets({"node-a": ("127.0.0.1", port_of(fake_node))})
    probe, source = await next_probe(fake_node)
    before = rejected("prober", reason)
    fake_node.sendto(reply_to(probe, **changes), source)
    await eventually(lambda: rejected("prober", reason) == before + 1, f"refused as {reason}")
    assert replies.got == []


async def test_a_reply_signed_with_another_key_is_refused(prober, fake_node) -> None:
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
    while True:
        probe, _ = await next_probe(fake_node)
        if probe.seq != first.seq:
            break
        got.append(probe.node)
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
