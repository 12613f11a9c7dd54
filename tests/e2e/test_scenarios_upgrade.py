"""Story: an upgrade rolls every workload (a new image in deploy/, `kubectl apply -k deploy/`)
while clients keep connecting to every external IP.

The DaemonSet replaces the controllers one node at a time (maxUnavailable 1): SIGTERM to the
old pod, the new one started, the next node only once it is ready. Then the scheduler and
allocator Deployments replace their replicas one at a time (maxSurge 0, maxUnavailable 1):
one stopped, its replacement started and back as leader or standby, then the other. Services
are created while the leaders are being replaced. Nothing may move, no IP may stop answering
for more than 100 ms at 20 ms probing, every Service keeps its IP, and the Services created
mid-rollout get IPs that answer. The figures printed go into docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import time

from eipctl.sandbox.testbed import LEASE_NAMESPACE, LocalBed
from eipctl.sandbox.testbed.checks import (
    create_services,
    per_node,
    placement,
    wait_answered_by,
    wait_bound,
    wait_for_ips,
)

SERVICES_PER_NODE = 2
MAX_OUTAGE = 0.1  # seconds, at 20 ms probing


def test_a_rolling_upgrade_of_every_workload_moves_nothing_and_loses_nothing(
    local_bed: LocalBed,
) -> None:
    bed = local_bed
    names = [f"upgrade-{i}" for i in range(SERVICES_PER_NODE * len(bed.node_names))]
    create_services(bed, names)
    ips = wait_for_ips(bed, names)
    placed = wait_bound(bed, ips.values())
    assert set(placed.values()) == set(bed.node_names), f"not spread: {per_node(placed)}"
    wait_answered_by(bed, placed)
    series = bed.client.start_probes(sorted(placed), interval=0.02)
    logs = {p.name: p.log_size() for p in bed.processes()}
    per_controller: dict[str, float] = {}
    per_replica: dict[str, tuple[float, bool]] = {}  # name -> (seconds to ready, was leader)
    created_mid_rollout: list[str] = []
    started = time.monotonic()

    try:
        time.sleep(0.5)
        # the DaemonSet: one node at a time, the next once the new pod is ready
        for node in bed.node_names:
            per_controller[node] = bed.replace_controller(node)
        after_controllers = placement(bed.kube.claims())
        # the Deployments, one replica at a time; a Service arrives while each leader is gone
        for component, replicas in (("scheduler", bed.schedulers), ("allocator", bed.allocators)):
            for proc in list(replicas):
                holder = bed.kube.lease_holder(f"eipctl-{component}", LEASE_NAMESPACE)
                leading = holder == proc.name
                name = f"during-{proc.name}-rollout"
                # created while the old pod is gone and before its replacement starts
                create = functools.partial(create_services, bed, [name]) if leading else None
                created_mid_rollout += [name] if leading else []
                per_replica[proc.name] = (bed.replace_replica(proc, while_down=create), leading)
        new_ips = wait_for_ips(bed, created_mid_rollout)
        new_placed = wait_bound(bed, new_ips.values())
        wait_answered_by(bed, new_placed)
        time.sleep(1.0)  # probes past the last handover
    finally:
        bed.client.stop_probes(series)
    took = time.monotonic() - started

    # the prober and the responders run in this process: probes in flight while it was
    # starved of CPU (a pause of the prober over 100 ms) are no evidence either way
    outages = {ip: series.longest_outage_outside_stalls(ip, MAX_OUTAGE) for ip in placed}
    raw = {ip: series.longest_outage(ip) for ip in placed}
    print(f"rolling upgrade of 3 controllers, 2 schedulers, 2 allocators: {took:.1f}s")
    for node, seconds in per_controller.items():
        print(f"  controller on {node}: SIGTERM -> new one in service after {seconds:.2f}s")
    for name, (seconds, leading) in per_replica.items():
        role = "leader" if leading else "standby"
        print(f"  {name} ({role}): SIGTERM -> replacement ready after {seconds:.2f}s")
    for ip in sorted(placed):
        print(
            f"  {ip} on {placed[ip]}: longest outage {outages[ip] * 1000:.0f} ms over "
            f"{len(series.of(ip))} probes ({raw[ip] * 1000:.0f} ms counting probes in flight "
            f"while the prober paused; it paused {len(series.stalls(ip, MAX_OUTAGE))} times "
            f"over {MAX_OUTAGE * 1000:.0f} ms, at most {series.longest_probe_pause(ip) * 1000:.0f} ms)"
        )
    print(
        f"  longest outage of any IP: {max(outages.values()) * 1000:.0f} ms; created during "
        f"the rollout: {new_ips} on {new_placed}"
    )

    moved = {ip: series.answerers(ip) for ip in placed if series.answerers(ip) != [placed[ip]]}
    assert not moved, (
        f"IPs answered from another node during the upgrade: {moved} (placed {placed}); "
        f"the schedulers said: {bed.log_lines(logs, 'node.dead', 'object.event')}"
    )
    assert {ip: after_controllers.get(ip) for ip in placed} == placed, "the controllers' roll moved"
    long = {ip: round(s * 1000) for ip, s in outages.items() if s > MAX_OUTAGE}
    failed = {
        ip: [round(x.sent - started, 2) for x in series.of(ip) if not x.answer] for ip in long
    }
    assert not long, (
        f"outages over {MAX_OUTAGE * 1000:.0f} ms (ms): {long}; failed probes: {failed}"
    )
    assert wait_for_ips(bed, names) == ips, "a Service's IP changed"
    final = placement(bed.kube.claims())
    assert {ip: final.get(ip) for ip in placed} == placed
