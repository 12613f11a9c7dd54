"""Stories of a node taken over: node-2's root, holding the cluster liveness key (every
controller holds it) and node-2's own key, forges replies for its neighbours, from their
own addresses (raw IP, spoofed source), for every probe round it sees reach node-2. With
node keys in force (docs/liveness.md, "Node keys") neither forgery counts: node-0, alive,
is not declared fenced or dead, and node-1, killed, is declared dead as if nobody spoke for
it. Without them (the Secrets deleted: the schedulers back on the cluster key) the same
forger gets node-0 declared FENCED, which is what proves that the forger works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eipctl.core.node_keys import NODE_KEY_NAMESPACE, node_key_secret, parse_node_key_text
from eipctl.sandbox.testbed import LocalBed
from eipctl.sandbox.testbed.checks import (
    forget_node_keys,
    placement,
    spread_services,
    wait_node_keys,
)

pytestmark = [pytest.mark.netns]

SRC = Path(__file__).resolve().parents[2] / "src"
FORGER_NODE = "node-2"
SECONDS = 5.0

FORGER = r"""
import socket, sys, time
from eipctl.core.liveness_wire import Flag, Keyring, Kind, Packet, WireError, decode, encode
from eipctl.sandbox.forgery import Forger
key_file, node_key_file, me, victim, victim_ip, mode, seconds = sys.argv[1:8]
cluster = Keyring.from_text(open(key_file).read())
ring = cluster.with_node_keys({me: bytes.fromhex(open(node_key_file).read().strip())}, required=False)
flags = Flag.EXTENDED | (Flag.FENCED if mode == "fenced" else Flag.NONE)
forger = Forger()
seen = sent = 0
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    got = forger.next_liveness()
    if got is None:
        continue
    scheduler, _, sport, payload = got
    try:
        probe = decode(payload, ring)  # a scheduler's probe of this node
    except WireError:
        continue
    if probe.kind not in (Kind.PROBE, Kind.PROBE_EXT) or probe.node != me:
        continue
    seen += 1
    forged = Packet(Kind.REPLY, victim, probe.session, probe.seq, flags)
    for kid in (None, ring.node_key_ids[0]):  # under the cluster key, and under my own
        forger.send(socket.inet_aton(victim_ip), scheduler, sport, encode(forged, ring, key_id=kid))
        sent += 1
    if seen == 1:
        print("forging", flush=True)
print(seen, sent)
"""


class _Forgery:
    """The forger running in node-2's namespace for `SECONDS` from its start: `started`
    returns once it has forged its first round (a story that kills a node does it after
    that, so no probe round goes unanswered between the kill and the forger's start)."""

    def __init__(self, bed: LocalBed, victim: str, mode: str) -> None:
        me = bed.network.node(FORGER_NODE)
        args = [
            str(bed.key_file),
            str(bed.run_dir / f"{FORGER_NODE}.node-key"),
            FORGER_NODE,
            victim,
            bed.network.node(victim).ip4,
            mode,
            str(SECONDS),
        ]
        self._proc = subprocess.Popen(
            ["ip", "netns", "exec", me.ns.name, sys.executable, "-c", FORGER, *args],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(SRC)},
        )  # fmt: skip

    def started(self) -> None:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()  # the forger's first round, or its end
        assert line.strip() == "forging", f"the forger forged nothing: {line!r}"

    def finished(self) -> tuple[int, int]:
        """(probes seen, replies forged), once it has run its `SECONDS`."""
        out, _ = self._proc.communicate(timeout=SECONDS + 30)
        assert self._proc.returncode == 0, f"the forger failed: {self._proc.returncode}"
        seen, sent = out.splitlines()[-1].split()  # after "forging", unless read already
        return int(seen), int(sent)

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _forge(bed: LocalBed, victim: str, mode: str) -> tuple[int, int]:
    """Run the forger for `SECONDS`: (probes seen, replies forged)."""
    forgery = _Forgery(bed, victim, mode)
    try:
        return forgery.finished()
    finally:
        forgery.kill()


def _verdicts(bed: LocalBed, offsets: dict[str, int], event: str, node: str) -> int:
    """The schedulers' log lines ``event`` about ``node`` since ``offsets``."""
    return sum(
        1
        for s in bed.schedulers
        for line in s.log_since(offsets[s.name]).splitlines()
        if f"event='{event}'" in line and f" node='{node}'" in line
    )


def _keys_known(bed: LocalBed) -> None:
    wait_node_keys(bed, "node_key.learned", {}, 20)


def _owner_refusals(bed: LocalBed, offsets: dict[str, int]) -> int:
    """Scheduler log lines reporting replies refused as ``owner`` (another node's key, or
    the cluster key for a node with a key of its own; reported at most every few seconds)."""
    return sum(s.log_since(offsets[s.name]).count("reason='owner'") for s in bed.schedulers)


def _hand_keys_over_again(bed: LocalBed, offsets: dict[str, int]) -> None:
    """Each node's Secret as its controller wrote it (they write it once per start; a
    controller restarted since has written its own already)."""
    for name in bed.node_names:
        key = parse_node_key_text((bed.run_dir / f"{name}.node-key").read_text())
        secret = node_key_secret(name, key, NODE_KEY_NAMESPACE)
        bed.kube.kubectl("apply", "-f", "-", stdin=json.dumps(secret))
    wait_node_keys(bed, "node_key.learned", offsets, 20)


def test_a_taken_over_node_cannot_get_a_live_neighbour_declared_fenced(
    local_bed: LocalBed,
) -> None:
    """Its FENCED replies for node-0 reach the schedulers (the first of a round wins, so
    most lose the race to node-0's own; those that win are refused for their key)."""
    bed = local_bed
    placed = spread_services(bed, "forge")
    _keys_known(bed)
    offsets = {s.name: s.log_size() for s in bed.schedulers}
    seen, sent = _forge(bed, "node-0", "fenced")
    time.sleep(1.0)
    print(f"forger saw {seen} probe rounds, sent {sent} FENCED replies for node-0")
    assert seen >= 10 * SECONDS / 2  # probes every 100 ms from each replica: its chances
    assert _owner_refusals(bed, offsets) > 0, "no forged reply reached the judge"
    assert _verdicts(bed, offsets, "node.fenced_reply", "node-0") == 0
    assert _verdicts(bed, offsets, "node.dead", "node-0") == 0
    assert placement(bed.kube.claims()) == placed


def _kill_node_1_while_forging(bed: LocalBed, placed: dict[str, str]) -> tuple[int, float | None]:
    """node-1's controller SIGKILLed (its link stays up), the forger answering for it for
    `SECONDS`: (node.dead verdicts for node-1 meanwhile, seconds until its claims moved)."""
    victims = sorted(ip for ip, node in placed.items() if node == "node-1")
    assert victims
    offsets = {s.name: s.log_size() for s in bed.schedulers}
    forgery = _Forgery(bed, "node-1", "alive")
    try:
        forgery.started()  # answering for node-1 while it still answers too: harmless
        bed.controllers["node-1"].kill()
        killed = time.monotonic()
        seen, sent = forgery.finished()
        print(f"forger saw {seen} probe rounds, sent {sent} replies for the killed node-1")
        assert seen >= 10 * SECONDS / 2
        deaths = _verdicts(bed, offsets, "node.dead", "node-1")
        moved_at: float | None = None
        claims = placement(bed.kube.claims())
        if all(claims.get(ip) not in (None, "node-1") for ip in victims):
            moved_at = time.monotonic() - killed
        return deaths, moved_at
    finally:
        forgery.kill()
        bed.start_controller("node-1")
        bed.wait_in_service(["node-1"], 20)


def test_a_taken_over_node_cannot_keep_a_killed_neighbour_alive(local_bed: LocalBed) -> None:
    """With node keys the forger's replies for node-1 are refused: node-1 is declared dead
    and its claims move as in any failover. The control, without node keys: the same forger
    keeps the killed node-1 alive for as long as it forges (what the issue measured)."""
    bed = local_bed
    placed = spread_services(bed, "undead")
    _keys_known(bed)
    deaths, moved_after = _kill_node_1_while_forging(bed, placed)
    assert deaths > 0, "the forger kept the killed node-1 alive"
    assert moved_after is not None, "node-1's claims did not move"
    print(f"with node keys: node-1 declared dead, its claims moved within {SECONDS:g}s")

    forgotten_at = forget_node_keys(bed, NODE_KEY_NAMESPACE)
    try:
        placed = spread_services(bed, "undead-control")
        deaths, moved_after = _kill_node_1_while_forging(bed, placed)
        print(f"without node keys: {deaths} node.dead verdicts for node-1 while forged for")
        assert deaths == 0 and moved_after is None, "the forger is no forger"
    finally:
        _hand_keys_over_again(bed, forgotten_at)
