"""Soak: random faults, and after every iteration the checks a user would make from outside.

Faults (one or two per iteration, chosen at random): a controller SIGKILLed or SIGSTOPped
for a while, a node killed (controller SIGKILLed, link down) and revived, a node cut off
from the API for a while, a node's liveness UDP dropped for a while (needs `nft`; left out
without it), the scheduler or allocator leader SIGKILLed (restarted as its
Deployment would), every watch dropped, the API server restarted, Services created and
deleted; the API server away (hanging or refusing, 5-30 s: `api-outage`), and with it both
scheduler replicas frozen (`control-plane-down`), while the client probes every IP every
20 ms. After each iteration every fault is healed and, within a settle timeout:

- every Service holds exactly one external IP, the same as before unless it was new;
- no IP is recorded by two claims, and each Service's claim is Bound on a live node;
- exactly one MAC answers ARP for each IP, it is that node's, and the client's TCP connection
  to the IP is answered by that node.

Prints iterations, faults by kind, duplicates (must be 0) and lost Services (must be 0),
seconds per iteration and the admin calls retried while the API restarted; exits 1 if
duplicates or lost Services are not 0. A bed action that fails (the harness, not eipctl: say
the API emulator died) stops the soak with exit status 2 and a line saying the iteration, the
fault and the action, then the end of every process log. Run as root:

    python benchmarks/soak.py --iterations 40 --time-limit 900 [--seed N]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import random
import statistics
import time
from collections.abc import Iterator

from eipctl.sandbox.namespaces import nft_unavailable
from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.checks import bound, ips_held_twice
from figures import machine, percentile, skip_unless_root

FAULTS = [
    "controller-sigkill",
    "controller-sigstop",
    "node-kill",
    "api-cut",
    "liveness-cut",
    "scheduler-leader-kill",
    "allocator-leader-kill",
    "drop-watches",
    "api-restart",
    "services-create",
    "services-delete",
    "api-outage",
    "control-plane-down",
]
OUTAGES = ("api-outage", "control-plane-down")
"""Faults during which the client probes every IP every 20 ms: no IP may go dark."""


class HarnessError(RuntimeError):
    """A bed action failed: the harness, not eipctl. The message says where in the soak."""


class Soak:
    def __init__(
        self, bed: LocalBed, rng: random.Random, services: int, faults: list[str] | None = None
    ) -> None:
        self.bed = bed
        self.rng = rng
        self.kinds = faults or FAULTS
        self.target_services = services
        self.faults: collections.Counter[str] = collections.Counter()
        self.ip_of: dict[str, str] = {}  # Service -> the IP it was given
        self.serial = 0
        self.duplicates: list[str] = []
        self.double_by_kind: dict[str, float] = {}
        """Longest two-MAC ARP answer per fault kind (an iteration of two faults counts for
        both: an upper bound for each)."""
        self.lost: list[str] = []
        self.dark: dict[str, float] = {}
        """Longest time any IP went unanswered during each outage fault (`OUTAGES`)."""
        self.ip_changes: list[str] = []
        self.settle_times: list[float] = []
        self.double_answers: list[tuple[float, str]] = []  # (seconds, ip) seen during faults
        self.iteration = 0
        self.iteration_times: list[float] = []

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        """Run a bed action; if it fails, say which iteration and fault it was in."""
        try:
            yield
        except HarnessError:
            raise
        except Exception as exc:
            where = f"iteration {self.iteration}" if self.iteration else "before the iterations"
            raise HarnessError(f"{where}, {what}: {type(exc).__name__}: {exc}") from exc

    # ---- faults ----

    def fault(self, number: int, count: int) -> str:
        bed, rng = self.bed, self.rng
        kind = rng.choice(self.kinds)
        node = rng.choice(bed.live_nodes) if bed.live_nodes else None
        pause = rng.uniform(0.3, 3.0)
        with self.step(f"fault {number} of {count} ({kind}, node {node})"):
            done = self._inflict(kind, node, pause)
        if not done:
            return "skipped"
        self.faults[kind] += 1
        return kind

    def _inflict(self, kind: str, node: str | None, pause: float) -> bool:
        bed, rng = self.bed, self.rng
        if kind == "controller-sigkill" and node:
            bed.controllers[node].kill()
            time.sleep(pause)
            bed.controllers[node].start()
        elif kind == "controller-sigstop" and node:
            bed.freeze_controller(node)
            time.sleep(pause)
            bed.thaw_controller(node)
        elif kind == "node-kill" and node and len(bed.live_nodes) > 1:
            bed.kill_node(node)
            time.sleep(pause)
            bed.revive_node(node)
        elif kind == "api-cut" and node:
            bed.cut_from_api(node)
            time.sleep(pause)
            bed.reconnect_to_api(node)
        elif kind == "liveness-cut" and node:
            bed.cut_liveness(node)
            time.sleep(pause)
            bed.heal_liveness(node)
        elif kind in ("scheduler-leader-kill", "allocator-leader-kill"):
            leader = bed.leader(kind.split("-", maxsplit=1)[0])
            leader.kill()
            self.churn(rng.randint(0, 2))
            time.sleep(pause)
            leader.start()
        elif kind == "drop-watches":
            self.churn(rng.randint(0, 2))
            bed.drop_watches()
        elif kind == "api-restart":
            self.churn(rng.randint(0, 2))
            bed.restart_api()
        elif kind in OUTAGES:
            self.outage(kind, rng.uniform(5.0, 30.0))
        elif kind == "services-create":
            self.create(min(rng.randint(1, 3), self.target_services * 3 // 2 - len(self.ip_of)))
        elif kind == "services-delete":
            self.delete(min(rng.randint(1, 2), len(self.ip_of) - self.target_services // 2))
        else:
            return False
        return True

    def outage(self, kind: str, seconds: float) -> None:
        """The API server (hangs or refuses, at random) and, for control-plane-down, both
        scheduler replicas (frozen) away for `seconds`, while the client probes every IP."""
        bed = self.bed
        bed.wait_peers_known()  # after a restart: a controller that has not listed its peers
        ips = [ip for ip in self.ip_of.values() if ip]  # cannot hold, by design
        # the fault before this one (a node killed or frozen) may still be failing over: an
        # IP dark for that is a failover, not the outage (seed 1101 counted one, 0.36 s)
        with contextlib.suppress(TimeoutError):
            wait_for(lambda: not any(self.problems()), 10, interval=0.2, what="a settled bed")
        series = bed.client.start_probes(ips, interval=0.02) if ips else None
        try:
            time.sleep(0.3)
            how = self.rng.choice(["freeze", "refuse"])
            if kind == "control-plane-down":
                bed.stop_control_plane(how)
            else:
                bed.stop_api(how)
            time.sleep(seconds)
            bed.start_control_plane()
            time.sleep(2.0)
        finally:
            if series is not None:
                bed.client.stop_probes(series)
        if series is not None:
            dark, worst = max((series.longest_loss(ip), ip) for ip in ips)
            self.dark[kind] = max(self.dark.get(kind, 0.0), dark)
            print(
                f"    {kind} {seconds:.1f}s: longest dark {dark * 1000:.0f} ms"
                + (f" ({worst})" if dark else ""),
                flush=True,
            )

    def churn(self, n: int) -> None:
        """Create or delete `n` Services, drifting towards the target count."""
        for _ in range(n):
            count = len(self.ip_of)
            if count < self.target_services / 2:
                self.create(1)
            elif count > self.target_services * 3 / 2:
                self.delete(1)
            elif self.rng.random() < 0.5:
                self.create(1)
            else:
                self.delete(1)

    def create(self, n: int) -> None:
        for _ in range(max(0, n)):
            name = f"soak-{self.serial:04d}"
            self.serial += 1
            self.bed.kube.create_service(name)
            self.ip_of[name] = ""

    def delete(self, n: int) -> None:
        for name in self.rng.sample(sorted(self.ip_of), max(0, min(n, len(self.ip_of)))):
            self.bed.kube.delete_service(name)
            del self.ip_of[name]

    # ---- the outside view ----

    def problems(self) -> tuple[list[str], list[str]]:
        """(duplicates, lost) as a user would see them right now."""
        bed = self.bed
        dup, lost = [], []
        services = {s["metadata"]["name"]: s for s in bed.kube.services()}
        claims = bed.kube.claims()
        dup += [f"{ip} recorded by two claims" for ip in ips_held_twice(claims)]
        by_ip = {c["spec"]["ip"]: c for c in claims}
        wanted = {}
        for name in self.ip_of:
            ips = ((services.get(name) or {}).get("spec") or {}).get("externalIPs") or []
            if len(ips) != 1:
                lost.append(f"{name} has external IPs {ips}")
                continue
            node = bound(by_ip.get(ips[0]))
            if node is None or node not in bed.live_nodes:
                lost.append(f"{name}: claim of {ips[0]} not Bound on a live node ({node})")
                continue
            wanted[ips[0]] = (name, node)
        answers = bed.client.ask_all(wanted, timeout=0.5) if wanted else {}
        for ip, (name, node) in wanted.items():
            holders = bed.holders(ip)
            if len(holders) > 1:
                dup.append(f"{ip} ({name}) on the links of {holders}")
            if answers.get(ip) != node:
                lost.append(f"{ip} ({name}) answered by {answers.get(ip)}, claim says {node}")
        for ip, (name, node) in wanted.items():
            macs = bed.client.arp_who_has(ip, listen=0.1)
            if len(macs) > 1:
                dup.append(f"{ip} ({name}) answered ARP from {sorted(macs)}")
            elif macs != {bed.mac_of(node)}:
                lost.append(f"{ip} ({name}) ARP answered by {sorted(macs)}, not {node}")
        return dup, lost

    def neighbour_report(self) -> list[str]:
        """What the client's neighbour table says about each IP: the MAC (and whose it is)
        the client's own packets go to, and the entry's state."""
        network = self.bed.network
        lines = []
        for name, ip in sorted(self.ip_of.items()):
            entry = network.client_neighbour(ip) if ip else None
            if entry is None:
                continue
            owner = network.node_by_mac(entry[0])
            lines.append(f"{ip} ({name}) -> {entry[0]} ({owner.name if owner else '?'}) {entry[1]}")
        return lines

    def settle_and_check(self, timeout: float) -> None:
        started = time.monotonic()
        last: tuple[list[str], list[str]] = ([], [])

        def clean() -> bool:
            nonlocal last
            last = self.problems()
            return not last[0] and not last[1]

        try:
            wait_for(clean, timeout, interval=0.5, what="the bed to settle")
        except TimeoutError:
            self.duplicates += last[0]
            self.lost += last[1]
            for line in last[0] + last[1]:
                print(f"    PROBLEM: {line}", flush=True)
            for line in self.neighbour_report():
                print(f"    CLIENT NEIGHBOUR: {line}", flush=True)
        self.settle_times.append(time.monotonic() - started)
        for svc in self.bed.kube.services():
            name = svc["metadata"]["name"]
            ips = (svc.get("spec") or {}).get("externalIPs") or []
            if name in self.ip_of and ips:
                if self.ip_of[name] and self.ip_of[name] != ips[0]:
                    self.ip_changes.append(f"{name}: {self.ip_of[name]} -> {ips[0]}")
                self.ip_of[name] = ips[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--services", type=int, default=8)
    parser.add_argument("--settle-timeout", type=float, default=30.0)
    parser.add_argument(
        "--faults",
        type=lambda text: text.split(","),
        default=FAULTS,
        help="comma-separated fault kinds to draw from (default: all: " + ",".join(FAULTS) + ")",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.faults) - set(FAULTS))
    if unknown:
        parser.error(f"unknown fault kinds {unknown}; known: {', '.join(FAULTS)}")
    skip_unless_root("soak")
    if "liveness-cut" in args.faults and (reason := nft_unavailable()) is not None:
        print(f"fault liveness-cut left out: it {reason}", flush=True)
        args.faults = [f for f in args.faults if f != "liveness-cut"]
    install_signal_handlers()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"machine: {machine()}\nseed: {seed}", flush=True)
    started = time.monotonic()
    # the production hold-down, not the bed's 0 s: the soak's checks do not need a revived
    # node to take claims at once
    options = BedOptions(nodes=args.nodes, scheduler_flags=["--node-hold-down", "10s"])
    with LocalBed(options) as bed:
        soak = Soak(bed, rng, args.services, args.faults)
        try:
            run(soak, args, started)
        except HarnessError as exc:
            report(soak, time.monotonic() - started, seed)
            print(f"HARNESS FAILURE (not eipctl): {exc}", flush=True)
            print(bed.diagnostics(20), flush=True)
            return 2
        report(soak, time.monotonic() - started, seed)
        failed = bool(soak.duplicates or soak.lost)
    return 1 if failed else 0


def run(soak: Soak, args: argparse.Namespace, started: float) -> None:
    bed, rng = soak.bed, soak.rng
    with soak.step("setting up (reset, Services, first settle)"):
        bed.reset()
        soak.create(args.services)
        soak.settle_and_check(args.settle_timeout)
    while soak.iteration < args.iterations and time.monotonic() - started < args.time_limit:
        soak.iteration += 1
        began, wall = time.monotonic(), time.strftime("%H:%M:%S")
        with soak.step("starting the ARP watch"):
            watch = bed.client.start_arp_watch([ip for ip in soak.ip_of.values() if ip])
        try:
            count = rng.randint(1, 2)
            kinds = [soak.fault(n, count) for n in range(1, count + 1)]
            with soak.step(f"healing after {', '.join(kinds)}"):
                bed.heal()
        finally:
            with soak.step("stopping the ARP watch"):
                bed.client.stop_arp_watch(watch)
        doubles = [(watch.longest_double_answer(ip), ip) for ip in watch.ips]
        soak.double_answers += doubles
        worst_now = max(doubles, default=(0.0, ""))
        for kind in kinds:
            soak.double_by_kind[kind] = max(soak.double_by_kind.get(kind, 0.0), worst_now[0])
        with soak.step(f"settling after {', '.join(kinds)}"):
            soak.settle_and_check(args.settle_timeout)
        soak.iteration_times.append(time.monotonic() - began)
        print(
            f"  iteration {soak.iteration:3d} at {wall}: {', '.join(kinds):45s} "
            f"services={len(soak.ip_of):2d} settled in {soak.settle_times[-1]:.1f}s, "
            f"took {soak.iteration_times[-1]:.1f}s"
            + (f", two MACs for {worst_now[0]:.2f}s" if worst_now[0] else ""),
            flush=True,
        )


def report(soak: Soak, elapsed: float, seed: int) -> None:
    bed, times = soak.bed, soak.iteration_times
    print(f"iterations: {soak.iteration} in {elapsed:.0f}s (seed {seed})")
    print("faults: " + ", ".join(f"{k}={v}" for k, v in sorted(soak.faults.items())))
    print(f"duplicates: {len(soak.duplicates)}")
    print(f"lost services: {len(soak.lost)}")
    print(f"services whose IP changed: {len(soak.ip_changes)}")
    print(f"settle time: max {max(soak.settle_times, default=0.0):.1f}s")
    if times:
        mean = statistics.fmean(times)
        print(
            f"seconds per iteration: mean {mean:.1f} p50 {percentile(times, 50):.1f} "
            f"p95 {percentile(times, 95):.1f} max {max(times):.1f} "
            f"(1000 iterations: about {1000 * mean / 3600:.1f} h)"
        )
    worst = max(soak.double_answers, default=(0.0, "-"))
    print(f"longest two-MAC ARP answer during a fault: {worst[0]:.2f}s ({worst[1]})")
    print(
        "longest two-MAC ARP answer by fault kind (two-fault iterations count for both): "
        + ", ".join(f"{k}={v:.2f}s" for k, v in sorted(soak.double_by_kind.items()))
    )
    print(
        "longest dark time of any IP during an outage fault (target <= 0.1s): "
        + (", ".join(f"{k}={v:.2f}s" for k, v in sorted(soak.dark.items())) or "none drawn")
    )
    retried = bed.emulator.retried if bed.emulator is not None else {}
    print(
        "admin calls retried while the API restarted: "
        + (", ".join(f"{k}={v}" for k, v in sorted(retried.items())) or "none")
    )
    print(f"logs: {bed.run_dir}", flush=True)


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
