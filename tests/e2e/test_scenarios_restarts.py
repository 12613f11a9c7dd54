"""Stories of restarts: the scheduler leader dies, a controller restarts, the API server
restarts and drops every watch. Service must go on: nothing placed is lost, new work is done."""

from __future__ import annotations

import time
from typing import Any

import pytest

from eipctl.sandbox.testbed import LEASE_NAMESPACE, LocalBed, wait_for
from eipctl.sandbox.testbed.checks import (
    create_services,
    ips_held_twice,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)


def test_the_standby_scheduler_takes_over_and_places_a_new_service(bed: Any) -> None:
    bed.kube.create_service("before-handover")
    wait_bound(bed, [bed.wait_for_ip("before-handover")])
    leader = bed.leader("scheduler")

    leader.kill()
    killed_at = time.monotonic()
    bed.kube.create_service("after-handover")

    new_leader = wait_for(
        lambda: (
            (h := bed.kube.lease_holder("eipctl-scheduler", LEASE_NAMESPACE)) != leader.name and h
        ),
        10,
        what="another scheduler to hold the Lease",
    )
    ip = bed.wait_for_ip("after-handover")
    node = wait_bound(bed, [ip], timeout=10)[ip]
    print(
        f"{leader.name} killed; {new_leader} placed {ip} on {node} after "
        f"{time.monotonic() - killed_at:.2f}s"
    )
    if bed.local:
        bed.wait_answering(ip, by=node)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_a_restarted_controllers_ips_never_stop_answering(local_bed: LocalBed, how: str) -> None:
    bed = local_bed
    names = [f"steady-{i}" for i in range(len(bed.node_names))]
    create_services(bed, names)
    placed = wait_bound(bed, wait_for_ips(bed, names).values())
    wait_answered_by(bed, placed)
    node = sorted(placed.values())[0]
    mine = sorted(ip for ip, n in placed.items() if n == node)
    controller = bed.controllers[node]
    series = bed.client.start_probes(mine, interval=0.02)
    scheduler_logs = {p.name: p.log_size() for p in bed.schedulers}

    try:
        time.sleep(0.5)
        stopped_at = time.monotonic()
        if how == "SIGTERM":
            controller.terminate(grace=10)
        else:
            controller.kill()
        bed.start_controller(node)
        bed.wait_in_service([node], 15)  # registered, answering the probes, a pass done
        back_after = time.monotonic() - stopped_at
        # past the address lifetime (2 s): only a renewing new controller keeps them
        time.sleep(4.0)
    finally:
        bed.client.stop_probes(series)
    print(f"{node}: controller {how} -> back in service after {back_after:.2f}s")

    for ip in mine:
        outage = series.longest_outage(ip)
        print(
            f"{ip} on {node}: longest outage {outage * 1000:.0f} ms over {len(series.of(ip))} "
            f"probes (prober paused at most {series.longest_probe_pause(ip) * 1000:.0f} ms)"
        )
        if how == "SIGTERM":
            # a clean stop announces a restart grace: the scheduler must not move anything
            assert series.answerers(ip) == [node], (
                f"{ip} moved while {node}'s controller restarted: answered by "
                f"{series.answerers(ip)}; back in service after {back_after:.2f}s; "
                f"the scheduler said: {bed.log_lines(scheduler_logs, 'object.event', 'node.dead')}"
            )
        # SIGKILL gives no grace: if the restart outlasts the liveness timeout the IPs may move
        # (take-over by MAC, make before break), but they must never stop answering
        assert outage <= 0.1, f"{ip} stopped answering for {outage * 1000:.0f} ms"
    if how == "SIGTERM":
        assert placement(bed.kube.claims()) == placed
    wait_bound(bed, mine, timeout=5)  # wherever they are now, they are held


def test_an_api_restart_that_drops_every_watch_loses_nothing(local_bed: LocalBed) -> None:
    bed = local_bed
    old = [f"old-{i}" for i in range(5)]
    create_services(bed, old)
    before_ips = wait_for_ips(bed, old)
    before = wait_bound(bed, before_ips.values())
    wait_answered_by(bed, before)

    bed.restart_api()
    create_services(bed, ["new-0", "new-1"])
    bed.kube.delete_service("old-4")
    bed.drop_watches()
    bed.kube.create_service("new-2")

    new_ips = wait_for_ips(bed, ["new-0", "new-1", "new-2"])
    kept = {name: ip for name, ip in before_ips.items() if name != "old-4"}
    assert wait_for_ips(bed, kept) == kept, "the old Services kept their IPs"
    placed = wait_bound(bed, [*kept.values(), *new_ips.values()])
    assert {ip: placed[ip] for ip in kept.values()} == {ip: before[ip] for ip in kept.values()}
    # its IP is released (and may already serve a new Service: lowest free first)
    wait_for(
        lambda: (
            not any("default/old-4" in c["spec"].get("services", []) for c in bed.kube.claims())
        ),
        15,
        what="the deleted Service's claim released",
    )
    claims = bed.kube.claims()
    assert ips_held_twice(claims) == []
    assert len(claims) == len(kept) + len(new_ips)
    wait_answered_by(bed, placed)
