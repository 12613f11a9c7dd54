"""A flapping node: how often IPs move, and how long they go dark, per --node-hold-down.

Netns bed, 3 nodes, 2 scheduler replicas, default flags but the hold-down. One node's
liveness path is cut for `--down` seconds and healed for `--up` seconds, again and again,
for `--seconds` (nftables in its namespace: to the schedulers it dies and comes back; it lets
go of its IPs while cut, as a node cut off must). Meanwhile Services come and go (one
created and one deleted every `--churn` seconds), so that placements happen while the node
is back. The client connects to every IP every 20 ms from the moment it first answers.

Printed per hold-down: the moves off the flapping node (claims placed there that had to
move again: NodeDead), every move the schedulers wrote, the longest dark time of any IP and
the sum of dark time over all IPs. Asserts nothing.

Run as root: python benchmarks/bench_flap.py [--seconds 60] [--hold-downs 0s,10s]
"""

from __future__ import annotations

import argparse
import re
import time

from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers
from eipctl.sandbox.testbed.checks import wait_answered_by, wait_bound
from figures import machine, skip_unless_root

MOVE = re.compile(r"event='object\.event' kind='IpClaim'.*reason='(\w+)'.*from_node='([\w-]+)'")


def moves_since(bed: LocalBed, offsets: dict[str, int]) -> list[tuple[str, str]]:
    """(reason, from node) of every claim move the schedulers logged since `offsets`."""
    out = []
    for proc in bed.schedulers:
        for line in proc.log_since(offsets[proc.name]).splitlines():
            m = MOVE.search(line)
            if m is not None:
                out.append((m.group(1), m.group(2)))
    return out


def run(hold_down: str, args: argparse.Namespace) -> dict[str, float]:
    options = BedOptions(
        nodes=3, fast=False, log_level="info", scheduler_flags=["--node-hold-down", hold_down]
    )
    with LocalBed(options) as bed:
        bed.reset()
        flapper = bed.node_names[0]
        names = [f"flap-{i:03d}" for i in range(6)]
        for name in names:
            bed.kube.create_service(name)
        ips = {name: bed.wait_for_ip(name) for name in names}
        wait_answered_by(bed, wait_bound(bed, ips.values()))
        series = bed.client.start_probes(sorted(ips.values()), interval=0.02)
        offsets = {p.name: p.log_size() for p in bed.schedulers}
        serial = len(names)
        started = time.monotonic()
        next_churn = started + args.churn
        cut = False
        retired: list[str] = []
        next_flip = started
        try:
            while time.monotonic() - started < args.seconds:
                now = time.monotonic()
                if now >= next_flip:
                    if cut:
                        bed.heal_liveness(flapper)
                    else:
                        bed.cut_liveness(flapper)
                    cut = not cut
                    next_flip = now + (args.down if cut else args.up)
                if now >= next_churn:
                    gone = names.pop(0)
                    bed.kube.delete_service(gone)
                    released = ips.pop(gone, None)
                    if released in series.ips:  # its IP is no longer meant to answer
                        series.ips.remove(released)
                        retired.append(released)
                    name = f"flap-{serial:03d}"
                    serial += 1
                    bed.kube.create_service(name)
                    names.append(name)
                    next_churn = now + args.churn
                if any(name not in ips for name in names):
                    for svc in bed.kube.services():
                        external = (svc.get("spec") or {}).get("externalIPs") or []
                        if svc["metadata"]["name"] in names and external:
                            ips[svc["metadata"]["name"]] = external[0]
                waiting = [ip for ip in ips.values() if ip not in series.ips]
                if waiting:  # a new IP joins the probes once it first answers
                    answers = bed.client.ask_all(waiting, 0.2)
                    series.ips.extend(ip for ip in waiting if answers.get(ip))
                time.sleep(0.05)
        finally:
            bed.heal_liveness(flapper)
            time.sleep(3.0)
            bed.client.stop_probes(series)
        moves = moves_since(bed, offsets)
        darks = [series.longest_loss(ip) for ip in [*series.ips, *retired]]
        return {
            "off the flapper": sum(1 for r, n in moves if n == flapper and r == "NodeDead"),
            "moves": len(moves),
            "IPs": len(series.ips) + len(retired),
            "longest dark": max(darks, default=0.0),
            "sum of longest darks": sum(darks),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--down", type=float, default=2.0)
    parser.add_argument("--up", type=float, default=2.0)
    parser.add_argument("--churn", type=float, default=2.0)
    parser.add_argument("--hold-downs", default="0s,10s")
    args = parser.parse_args()
    skip_unless_root("bench_flap")
    install_signal_handlers()
    print(f"machine: {machine()}")
    print(
        f"node-0 cut {args.down}s / healed {args.up}s for {args.seconds:.0f}s; a Service "
        f"created and one deleted every {args.churn}s; client every 20 ms"
    )
    print(
        "| --node-hold-down | moves off the flapping node | all moves | IPs probed "
        "| longest dark | sum of each IP's longest dark |"
    )
    print("|---|---|---|---|---|---|")
    for hold_down in args.hold_downs.split(","):
        r = run(hold_down, args)
        print(
            f"| {hold_down} | {r['off the flapper']:.0f} | {r['moves']:.0f} | {r['IPs']:.0f} "
            f"| {r['longest dark']:.2f} s | {r['sum of longest darks']:.2f} s |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
