"""Stories of failure on the node side: a node dies, a node is cut off from the API, an
address is removed by hand. The client must keep being served, by exactly one node."""

from __future__ import annotations

import time

import pytest

from eipctl.sandbox.testbed import LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
    wait_moved_off,
)

pytestmark = [pytest.mark.netns]

ANNOUNCE_WINDOW = 3 * 1.1  # controller defaults: --announce-count 3, --announce-interval 1.1s


def _spread_services(bed: LocalBed, count: int, prefix: str) -> dict[str, str]:
    """`count` Services, Bound and answering; returns {ip: node}."""
    names = [f"{prefix}-{i}" for i in range(count)]
    create_services(bed, names)
    ips = wait_for_ips(bed, names)
    placed = wait_bound(bed, ips.values())
    wait_answered_by(bed, placed)
    return placed


def _busiest(placed: dict[str, str]) -> str:
    nodes = sorted(set(placed.values()))
    return max(nodes, key=lambda n: list(placed.values()).count(n))


def test_a_killed_nodes_ips_answer_again_from_live_nodes_and_nothing_else_moves(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    before = _spread_services(bed, 6, "kill")
    victim = _busiest(before)
    moving = sorted(ip for ip, n in before.items() if n == victim)
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
    bed.kube.wait_heartbeating([victim])
    time.sleep(1.0)
    assert placement(bed.kube.claims()) == after
    assert bed.node(victim).external_addresses() == set()


def test_a_node_cut_off_from_the_api_withdraws_by_itself_and_never_answers_alongside(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    before = _spread_services(bed, 6, "cut")
    victim = _busiest(before)
    moving = sorted(ip for ip, n in before.items() if n == victim)
    watch = bed.client.start_arp_watch(moving, period=0.05)

    bed.cut_from_api(victim)

    try:
        # it fences itself: its addresses go, though nobody could tell it over the API
        wait_for(
            lambda: not bed.node(victim).external_addresses(),
            10,
            what=f"{victim} to remove its own addresses",
        )
        after = wait_moved_off(bed, moving, victim)
        wait_answered_by(bed, {ip: after[ip] for ip in moving}, timeout=10)
        time.sleep(0.5)  # keep listening a little after the move settled
    finally:
        bed.client.stop_arp_watch(watch)

    for ip in moving:
        assert bed.holders(ip) == [after[ip]]
        assert watch.all_macs(ip) <= {bed.mac_of(victim), bed.mac_of(after[ip])}
        double = watch.longest_double_answer(ip)
        print(f"{ip}: two MACs answered ARP for {double:.2f}s at most")
        assert double <= ANNOUNCE_WINDOW, f"{ip}: two MACs answered ARP for {double:.2f}s"

    # back on the API, the node does not take its old IPs back (no flapping)
    bed.reconnect_to_api(victim)
    time.sleep(2.0)
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
