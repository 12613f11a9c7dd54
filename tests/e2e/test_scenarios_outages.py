"""Stories of the control plane going away while the nodes are fine: the API server is
upgraded, hangs, a control-plane node reboots, the whole control plane is down, a node dies
while nobody can write. The external IPs must keep answering from the nodes that hold them,
nothing may move, and after the control plane returns every IP is held by exactly one node
(docs/liveness.md, "Outages"). The client connects to every IP every 20 ms."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from eipctl.sandbox.testbed import LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    placement,
    spread_services,
    wait_answered_by,
    wait_moved_off,
)
from eipctl.sandbox.testbed.client import ProbeSeries

pytestmark = [pytest.mark.netns]

OUTAGE = 15.0  # the short outage; benchmarks/bench_outage.py also runs 10 minutes
DARK_MOST = 0.1  # no IP may go unanswered longer than this (the client probes every 20 ms)
AFTER = 3.0  # keep watching after the API returns: a move would come within this


def _spread(bed: LocalBed, prefix: str) -> dict[str, str]:
    placed = spread_services(bed, prefix)
    bed.wait_peers_known()  # a controller that has not listed its peers cannot hold
    return placed


def _through(
    bed: LocalBed, placed: dict[str, str], down: Callable[[], None], up: Callable[[], None]
) -> ProbeSeries:
    """Probe every IP, take the control plane down for `OUTAGE`, bring it back, watch on."""
    series = bed.client.start_probes(placed, interval=0.02)
    try:
        time.sleep(0.5)
        down()
        time.sleep(OUTAGE)
        up()
        time.sleep(AFTER)
    finally:
        bed.client.stop_probes(series)
    return series


def _nothing_went_dark_or_moved(bed: LocalBed, placed: dict[str, str], series: ProbeSeries) -> None:
    for ip, node in placed.items():
        dark = series.longest_loss(ip)
        print(f"{ip} on {node}: longest dark time {dark * 1000:.0f} ms")
        assert dark <= DARK_MOST, f"{ip} went dark for {dark:.2f}s"
        assert series.answerers(ip) == [node], f"{ip} was answered by {series.answerers(ip)}"
    after = wait_for(lambda: placement(bed.kube.claims()) or None, 10, what="the claims")
    assert after == placed, "a claim moved"
    for ip, node in placed.items():
        assert bed.holders(ip) == [node], f"{ip} is held by {bed.holders(ip)}"


def test_the_api_server_is_upgraded_and_every_ip_keeps_answering(local_bed: LocalBed) -> None:
    """The old API server process goes (connections refused), the new one comes 15 s later."""
    bed = local_bed
    placed = _spread(bed, "upgrade")
    series = _through(bed, placed, lambda: bed.stop_api("refuse"), bed.start_api)
    _nothing_went_dark_or_moved(bed, placed, series)
    # each node tells, once the API is back, that it kept its addresses meanwhile
    for node in bed.node_names:
        wait_for(
            lambda n=node: any(
                e.get("reason") == "ApiReturned" for e in bed.kube.events_for(n, "default")
            ),
            15,
            what=f"{node}'s ApiReturned Event",
        )


def test_an_api_server_that_hangs_takes_no_ip_down(local_bed: LocalBed) -> None:
    """SIGSTOP: every request hangs, as on an overloaded server or one whose etcd is gone."""
    bed = local_bed
    placed = _spread(bed, "hang")
    series = _through(bed, placed, lambda: bed.stop_api("freeze"), bed.start_api)
    _nothing_went_dark_or_moved(bed, placed, series)


def test_a_control_plane_node_reboots_and_every_ip_keeps_answering(local_bed: LocalBed) -> None:
    """The API server and one scheduler replica go together (SIGKILL for the scheduler); both
    come back 15 s later."""
    bed = local_bed
    placed = _spread(bed, "reboot")
    series = _through(bed, placed, bed.reboot_control_plane_node, bed.control_plane_node_back)
    _nothing_went_dark_or_moved(bed, placed, series)


def test_the_whole_control_plane_down_takes_no_ip_down(local_bed: LocalBed) -> None:
    """The API server and every scheduler replica frozen: nobody probes, nobody can write.
    The controllers ask each other, find that none hears a leader, and hold."""
    bed = local_bed
    placed = _spread(bed, "cp")
    since = {p.name: p.log_size() for p in bed.processes()}
    series = _through(bed, placed, bed.stop_control_plane, bed.start_control_plane)
    _nothing_went_dark_or_moved(bed, placed, series)
    assert bed.log_lines(since, "outage.holding"), "the controllers said why they hold"
    assert bed.log_lines(since, "node.fenced") == []


def test_a_node_killed_while_the_api_is_down_moves_once_the_api_returns(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    placed = _spread(bed, "killdown")
    victim = max(set(placed.values()), key=list(placed.values()).count)
    moving = sorted(ip for ip, n in placed.items() if n == victim)
    staying = {ip: n for ip, n in placed.items() if n != victim}
    series = bed.client.start_probes(placed, interval=0.02)
    try:
        bed.stop_api("freeze")
        time.sleep(0.5)
        bed.kill_node(victim)
        time.sleep(5.0)  # nobody can write: its IPs stay dark, nothing else moves
        back = time.monotonic()
        bed.start_api()
        after = wait_moved_off(bed, moving, victim, timeout=15)
        wait_answered_by(bed, {ip: after[ip] for ip in placed}, timeout=10)
        time.sleep(0.3)
    finally:
        bed.client.stop_probes(series)
    for ip in moving:
        took = series.first_answer_after(ip, back, by=after[ip])
        assert took is not None
        print(f"{ip}: answered by {after[ip]} {took - back:.2f}s after the API returned")
        assert took - back <= 1.5 + 1.0, f"{ip} answered {took - back:.2f}s after the API"
    for ip, node in staying.items():
        assert after[ip] == node, f"{ip} moved from live {node}"
        assert series.longest_loss(ip) <= DARK_MOST
