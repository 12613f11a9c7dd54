"""Service created -> its IP answering from the client, with default settings; prints figures.

Each trial creates one Service annotated `external-ip: auto`, then times (from the create
call) the external IP appearing on the Service and the first TCP answer from the client
(probing every 20 ms). Target p50 <= 300 ms for the answer.

Run as root: python benchmarks/bench_e2e_latency.py [--trials 30]
"""

from __future__ import annotations

import argparse
import time

from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from figures import machine, skip_unless_root, summary


def trial(bed: LocalBed, name: str) -> tuple[float, float]:
    """(create -> externalIPs set, create -> first TCP answer from the client)."""
    t0 = time.monotonic()
    bed.kube.create_service(name)
    ip = wait_for(lambda: bed.kube.external_ips(name), 30, interval=0.01, what="an IP")[0]
    t_ip = time.monotonic() - t0
    # a fresh connection every 20 ms; the earliest *completed* answer bounds the moment the
    # IP started answering from above
    series = bed.client.start_probes([ip], interval=0.02, timeout=1.0)
    try:
        wait_for(lambda: series.answerers(ip), 30, interval=0.02, what=f"{ip} answering")
    finally:
        bed.client.stop_probes(series)
    answered = min(s.sent + s.took for s in series.of(ip) if s.answer)
    return t_ip, answered - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    skip_unless_root("bench_e2e_latency")
    install_signal_handlers()
    print(f"machine: {machine()}")
    with LocalBed(BedOptions(nodes=args.nodes, fast=False)) as bed:
        bed.reset()
        to_ip, to_answer = [], []
        for i in range(args.trials):
            name = f"latency-{i}"
            t_ip, t_answer = trial(bed, name)
            to_ip.append(t_ip)
            to_answer.append(t_answer)
            print(
                f"  trial {i + 1:2d}: IP after {t_ip:.3f}s, answering after {t_answer:.3f}s",
                flush=True,
            )
            bed.kube.delete_service(name)
            wait_for(lambda: not bed.kube.claims(), 30, what="the claim released")
        print(summary("Service created -> externalIPs set", to_ip))
        print(summary("Service created -> IP answering from the client", to_answer, "p50<=0.3s"))
        print(f"logs: {bed.run_dir}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
