"""Peer keys over real UDP on loopback ([hostile]; docs/liveness.md "Peer keys"): a node that
holds the cluster key cannot answer a peer query in another node's name, nor vouch for a
node with a key of its own by probing it under the cluster key."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from eipctl.core.liveness_wire import (
    Flag,
    Keyring,
    Kind,
    Packet,
    ProbeEncoder,
    decode,
    encode,
    peer_ext,
)
from eipctl.core.peer_keys import PeerIdentity
from eipctl.metrics import REGISTRY
from eipctl.net.liveness import LivenessResponder, PeerQuerier
from eipctl.net.liveness.responder import OWN_KEY_TRUST

KEYS = Keyring([b"liveness-test-key-0123456789"])
NODE_KEYS = {n: f"{n}-own-key-0123456789".encode() for n in ("node-a", "node-b", "node-c")}
WAIT = 5.0  # generous: conditions are polled, never timed
SESSION = bytes(range(8))


def rejected(role: str, reason: str) -> float:
    labels = {"role": role, "reason": reason}
    return REGISTRY.get_sample_value("eipctl_liveness_packets_rejected_total", labels) or 0.0


def identity(node: str) -> PeerIdentity:
    return PeerIdentity(node, NODE_KEYS[node])


@pytest_asyncio.fixture
async def started() -> AsyncIterator[Callable[..., Awaitable[LivenessResponder]]]:
    """Responders on 127.0.0.1 holding the cluster key and their node's own, as a
    controller's does; closed afterwards."""
    made: list[LivenessResponder] = []

    async def start(node: str, **options: Any) -> LivenessResponder:
        options.setdefault("flags", lambda: Flag.NONE)
        ring = KEYS.with_node_keys({node: NODE_KEYS[node]}, required=False)
        made.append(LivenessResponder(node, ring, **options))
        await made[-1].start("127.0.0.1", 0)
        return made[-1]

    yield start
    for each in made:
        each.close()
        await each.wait_closed()


@pytest.fixture
def udp() -> Iterator[Callable[[], socket.socket]]:
    """Plain UDP sockets on loopback (a forger, a dead node's address); closed afterwards."""
    made: list[socket.socket] = []

    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        made.append(sock)
        return sock

    yield make
    for sock in made:
        sock.close()


def endpoint(where: LivenessResponder | socket.socket) -> tuple[str, int]:
    if isinstance(where, LivenessResponder):
        return ("127.0.0.1", where.port)
    return ("127.0.0.1", int(where.getsockname()[1]))


async def test_peers_that_publish_keys_ask_and_answer_under_their_pair_key(started) -> None:
    a, b, c = [await started(n) for n in ("node-a", "node-b", "node-c")]
    queriers = {}
    for node, responder in (("node-a", a), ("node-b", b), ("node-c", c)):
        queriers[node] = PeerQuerier(node, responder, identity=identity(node))
    for node, querier in queriers.items():
        querier.set_peers(
            {"node-a": endpoint(a), "node-b": endpoint(b), "node-c": endpoint(c)},
            {n: identity(n).public_key for n in NODE_KEYS if n != node},
        )
    assert queriers["node-a"].pair_keyed == {"node-b", "node-c"}
    answers = await queriers["node-a"].ask(within=WAIT, resend_every=WAIT, heard_within=0.0)
    assert {x.node for x in answers} == {"node-b", "node-c"}
    assert b.keyring.peer_keyed == {"node-a", "node-c"}  # the responder holds them too


async def forge_node_b_answer(
    asking: LivenessResponder, querier: PeerQuerier, dead_b: socket.socket, on_c: Keyring
) -> list[Any]:
    """node-c forges node-b's answer to node-a's query, "no writer heard", sent from node-b's
    published address (a spoofed source; here node-b's socket, for node-b is dead)."""
    round_ = asyncio.create_task(querier.ask(within=1.0, resend_every=1.0, heard_within=0.1))
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(WAIT):
        data, _ = await loop.sock_recvfrom(dead_b, 2048)
    # the header is plain text, and node-c's own query carries the same session and seq
    _, _, _, _, _, session, seq, _ = struct.unpack_from("!4sBBBB8sQ4s", data)
    forged = Packet(Kind.PEER_REPLY, "node-b", session, seq, Flag.NONE, peer_ext(9999))
    for kid in (None, *on_c.key_ids):  # under its pair key with node-a, then the cluster key
        dead_b.sendto(encode(forged, on_c, key_id=kid), endpoint(asking))
    return await round_


async def test_a_peer_cannot_answer_for_another_that_has_a_pair_key(started, udp) -> None:
    """[hostile] (a): node-b is dead; node-c, holding the cluster key, answers "no writer
    heard" in node-b's name to cut-off node-a. With peer keys both forgeries are refused
    (``owner``); without them (the contrast) the forgery counts as node-b's vote."""
    dead_b = udp()
    forger = identity("node-c")
    pair_ac = forger.pair_key("node-a", identity("node-a").public_key)
    on_c = KEYS.with_peer_keys({"node-a": pair_ac})

    asking = await started("node-a")
    keyed = PeerQuerier("node-a", asking, identity=identity("node-a"))
    keyed.set_peers({"node-b": endpoint(dead_b)}, {"node-b": identity("node-b").public_key})
    before = rejected("responder", "owner")
    assert await forge_node_b_answer(asking, keyed, dead_b, on_c) == []
    assert rejected("responder", "owner") - before == 2

    plain = await started("node-a")
    unkeyed = PeerQuerier("node-a", plain)  # no identity: the cluster key for everything
    unkeyed.set_peers({"node-b": endpoint(dead_b)})
    answers = await forge_node_b_answer(plain, unkeyed, dead_b, KEYS)
    assert [x.node for x in answers] == ["node-b"]  # the forgery counts: what keys prevent


async def test_a_peer_that_asks_under_a_key_we_do_not_hold_makes_us_list_again(
    started,
) -> None:
    """node-b listed before node-a published its key: node-a's greeting is refused as
    ``peer_key`` and node-b is told (`PeerList` then lists the IpNodes again)."""
    a, b = await started("node-a"), await started("node-b")
    told: list[bool] = []
    b_querier = PeerQuerier("node-b", b, identity=identity("node-b"))
    b_querier.set_peers({"node-a": endpoint(a)})  # node-a's key not known yet
    b_querier.on_unknown_peer_key = lambda: told.append(True)
    a_querier = PeerQuerier("node-a", a, identity=identity("node-a"))
    a_querier.set_peers({"node-b": endpoint(b)}, {"node-b": identity("node-b").public_key})
    before = rejected("responder", "peer_key")
    assert await a_querier.greet(within=0.3) == (0, 1)
    assert told and rejected("responder", "peer_key") > before
    b_querier.set_peers({"node-a": endpoint(a)}, {"node-a": identity("node-a").public_key})
    assert await a_querier.greet(within=WAIT) == (1, 1)


async def test_a_greeting_gives_way_to_a_round_that_decides_a_fence(started, udp) -> None:
    a = await started("node-a")
    querier = PeerQuerier("node-a", a, identity=identity("node-a"))
    querier.set_peers({"node-b": endpoint(udp())})  # never answers
    greeting = asyncio.create_task(querier.greet(within=30.0))
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await querier.ask(within=0.2, resend_every=0.1, heard_within=0.1) == []
    assert loop.time() - began < 5.0  # not 30 s behind the greeting
    assert greeting.done()


class Probes:
    def __init__(self) -> None:
        self.got: list[Flag] = []

    def __call__(self, flags: Flag, ext: bytes | None, arrived: float) -> None:
        self.got.append(flags)


async def probe(sock: socket.socket, port: int, data: bytes) -> Packet:
    sock.sendto(data, ("127.0.0.1", port))
    async with asyncio.timeout(WAIT):
        answer, _ = await asyncio.get_running_loop().sock_recvfrom(sock, 2048)
    return decode(answer, KEYS.with_node_keys(NODE_KEYS, required=False))


async def test_a_cluster_key_probe_vouches_for_no_node_with_a_key_of_its_own(started, udp) -> None:
    """[hostile] (b): any controller can sign a WRITER probe under the cluster key. Once the
    schedulers probe node-a under its own key such a probe is answered but speaks for no
    writer; after `OWN_KEY_TRUST` without an own-key probe (a scheduler rolled back) it counts
    as a writer's again, and it never vouches."""
    probes = Probes()
    node = await started("node-a", on_probe=probes)
    sock = udp()
    writer = Flag.STANDING | Flag.WRITER
    schedulers = KEYS.with_node_keys({"node-a": NODE_KEYS["node-a"]})
    forged = ProbeEncoder("node-a", bytes(8), KEYS)  # what node-b can send
    own = ProbeEncoder("node-a", SESSION, schedulers)

    assert (await probe(sock, node.port, forged.encode(1, writer, bytes(8)))).seq == 1
    assert probes.got == []  # answered, no vouch: no scheduler has used node-a's key yet
    first = node.last_writer_at
    assert first is not None  # but a writer's probe: a scheduler of the last release

    await probe(sock, node.port, own.encode(1, writer, bytes(8)))
    assert probes.got == [writer]
    mark = node.last_writer_at
    assert mark is not None and mark >= first
    assert (await probe(sock, node.port, forged.encode(2, writer, bytes(8)))).seq == 2
    assert probes.got == [writer] and node.last_writer_at == mark  # speaks for no writer

    assert node._own_key_at is not None
    node._own_key_at -= OWN_KEY_TRUST  # a minute without the schedulers using our key
    await probe(sock, node.port, forged.encode(3, writer, bytes(8)))
    assert node.last_writer_at is not None and node.last_writer_at > mark
    assert probes.got == [writer]  # still no vouch
