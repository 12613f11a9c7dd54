"""Stories of failure on the node side: a node dies, a node is cut off from the API, from the
liveness path, or from both, an address is removed by hand. The client must keep being
served, by exactly one node. The partition cases and their timings are docs/liveness.md's
("Every partition case")."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from eipctl.sandbox.namespaces import nft_unavailable
from eipctl.sandbox.testbed import ArpWatch, LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    placement,
    spread_services,
    wait_answered_by,
    wait_bound,
    wait_moved_off,
)

pytestmark = [pytest.mark.netns]

ANNOUNCE_WINDOW = 3 * 1.1  # controller defaults: --announce-count 3, --announce-interval 1.1s
API_FENCE_TIMEOUT = 2.5  # controller --fence-timeout: no API answer this long -> fence
API_CHECK_INTERVAL = 1.0  # controller --api-check-interval: the last answer may be this old
PROBE_SILENCE = 0.4  # controller --probe-silence (= the scheduler's --liveness-timeout)
HEARTBEAT_INTERVAL = 10.0  # controller --heartbeat-interval
SLACK = 1.0  # a loaded 2-core machine: process wake-ups, netlink, the watch event


@pytest.fixture
def nft() -> None:
    """The liveness cuts are nftables rules in the node's namespace."""
    if (reason := nft_unavailable()) is not None:
        pytest.skip(f"cutting the liveness path {reason} (apt-get install nftables)")


def _busiest(placed: dict[str, str]) -> str:
    nodes = sorted(set(placed.values()))
    return max(nodes, key=lambda n: list(placed.values()).count(n))


def _spread_and_pick(bed: LocalBed, prefix: str) -> tuple[dict[str, str], str, list[str]]:
    """Six Services spread and answering: ({ip: node}, the busiest node, its IPs)."""
    before = spread_services(bed, prefix)
    victim = _busiest(before)
    return before, victim, sorted(ip for ip, n in before.items() if n == victim)


def _cut_until_fenced(
    bed: LocalBed, victim: str, moving: list[str], *cuts: Callable[[str], None]
) -> tuple[float, dict[str, str], ArpWatch]:
    """Apply `cuts` to `victim` under an ARP watch of its IPs; wait until it removed its own
    addresses, its IPs are Bound elsewhere and answer from there. Returns (seconds from the
    cut to the removal, {ip: node} of all Bound claims, the watch)."""
    watch = bed.client.start_arp_watch(moving, period=0.05)
    cut_at = time.monotonic()
    for cut in cuts:
        cut(victim)
    try:
        wait_for(
            lambda: not bed.node(victim).external_addresses(),
            10,
            interval=0.02,
            what=f"{victim} to remove its own addresses",
        )
        fenced_in = time.monotonic() - cut_at
        after = wait_moved_off(bed, moving, victim)
        wait_answered_by(bed, {ip: after[ip] for ip in moving}, timeout=10)
        time.sleep(0.5)  # keep listening a little after the move settled
    finally:
        bed.client.stop_arp_watch(watch)
    return fenced_in, after, watch


def _one_holder_each(
    bed: LocalBed, watch: ArpWatch, victim: str, after: dict[str, str], most: float
) -> None:
    """Each watched IP is held by its new node alone, and two MACs (the victim's and the new
    holder's, no other) answered ARP for it for `most` seconds at most."""
    for ip in watch.ips:
        assert bed.holders(ip) == [after[ip]]
        assert watch.all_macs(ip) <= {bed.mac_of(victim), bed.mac_of(after[ip])}
        double = watch.longest_double_answer(ip)
        print(f"{ip}: two MACs answered ARP for {double:.2f}s at most")
        assert double <= most, f"{ip}: two MACs answered ARP for {double:.2f}s"


def test_a_killed_nodes_ips_answer_again_from_live_nodes_and_nothing_else_moves(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    before, victim, moving = _spread_and_pick(bed, "kill")
    staying = {ip: n for ip, n in before.items() if n != victim}
    series = bed.client.start_probes(before, interval=0.05)

    killed_at = time.monotonic()
    bed.kill_node(victim)

    try:
        after = wait_moved_off(bed, moving, victim)
        wait_answered_by(bed, {ip: after[ip] for ip in before}, timeout=10)
        time.sleep(0.3)  # the probe series sees the new answers too
    finally:
        bed.client.stop_probes(series)

    for ip in moving:
        assert after[ip] in bed.live_nodes
        # the client's neighbour entry follows the announcement, not an ARP timeout
        assert bed.network.client_neighbour(ip)[0] == bed.mac_of(after[ip])
        assert bed.client.arp_who_has(ip) == {bed.mac_of(after[ip])}, "exactly one holder"
        took = series.first_answer_after(ip, killed_at, by=after[ip])
        print(
            f"{ip}: {victim} -> {after[ip]}, answering after", took and round(took - killed_at, 2)
        )
    for ip, node in staying.items():
        assert after[ip] == node, f"{ip} moved from live {node} to {after[ip]}"
        assert series.answerers(ip) == [node], f"{ip} was answered by {series.answerers(ip)}"

    # the node comes back: nothing moves back to it (no flapping), nothing answers twice
    bed.revive_node(victim)
    bed.wait_in_service([victim])
    time.sleep(1.0)
    assert placement(bed.kube.claims()) == after
    assert bed.node(victim).external_addresses() == set()


def test_a_node_cut_off_from_the_api_only_keeps_its_ips_and_nothing_moves(
    local_bed: LocalBed,
) -> None:
    """The leader still hears it and vouches for what it holds (its probes carry the digest of
    the node's claims): holding is safe, so its IPs keep answering; docs/liveness.md. Vouched
    for, it makes no API request but its heartbeat, so it learns that it holds through an
    outage (`outage.hold`, the gauge) when that fails: within a heartbeat interval and the
    heartbeat's timeout of the cut (docs/metrics.md)."""
    bed = local_bed
    before, victim, _ = _spread_and_pick(bed, "cut")
    series = bed.client.start_probes(before, interval=0.02)
    logs = {p.name: p.log_size() for p in bed.processes()}
    controller = f"controller-{victim}"
    try:
        bed.cut_from_api(victim)
        cut_at = time.monotonic()
        wait_for(
            lambda: bed.log_lines({controller: logs[controller]}, "outage.hold"),
            HEARTBEAT_INTERVAL + API_FENCE_TIMEOUT + SLACK,
            what=f"{controller} to report that it holds through its API outage",
        )
        time.sleep(max(0.0, 10.0 - (time.monotonic() - cut_at)) + 2.0)
        bed.reconnect_to_api(victim)
        time.sleep(2.0)
    finally:
        bed.client.stop_probes(series)
    for ip, node in before.items():
        dark = series.longest_loss(ip)
        print(f"{ip} on {node}: longest dark time {dark * 1000:.0f} ms")
        assert dark <= 0.1, f"{ip} went dark for {dark:.2f}s"
        assert series.answerers(ip) == [node]
        assert bed.holders(ip) == [node]
    assert placement(bed.kube.claims()) == before
    assert bed.log_lines({controller: logs[controller]}, "node.fenced") == []


def test_a_node_cut_off_from_the_api_lets_go_when_a_change_it_cannot_see_comes(
    local_bed: LocalBed,
) -> None:
    """One of its Services is deleted while it cannot see the API: the leader's digest no
    longer matches its claims, it cannot relist, so it fences and its other IPs move."""
    bed = local_bed
    _, victim, moving = _spread_and_pick(bed, "change")
    gone = moving[0]
    service = next(
        name for name in (f"change-{i}" for i in range(6)) if bed.kube.external_ips(name) == [gone]
    )
    watch = bed.client.start_arp_watch(moving[1:], period=0.05)
    try:
        bed.cut_from_api(victim)
        time.sleep(3.0)  # past --fence-timeout: it holds because the leader vouches for it
        assert bed.holders(moving[-1]) == [victim]
        changed_at = time.monotonic()
        bed.kube.delete_service(service)
        wait_for(
            lambda: not bed.node(victim).external_addresses(),
            10,
            interval=0.02,
            what=f"{victim} to let go",
        )
        fenced_in = time.monotonic() - changed_at
        after = wait_moved_off(bed, moving[1:], victim)
        wait_answered_by(bed, {ip: after[ip] for ip in moving[1:]}, timeout=10)
        time.sleep(0.5)
    finally:
        bed.client.stop_arp_watch(watch)
    print(f"{victim} let go {fenced_in:.2f}s after the change it could not see")
    assert fenced_in <= 1.0 + PROBE_SILENCE + SLACK  # MISMATCH_GRACE, the check, the pass
    _one_holder_each(bed, watch, victim, after, most=0.1)
    bed.reconnect_to_api(victim)
    time.sleep(2.0)
    assert bed.holders(gone) == []


def test_a_node_cut_off_from_the_liveness_path_hands_its_ips_over_and_keeps_its_api(
    local_bed: LocalBed, nft: None
) -> None:
    bed = local_bed
    before, victim, moving = _spread_and_pick(bed, "udp")
    staying = {ip: n for ip, n in before.items() if n != victim}
    watch = bed.client.start_arp_watch(moving, period=0.05)
    logs = {p.name: p.log_size() for p in bed.processes()}

    cut_at = time.monotonic()
    bed.cut_liveness(victim)

    try:
        # the schedulers hear nothing from it: dead; its claims move, and it learns so from
        # its watch (its API works) and removes its addresses
        after = wait_moved_off(bed, moving, victim)
        moved_in = time.monotonic() - cut_at
        wait_for(
            lambda: not bed.node(victim).external_addresses(),
            5,
            interval=0.02,
            what=f"{victim} to remove the addresses whose claims moved",
        )
        wait_answered_by(bed, {ip: after[ip] for ip in moving}, timeout=10)
        time.sleep(0.5)
    finally:
        bed.client.stop_arp_watch(watch)

    print(f"{victim}'s claims Bound elsewhere {moved_in:.2f}s after its liveness UDP was cut")
    assert moved_in <= PROBE_SILENCE + SLACK
    assert all(after[ip] in bed.live_nodes for ip in moving)
    # from the new holder's add until the old holder's watch event
    _one_holder_each(bed, watch, victim, after, most=0.5)
    for ip, node in staying.items():
        assert after[ip] == node, f"{ip} moved from live {node} to {after[ip]}"
    # it kept its API: it did not fence, it let go because its claims moved
    controller = bed.controllers[victim].name
    assert bed.log_lines({controller: logs[controller]}, "node.fenced") == []
    assert not bed.kube.live([victim])

    # the path back: live again, and nothing moves back to it
    bed.heal_liveness(victim)
    bed.wait_in_service([victim])
    time.sleep(1.0)
    assert placement(bed.kube.claims()) == {**before, **{ip: after[ip] for ip in moving}}
    assert bed.node(victim).external_addresses() == set()


def test_a_node_cut_off_from_api_and_liveness_fences_at_once(
    local_bed: LocalBed, nft: None
) -> None:
    bed = local_bed
    before, victim, moving = _spread_and_pick(bed, "both")

    # the probes stop, its API check fails: it fences now, not --fence-timeout later
    cuts = (bed.cut_from_api, bed.cut_liveness)
    fenced_in, after, watch = _cut_until_fenced(bed, victim, moving, *cuts)

    print(f"{victim} fenced {fenced_in:.2f}s after losing the API and the liveness path")
    # probe silence, then one API check that gets no answer (it waits at most the silence):
    # well before --fence-timeout after its last API answer, which would take 1.5-2.5 s
    at_once = 2 * PROBE_SILENCE + SLACK / 2
    assert fenced_in <= at_once, f"fenced after {fenced_in:.2f}s"
    # from the new holder's add until the fence
    _one_holder_each(bed, watch, victim, after, most=at_once)

    bed.heal_liveness(victim)
    bed.reconnect_to_api(victim)
    bed.wait_in_service([victim])
    time.sleep(1.0)
    assert placement(bed.kube.claims()) == {**before, **{ip: after[ip] for ip in moving}}
    for ip in moving:
        assert bed.holders(ip) == [after[ip]]


def test_an_address_removed_by_hand_comes_back_within_the_resync_interval(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    bed.kube.create_service("tampered")
    ip = bed.wait_for_ip("tampered")
    node = wait_bound(bed, [ip])[ip]
    bed.wait_answering(ip, by=node)

    bed.node(node).del_address(ip)
    removed_at = time.monotonic()

    wait_for(lambda: bed.holders(ip) == [node], 2.0 + 1.0, what=f"{ip} back on {node}")
    print(f"{ip} back on {node} after {time.monotonic() - removed_at:.2f}s (resync interval 2s)")
    bed.wait_answering(ip, by=node, timeout=5)


def test_a_node_that_reaches_its_peers_but_not_the_control_plane_lets_go(
    local_bed: LocalBed, nft: None
) -> None:
    """Cut from the API and from the schedulers, not from the other nodes: its peers say
    they hear the writing leader, so it is the one cut off, and it fences."""
    bed = local_bed
    before, victim, moving = _spread_and_pick(bed, "half")

    def cut_schedulers(name: str) -> None:
        bed.cut_liveness(name, only="schedulers")

    fenced_in, after, watch = _cut_until_fenced(
        bed, victim, moving, bed.cut_from_api, cut_schedulers
    )
    print(f"{victim} fenced {fenced_in:.2f}s after losing the API and the schedulers")
    assert fenced_in <= 2 * PROBE_SILENCE + SLACK
    _one_holder_each(bed, watch, victim, after, most=0.6)
    for ip, node in before.items():
        if ip not in moving:
            assert after[ip] == node


def test_a_node_that_reaches_the_control_plane_but_not_its_peers_keeps_everything(
    local_bed: LocalBed, nft: None
) -> None:
    """Only the node-to-node path is cut: the leader vouches for it, its peers are never
    asked; nothing goes dark, nothing moves."""
    bed = local_bed
    before, victim, _ = _spread_and_pick(bed, "peers")
    series = bed.client.start_probes(before, interval=0.02)
    try:
        bed.cut_liveness(victim, only="peers")
        time.sleep(5.0)
    finally:
        bed.client.stop_probes(series)
    for ip, node in before.items():
        assert series.longest_loss(ip) <= 0.1
        assert bed.holders(ip) == [node]
    assert placement(bed.kube.claims()) == before
