"""The story of a node taken over that lies to a cut-off neighbour ([hostile];
docs/liveness.md, "Peer keys"). Five nodes. node-0 loses the API and the schedulers, and
its peer queries reach only node-4, whose root has stopped node-4's own controller and
answers every query node-0 sends it: "no writer heard", in its own name and, from node-1's,
node-2's and node-3's addresses (raw IP, spoofed source), in theirs, under the cluster key
and under node-4's pair key with node-0. Under the cluster key alone that is five of five
saying the control plane is down: node-0 would hold while the leader moves its claims, two
holders of each IP. With peer keys only node-4's own answer counts, two of five is no
quorum, and node-0 lets go as any node cut off does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eipctl.sandbox.namespaces import nft_unavailable, why_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, wait_for
from eipctl.sandbox.testbed.checks import placement, spread_services, wait_moved_off

pytestmark = [pytest.mark.netns]

SRC = Path(__file__).resolve().parents[2] / "src"
NODES = 5
VICTIM, LIAR = "node-0", "node-4"
HONEST = ("node-1", "node-2", "node-3")
CUT_TABLE = "eipctl_e2e_peer_cut"
API_FENCE_TIMEOUT = 2.5  # controller --fence-timeout: no API answer this long -> fence
SLACK = 1.5  # a loaded 2-core machine running two beds

LIAR_SCRIPT = r"""
import base64, socket, sys, time
from eipctl.core.liveness_wire import NEVER_MS, Flag, Keyring, Kind, Packet, WireError, decode, encode, peer_ext
from eipctl.core.node_keys import parse_node_key_text
from eipctl.core.peer_keys import PeerIdentity
from eipctl.sandbox.forgery import Forger
key_file, node_key_file, me, victim, victim_ip, victim_public, honest, seconds, my_ip = sys.argv[1:10]
cluster = Keyring.from_text(open(key_file).read())
own = PeerIdentity(me, parse_node_key_text(open(node_key_file).read()))
ring = cluster.with_peer_keys({victim: own.pair_key(victim, base64.b64decode(victim_public))})
pair_id = ring.signer(victim, Kind.PEER_QUERY)[0]
speakers = [(me, my_ip)] + [tuple(x.split("=")) for x in honest.split(",")]
forger = Forger()
print("ready", flush=True)
seen = sent = 0
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    got = forger.next_liveness()
    if got is None or got[0] != socket.inet_aton(victim_ip):
        continue
    source, _, sport, payload = got
    try:
        query = decode(payload, ring)
    except WireError:
        continue
    if query.kind != Kind.PEER_QUERY or query.node != me:
        continue
    seen += 1
    for name, address in speakers:
        lie = Packet(Kind.PEER_REPLY, name, query.session, query.seq, Flag.NONE, peer_ext(NEVER_MS))
        for kid in (pair_id, None):  # under our pair key with the victim, then the cluster key
            body = encode(lie, ring, key_id=kid, key_owner=victim if kid else "")
            forger.send(socket.inet_aton(address), source, sport, body)
            sent += 1
print(seen, sent)
"""


@pytest.fixture(scope="module")
def five_nodes(request: pytest.FixtureRequest) -> Iterator[LocalBed]:
    """A bed of this story's own: five nodes, so that one liar is not a quorum by itself."""
    if os.environ.get("EIPCTL_E2E_KUBECONFIG"):
        pytest.skip("forges packets from inside a node: only on the local bed")
    for reason in (why_unavailable(), nft_unavailable()):
        if reason is not None:
            pytest.skip(reason)
    with LocalBed(BedOptions(nodes=NODES)) as bed:
        yield bed
        bed.options.keep_logs = bool(
            request.session.testsfailed or os.environ.get("EIPCTL_E2E_KEEP_LOGS")
        )


def _peer_keys_listed(bed: LocalBed, node: str) -> bool:
    """Whether ``node``'s controller holds a pair key with every other node."""
    proc = bed.controllers[node]
    wanted = f"pair_keyed={NODES - 1}"
    return any(
        "peers.keys" in line and wanted in line
        for line in proc.log_since(proc.last_start_offset).splitlines()
    )


def _cut_queries_to_honest_peers(bed: LocalBed) -> None:
    """node-0's datagrams to node-1..3's liveness port are dropped on their way out (so they
    never answer); what comes *from* their addresses still gets in (the liar's)."""
    rules = [f"add table inet {CUT_TABLE}"]
    rules.append(
        f"add chain inet {CUT_TABLE} output {{ type filter hook output priority -10; policy accept; }}"
    )
    for name in HONEST:
        peer = bed.network.node(name)
        rules.append(f"add rule inet {CUT_TABLE} output ip daddr {peer.ip4} udp dport 9473 drop")
        rules.append(f"add rule inet {CUT_TABLE} output ip6 daddr {peer.ip6} udp dport 9473 drop")
    bed.network.node(VICTIM).ns.exec("nft", "-f", "-", stdin="\n".join(rules) + "\n")


def _heal_queries(bed: LocalBed) -> None:
    table = f"inet {CUT_TABLE}"
    bed.network.node(VICTIM).ns.exec(
        "nft", "-f", "-", stdin=f"add table {table}\ndelete table {table}\n"
    )


def _start_liar(bed: LocalBed, seconds: float) -> subprocess.Popen[str]:
    victim_public = bed.kube.kubectl(
        "get", "ipnode", VICTIM, "-o", "jsonpath={.spec.livenessPeerKey}"
    ).strip()
    assert victim_public, f"{VICTIM} publishes no peer key"
    honest = ",".join(f"{n}={bed.network.node(n).ip4}" for n in HONEST)
    args = [
        str(bed.key_file),
        str(bed.run_dir / f"{LIAR}.node-key"),
        LIAR,
        VICTIM,
        bed.network.node(VICTIM).ip4,
        victim_public,
        honest,
        str(seconds),
        bed.network.node(LIAR).ip4,
    ]
    return subprocess.Popen(
        ["ip", "netns", "exec", bed.network.node(LIAR).ns.name, sys.executable, "-c",
         LIAR_SCRIPT, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )  # fmt: skip


def test_a_taken_over_node_cannot_keep_a_cut_off_neighbour_holding(
    five_nodes: LocalBed,
) -> None:
    bed = five_nodes
    bed.wait_in_service(bed.node_names, 30)  # then the ten Services spread over all five
    placed = spread_services(bed, "lie", count=10)
    bed.wait_peers_known()
    wait_for(
        lambda: all(_peer_keys_listed(bed, n) for n in bed.node_names),
        30,
        interval=0.2,
        what="every controller to hold a pair key with every peer",
    )
    held = sorted(ip for ip, node in placed.items() if node == VICTIM)
    assert held, f"nothing placed on {VICTIM}: {placed}"
    assert sorted(bed.node(VICTIM).external_addresses()) == held
    logs = {p.name: p.log_size() for p in bed.processes()}
    controller = f"controller-{VICTIM}"

    bed.freeze_controller(LIAR)  # its root silences the honest controller of node-4
    liar = _start_liar(bed, seconds=API_FENCE_TIMEOUT + 4 * SLACK)
    watch = bed.client.start_arp_watch(held, period=0.05)
    try:
        assert liar.stdout is not None
        assert liar.stdout.readline().strip() == "ready"  # it sniffs before node-0 asks
        _cut_queries_to_honest_peers(bed)
        bed.cut_from_api(VICTIM)
        bed.cut_liveness(VICTIM, only="schedulers")
        cut_at = time.monotonic()
        wait_for(
            lambda: not bed.node(VICTIM).external_addresses(),
            API_FENCE_TIMEOUT + 2 * SLACK,
            interval=0.02,
            what=f"{VICTIM} to let go although node-4 lies for everyone",
        )
        let_go = time.monotonic() - cut_at
        after = wait_moved_off(bed, held, VICTIM)
        time.sleep(0.3)  # the watch sees the new holders answer
        out, err = liar.communicate(timeout=API_FENCE_TIMEOUT + 4 * SLACK + 30)
        assert liar.returncode == 0, err
        seen, sent = (int(x) for x in out.split())  # the line after "ready"
    finally:
        bed.client.stop_arp_watch(watch)
        if liar.poll() is None:
            liar.kill()
            liar.wait()
        _heal_queries(bed)
        bed.heal()
    print(f"{VICTIM} let go {let_go:.2f}s after the cut; the liar saw {seen} queries, sent {sent}")
    assert seen > 0 and sent == seen * 2 * (1 + len(HONEST)), "the liar never answered"
    refused = bed.log_lines({controller: logs[controller]}, "reason='owner'")
    assert refused, f"no forged answer reached {VICTIM}"
    since = {controller: logs[controller]}
    holds = [line for line in bed.log_lines(since, "outage.hold") if "reason='quorum'" in line]
    assert holds == [], "node-0 held on the liar's quorum"
    verdicts = bed.log_lines(since, "outage.unconfirmed")
    assert verdicts and all("peers='unknown'" in line for line in verdicts)  # 2 of 5: no quorum
    for ip in held:
        assert after[ip] != VICTIM
        assert watch.all_macs(ip) <= {bed.mac_of(VICTIM), bed.mac_of(after[ip])}
        double = watch.longest_double_answer(ip)
        print(f"{ip}: two MACs answered ARP for {double:.2f}s at most")
        assert double <= API_FENCE_TIMEOUT + SLACK, f"{ip}: two holders for {double:.2f}s"
    bed.wait_in_service(bed.node_names, 30)
    assert placement(bed.kube.claims()).keys() == placed.keys()
