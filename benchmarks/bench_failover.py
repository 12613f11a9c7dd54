"""Failover as a client sees it, with default settings; prints figures, asserts nothing.

1. Node killed (controller SIGKILLed and link down) -> its IP answering from another node,
   seen by a client probing every 20 ms. The schedulers (in the bed's control namespace)
   stop getting liveness replies and declare the node dead after 400 ms (docs/liveness.md
   expects ~0.4 s in all). Target ([liveness]) p50 <= 0.5 s, p95 <= 1.0 s.
2. The same with the scheduler leader SIGKILLed at the same instant: the standby, which
   probes every node too, takes the Lease (1 s) and moves the claim. Target <= 1.5 s.
3. Scheduler leader SIGKILLed -> a Service created at that moment placed on a node.
   Target <= 2 s.

Run as root: python benchmarks/bench_failover.py [--trials 20] [--leader-trials 5]
[--both-trials 5]
"""

from __future__ import annotations

import argparse
import time

from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.checks import bound, wait_bound
from figures import machine, skip_unless_root, summary


def node_failover(
    bed: LocalBed, trials: int, *, with_leader: bool = False
) -> tuple[list[float], list[float]]:
    """(kill -> answering from the new node, kill -> claim bound on the new node) per trial;
    ``with_leader``: the scheduler leader is SIGKILLed at the same instant."""
    bed.kube.create_service("failover")
    ip = bed.wait_for_ip("failover")
    answering, rebound = [], []
    for trial in range(trials):
        holder = wait_bound(bed, [ip])[ip]
        bed.wait_answering(ip, by=holder)
        series = bed.client.start_probes([ip], interval=0.02, timeout=0.3)
        time.sleep(0.2)
        leader = bed.leader("scheduler") if with_leader else None
        killed_at = time.monotonic()
        if leader is not None:
            leader.kill()
        bed.kill_node(holder)
        try:
            new = wait_for(
                lambda h=holder: (n := bound(bed.kube.claim_for(ip))) not in (None, h) and n,
                30,
                interval=0.02,
                what="the claim bound elsewhere",
            )
            rebound.append(time.monotonic() - killed_at)
            bed.wait_answering(ip, by=new, timeout=30)
            time.sleep(0.3)  # the probe series sees the new answers too
        finally:
            bed.client.stop_probes(series)
        first = series.first_answer_after(ip, killed_at, by=new)
        assert first is not None
        answering.append(first - killed_at)
        print(
            f"  trial {trial + 1:2d}: {holder}{' and ' + leader.name if leader else ''} "
            f"killed -> {new} answering after {answering[-1]:.3f}s "
            f"(claim bound after {rebound[-1]:.3f}s)",
            flush=True,
        )
        if leader is not None:
            leader.start()  # as its Deployment would
        bed.revive_node(holder)
        bed.wait_in_service([holder])  # registered, answering the probes, judged live
    bed.kube.delete_service("failover")
    return answering, rebound


def leader_handover(bed: LocalBed, trials: int) -> list[float]:
    """Scheduler leader SIGKILLed -> a new Service's claim placed on a node."""
    placed = []
    for trial in range(trials):
        leader = bed.leader("scheduler")
        name = f"handover-{trial}"
        leader.kill()
        killed_at = time.monotonic()
        bed.kube.create_service(name)
        ip = bed.wait_for_ip(name, timeout=30)
        wait_for(
            lambda i=ip: (c := bed.kube.claim_for(i)) is not None and c["spec"].get("nodeName"),
            30,
            interval=0.02,
            what="the new claim placed",
        )
        placed.append(time.monotonic() - killed_at)
        print(
            f"  trial {trial + 1}: {leader.name} killed -> placed after {placed[-1]:.3f}s",
            flush=True,
        )
        leader.start()  # as its Deployment would
        bed.kube.delete_service(name)
        time.sleep(1.0)  # let the restarted replica settle as the standby
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--leader-trials", type=int, default=5)
    parser.add_argument("--both-trials", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    skip_unless_root("bench_failover")
    install_signal_handlers()
    print(f"machine: {machine()}")
    print(
        "settings: eipctl defaults (liveness probes every 100ms, scheduler liveness timeout "
        "400ms, controller fence timeout 2.5s, lease 1s)"
    )
    with LocalBed(BedOptions(nodes=args.nodes, fast=False, log_level="info")) as bed:
        bed.reset()
        answering, rebound = node_failover(bed, args.trials)
        bed.reset()
        both, _ = node_failover(bed, args.both_trials, with_leader=True)
        bed.reset()
        placed = leader_handover(bed, args.leader_trials)
        print(
            summary(
                "node killed -> IP answering from the new node", answering, "p50<=0.5s p95<=1.0s"
            )
        )
        print(summary("node killed -> claim Bound on the new node (API)", rebound))
        print(summary("node and scheduler leader killed -> IP answering", both, "<=1.5s"))
        print(summary("scheduler leader killed -> new Service placed", placed, "<=2s"))
        print(f"logs: {bed.run_dir}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
