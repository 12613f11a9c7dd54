"""Control-plane outages and partitions as a client sees them, default flags; prints figures.

On the netns bed (3 nodes, 2 scheduler replicas, 2 allocators, 6 Services spread 2 per node;
the client opens a new TCP connection to every IP every 20 ms), each case of the [stability]
issue (docs/liveness.md, "Outages" and "Every partition case"):

1. the API server unavailable for `--short` (15 s) and `--long` (600 s) seconds: frozen
   with SIGSTOP (requests hang), and refusing connections (the process gone: every relay the
   schedulers and controllers reach it through resets them);
2. the whole control plane down (the API server and both scheduler replicas frozen), the
   same durations; and a control-plane node reboot (API refused and one scheduler replica
   SIGKILLed together, `--short` only);
3. a node killed while the API is frozen: how long after the API returns its IPs answer from
   another node (`--kill-trials`, p50/p95; target p95 <= 1.5 s), and that nothing else moved;
4. a node cut off from the API only (`--short`): longest dark time, whether anything moved;
5. a node cut off from the API and its liveness path (nftables, only its link left), and
   one cut off from the API and the schedulers but not its peers: when it let go, and the
   longest time two MACs answered ARP for one of its IPs (target <= 0.6 s);
6. a node cut off from its peers only: dark time, moves;
7. both scheduler replicas frozen with the API up (`sched`): dark time, moves.

For 1, 2, 4 and 6: the longest time any IP went unanswered (failed probes, a connection
reset by a move counted apart; target <= 100 ms), how many claims moved, and whether every
IP is held by exactly one node afterwards. Nothing is asserted.

Run as root: python benchmarks/bench_outage.py [--short 15] [--long 600] [--kill-trials 5]
[--cut-trials 3] [--only api,cp,reboot,kill,cut,peers]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.checks import (
    placement,
    spread_services,
    wait_answered_by,
    wait_moved_off,
)
from figures import machine, skip_unless_root, summary

CASES = ("api", "cp", "sched", "reboot", "kill", "cut", "peers")


def spread(bed: LocalBed, prefix: str) -> dict[str, str]:
    placed = spread_services(bed, prefix)
    bed.wait_peers_known()  # a controller that has not listed its peers cannot hold
    return placed


def through(
    bed: LocalBed, name: str, seconds: float, down: Callable[[], None], up: Callable[[], None]
) -> str:
    """One outage of `seconds`: a row of figures."""
    bed.reset()
    placed = spread(bed, "out")
    series = bed.client.start_probes(placed, interval=0.02)
    try:
        time.sleep(0.5)
        down()
        time.sleep(seconds)
        up()
        time.sleep(3.0)
    finally:
        bed.client.stop_probes(series)
    after = wait_for(lambda: placement(bed.kube.claims()) or None, 30, what="the claims")
    moved = sum(1 for ip, node in placed.items() if after.get(ip) != node)
    dark = max(series.longest_loss(ip) for ip in placed)
    cut = sum(series.cut(ip) for ip in placed)
    single = all(bed.holders(ip) == [after.get(ip)] for ip in placed)
    probes = min(len(series.of(ip)) for ip in placed)
    return (
        f"  {name:<44} {seconds:>6.0f}s  longest dark {dark * 1000:6.0f} ms  "
        f"moved {moved}  one holder each {'yes' if single else 'NO'}  "
        f"connections cut {cut}  probes/IP >= {probes}"
    )


def api_down(bed: LocalBed, how: str) -> tuple[Callable[[], None], Callable[[], None]]:
    return (lambda: bed.stop_api(how)), bed.start_api


def control_plane_down(bed: LocalBed) -> tuple[Callable[[], None], Callable[[], None]]:
    return bed.stop_control_plane, bed.start_control_plane


def reboot(bed: LocalBed) -> tuple[Callable[[], None], Callable[[], None]]:
    return bed.reboot_control_plane_node, bed.control_plane_node_back


def killed_during_outage(bed: LocalBed, trials: int) -> tuple[list[float], int]:
    """Seconds from the API's return to the victim's IPs answering elsewhere; moves of IPs
    that were not the victim's (should be 0)."""
    took: list[float] = []
    wrong = 0
    for trial in range(trials):
        bed.reset()
        placed = spread(bed, "kill")
        victim = max(set(placed.values()), key=list(placed.values()).count)
        moving = [ip for ip, n in placed.items() if n == victim]
        series = bed.client.start_probes(placed, interval=0.02)
        try:
            bed.stop_api("freeze")
            time.sleep(0.5)
            bed.kill_node(victim)
            time.sleep(5.0)
            back = time.monotonic()
            bed.start_api()
            after = wait_moved_off(bed, moving, victim, timeout=30)
            wait_answered_by(bed, {ip: after[ip] for ip in placed}, timeout=15)
            time.sleep(0.3)
        finally:
            bed.client.stop_probes(series)
        firsts = [series.first_answer_after(ip, back, by=after[ip]) for ip in moving]
        slowest = max((f - back) for f in firsts if f is not None)
        took.append(slowest)
        wrong += sum(1 for ip, n in placed.items() if ip not in moving and after[ip] != n)
        print(f"  trial {trial + 1}: {victim}'s IPs answering {slowest:.2f}s after the API")
    return took, wrong


def cut_off(bed: LocalBed, trials: int, schedulers_only: bool) -> tuple[list[float], list[float]]:
    """(cut -> the node removed its addresses, longest two-MAC ARP answer) per trial."""
    let_go: list[float] = []
    double: list[float] = []
    for trial in range(trials):
        bed.reset()
        placed = spread(bed, "cut")
        victim = max(set(placed.values()), key=list(placed.values()).count)
        moving = [ip for ip, n in placed.items() if n == victim]
        watch = bed.client.start_arp_watch(moving, period=0.05)
        cut_at = time.monotonic()
        bed.cut_from_api(victim)
        bed.cut_liveness(victim, only="schedulers" if schedulers_only else None)
        try:
            wait_for(lambda v=victim: not bed.node(v).external_addresses(), 15, interval=0.02)
            let_go.append(time.monotonic() - cut_at)
            after = wait_moved_off(bed, moving, victim, timeout=15)
            wait_answered_by(bed, {ip: after[ip] for ip in moving}, timeout=10)
            time.sleep(0.5)
        finally:
            bed.client.stop_arp_watch(watch)
        double.append(max(watch.longest_double_answer(ip) for ip in moving))
        print(f"  trial {trial + 1}: let go {let_go[-1]:.2f}s, two MACs {double[-1]:.2f}s")
    return let_go, double


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=float, default=15.0, help="short outage, seconds")
    parser.add_argument("--long", type=float, default=600.0, help="long outage (0: none)")
    parser.add_argument("--kill-trials", type=int, default=5)
    parser.add_argument("--cut-trials", type=int, default=3)
    parser.add_argument("--only", default=",".join(CASES), help=f"cases: {','.join(CASES)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    skip_unless_root("bench_outage")
    install_signal_handlers()
    print(f"machine: {machine()}")
    print("settings: eipctl defaults; 3 nodes, 6 Services, client every 20 ms")
    durations = [d for d in (args.short, args.long) if d > 0]
    rows: list[str] = []
    with LocalBed(BedOptions(nodes=3, fast=False, log_level="info")) as bed:
        for seconds in durations:
            if "api" in only:
                for how in ("freeze", "refuse"):
                    row = through(bed, f"API server {how}", seconds, *api_down(bed, how))
                    print(row, flush=True)
                    rows.append(row)
            if "cp" in only:
                row = through(
                    bed, "API + both schedulers frozen", seconds, *control_plane_down(bed)
                )
                print(row, flush=True)
                rows.append(row)
        if "sched" in only:
            row = through(
                bed,
                "both schedulers frozen, API up",
                args.short,
                bed.freeze_schedulers,
                bed.thaw_schedulers,
            )
            print(row, flush=True)
            rows.append(row)
        if "reboot" in only:
            row = through(bed, "control-plane node reboot", args.short, *reboot(bed))
            print(row, flush=True)
            rows.append(row)
        if "cut" in only:

            def cut_api(b: LocalBed) -> tuple[Callable[[], None], Callable[[], None]]:
                victim = "node-0"
                return (lambda: b.cut_from_api(victim)), (lambda: b.reconnect_to_api(victim))

            row = through(bed, "node-0 cut off from the API only", args.short, *cut_api(bed))
            print(row, flush=True)
            rows.append(row)
        if "peers" in only:

            def cut_peers(b: LocalBed) -> tuple[Callable[[], None], Callable[[], None]]:
                return (lambda: b.cut_liveness("node-0", only="peers")), (
                    lambda: b.heal_liveness("node-0")
                )

            row = through(bed, "node-0 cut off from its peers only", args.short, *cut_peers(bed))
            print(row, flush=True)
            rows.append(row)
        results: list[str] = []
        if "kill" in only:
            took, wrong = killed_during_outage(bed, args.kill_trials)
            results.append(
                summary(
                    "node killed while the API is down -> answering after return", took, "p95<=1.5s"
                )
            )
            results.append(f"  other IPs moved in those trials: {wrong}")
        if "cut" in only:
            let_go, double = cut_off(bed, args.cut_trials, schedulers_only=False)
            results.append(summary("cut from API + liveness path -> let go", let_go))
            results.append(summary("cut from API + liveness path -> two MACs", double, "<=0.6s"))
            let_go, double = cut_off(bed, args.cut_trials, schedulers_only=True)
            results.append(summary("cut from API + schedulers, not peers -> let go", let_go))
            results.append(
                summary("cut from API + schedulers, not peers -> two MACs", double, "<=0.6s")
            )
        print("\noutages (longest dark time of any IP; target <= 100 ms, nothing moved):")
        for row in rows:
            print(row)
        for line in results:
            print(line)
        print(f"logs: {bed.run_dir}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
