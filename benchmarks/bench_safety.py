"""Safety on the netns bed, as figures: how long two nodes answer one IP, and that it ends.

For each partition case ([liveness], docs/liveness.md "Every partition case"), with eipctl's
defaults, a client namespace probes the holder's IP over TCP every 20 ms and asks "who has
it?" by ARP every 50 ms. Per trial the script prints the longest stretch in which two MACs
answered, the longest client outage, who answered, and whether one MAC answers at the end
(after the fault is healed and the bed has settled). Cases:

1. api-cut: the holder is cut off from the API only (its relay drops, 4 s > the controller's
   2.5 s fence timeout). Expected since [stability]: it keeps answering and keeps its claims
   (the scheduler leader still hears it and vouches for what it holds): nothing moves, no
   outage, no double answer.
2. liveness-cut: the holder's liveness UDP is dropped (nftables in its namespace, 3 s).
   Expected: declared dead after ~0.4 s, claims move; it sees the move in its watch and lets
   go once the new holder is Bound (make before break): a short double answer that ends.
3. both-cut: both at once (3 s). Expected: the probes stop, its API check fails, it fences
   about when the others take over.
4. node-kill-with-leader: the holder dies (controller SIGKILL, link down) at the instant the
   scheduler leader is SIGKILLed: the standby takes over and moves the claim.
5. liveness-cut-with-leader: the holder's liveness path is cut and the scheduler leader
   SIGKILLed at once: the double answer of case 2 with a leader handover in the middle.

Asserts nothing; prints figures. Run as root (needs `nft` for cases 2, 3 and 5):

    python benchmarks/bench_safety.py [--trials 5] [--cases api-cut,liveness-cut,...]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

from eipctl.sandbox.namespaces import nft_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers
from eipctl.sandbox.testbed.checks import wait_bound
from figures import machine, percentile, skip_unless_root

CASES = ["api-cut", "liveness-cut", "both-cut", "node-kill-with-leader", "liveness-cut-with-leader"]
NEEDS_NFT = {"liveness-cut", "both-cut", "liveness-cut-with-leader"}


@dataclass
class Trial:
    holder: str
    answerers: list[str]
    double: float  # longest two-MAC stretch during the fault and the settling
    outage: float  # longest client outage
    single_at_end: bool  # exactly one MAC answered the last ARP rounds
    moved: bool


def inflict(bed: LocalBed, case: str, holder: str) -> Callable[[], None]:
    """Start the fault; return the undo that ends it."""
    if case == "api-cut":
        bed.cut_from_api(holder)
        time.sleep(4.0)
        return lambda: bed.reconnect_to_api(holder)
    if case == "liveness-cut":
        bed.cut_liveness(holder)
        time.sleep(3.0)
        return lambda: bed.heal_liveness(holder)
    if case == "both-cut":
        bed.cut_from_api(holder)
        bed.cut_liveness(holder)
        time.sleep(3.0)

        def undo() -> None:
            bed.heal_liveness(holder)
            bed.reconnect_to_api(holder)

        return undo
    leader = bed.leader("scheduler")
    if case == "node-kill-with-leader":
        leader.kill()
        bed.kill_node(holder)
        time.sleep(3.0)

        def revive() -> None:
            leader.start()  # as its Deployment would
            bed.revive_node(holder)

        return revive
    if case == "liveness-cut-with-leader":
        leader.kill()
        bed.cut_liveness(holder)
        time.sleep(3.0)

        def heal() -> None:
            leader.start()
            bed.heal_liveness(holder)

        return heal
    raise ValueError(case)


def trial(bed: LocalBed, case: str, ip: str) -> Trial:
    holder = wait_bound(bed, [ip])[ip]
    bed.wait_answering(ip, by=holder)
    probes = bed.client.start_probes([ip], interval=0.02, timeout=0.3)
    watch = bed.client.start_arp_watch([ip], period=0.05)
    try:
        time.sleep(0.3)
        undo = inflict(bed, case, holder)
        undo()
        bed.heal()
        bed.wait_in_service(list(bed.live_nodes))
        wait_bound(bed, [ip], timeout=30)
        time.sleep(1.0)  # a few ARP rounds on the settled bed
    finally:
        bed.client.stop_probes(probes)
        bed.client.stop_arp_watch(watch)
    last_rounds = watch.macs_per_round(ip)[-10:-1]
    answerers = probes.answerers(ip)
    return Trial(
        holder=holder,
        answerers=answerers,
        double=watch.longest_double_answer(ip),
        outage=probes.longest_outage(ip),
        single_at_end=bool(last_rounds) and all(len(macs) == 1 for _, macs in last_rounds),
        moved=any(a != holder for a in answerers),
    )


def describe(values: list[float]) -> str:
    return f"p50 {percentile(values, 50):.2f}s max {max(values):.2f}s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--cases", type=lambda s: s.split(","), default=CASES)
    args = parser.parse_args()
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    skip_unless_root("bench_safety")
    cases = list(args.cases)
    if (reason := nft_unavailable()) is not None:
        print(f"cases {sorted(NEEDS_NFT & set(cases))} skipped: {reason}")
        cases = [c for c in cases if c not in NEEDS_NFT]
    install_signal_handlers()
    print(f"machine: {machine()}")
    print("settings: eipctl defaults; client TCP probes every 20 ms, ARP watch every 50 ms")
    results: dict[str, list[Trial]] = {}
    with LocalBed(BedOptions(nodes=args.nodes, fast=False, log_level="info")) as bed:
        bed.reset()
        bed.kube.create_service("safety")
        ip = bed.wait_for_ip("safety")
        for case in cases:
            results[case] = []
            for n in range(args.trials):
                t = trial(bed, case, ip)
                results[case].append(t)
                print(
                    f"  {case} trial {n + 1}: holder {t.holder}, answered by "
                    f"{' then '.join(t.answerers)}; two MACs {t.double:.2f}s, "
                    f"client outage {t.outage:.2f}s, "
                    f"{'one MAC' if t.single_at_end else 'NOT one MAC'} at the end",
                    flush=True,
                )
        print(f"logs: {bed.run_dir}")
    print("| case | trials | moved | two MACs answering | client outage | one MAC at the end |")
    print("|---|---|---|---|---|---|")
    for case, trials in results.items():
        print(
            f"| {case} | {len(trials)} | {sum(t.moved for t in trials)} | "
            f"{describe([t.double for t in trials])} | {describe([t.outage for t in trials])} | "
            f"{sum(t.single_at_end for t in trials)}/{len(trials)} |"
        )
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
