"""CPU of one liveness prober: N targets every interval, answered by N responders elsewhere.

The responders (`net.liveness.LivenessResponder`, one socket each on 127.0.x.y) run in a
child process under uvloop; the prober runs here, once under asyncio's own loop and once
under uvloop (the scheduler's loop). Prints, per loop: probes sent per second; replies
accepted per probe sent (100 % is no loss; replies to probes sent just before the window
can tip it over); the prober process's CPU (% of one core, user + system, from getrusage)
and per packet handled (a probe sent or a reply read); and the child's CPU for scale (it
answers 10,000 probes/s here; a real controller answers one per scheduler replica per
interval). With --judge each accepted reply also goes to the scheduler's judge
(`scheduler.node_watch.NodeWatch.heard` over a `core.liveness.Liveness`, as the scheduler
hands it every reply), so the figure is the scheduler's whole per-reply path. Figures only;
nothing is asserted.

Run: python benchmarks/bench_liveness_udp.py [--targets 1000] [--interval 0.1] [--seconds 10]
        [--judge]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import structlog

from eipctl.core.liveness import Liveness
from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.metrics import REGISTRY
from eipctl.net.liveness import LivenessProber, LivenessResponder
from eipctl.scheduler.node_watch import NodeWatch

WARMUP = 1.0  # s of probing before the measured window


def address(n: int) -> str:
    """127.0.x.y for responder n: 250 per /24 from 127.0.1.1 (all of 127/8 is loopback)."""
    return f"127.0.{1 + n // 250}.{1 + n % 250}"


def node(n: int) -> str:
    return f"node-{n:04d}"


def quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def run(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def serve(count: int) -> None:
    """Child: start `count` responders, print their ports as JSON, answer until stdin closes."""
    quiet()
    keyring = Keyring([bytes.fromhex(sys.stdin.readline().strip())])

    async def main() -> None:
        responders = [
            LivenessResponder(node(n), keyring, flags=lambda: Flag.NONE) for n in range(count)
        ]
        for n, responder in enumerate(responders):
            await responder.start(address(n), 0)
        print(json.dumps([r.port for r in responders]), flush=True)
        loop = asyncio.get_running_loop()
        eof = asyncio.Event()
        loop.add_reader(sys.stdin.fileno(), eof.set)
        await eof.wait()
        for responder in responders:
            responder.close()

    run("uvloop", main)


def probes_sent() -> float:
    return sum(
        REGISTRY.get_sample_value("eipctl_liveness_probes_sent_total", {"family": family}) or 0.0
        for family in ("ipv4", "ipv6")
    )


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def judge(targets: int) -> Callable[[str, Flag], object]:
    """The scheduler's judge of ``targets`` nodes, every one introduced: its `heard`."""
    loop = asyncio.get_running_loop()
    liveness = Liveness(4 * 0.1)
    watch = NodeWatch(
        liveness,
        clock=loop.time,
        kick=lambda: None,
        leading=lambda: True,
        identity="bench",
        set_targets=lambda _targets: None,
    )
    for n in range(targets):
        liveness.introduce(node(n), loop.time())
    return watch.heard


def measure(
    loop: str,
    keyring: Keyring,
    ports: list[int],
    interval: float,
    seconds: float,
    child: int,
    judged: bool,
) -> str:
    accepted = 0
    heard: Callable[[str, Flag], object] = lambda _name, _flags: None  # noqa: E731

    def on_reply(name: str, flags: Flag) -> None:
        nonlocal accepted
        accepted += 1
        heard(name, flags)

    async def main() -> None:
        nonlocal accepted, heard
        if judged:
            heard = judge(len(ports))
        prober = LivenessProber(keyring, interval=interval, on_reply=on_reply)
        prober.set_targets({node(n): (address(n), port) for n, port in enumerate(ports)})
        task = asyncio.create_task(prober.run())
        await asyncio.sleep(WARMUP)
        seq0, sent0, cpu0, child0 = prober.seq, probes_sent(), cpu_self(), cpu_of(child)
        accepted, t0 = 0, time.monotonic()
        await asyncio.sleep(seconds)
        cpu, child_cpu, elapsed = cpu_self() - cpu0, cpu_of(child) - child0, time.monotonic() - t0
        task.cancel()  # no more probes; the replies in flight still count
        rounds, sent = prober.seq - seq0, probes_sent() - sent0
        await asyncio.sleep(0.5)
        prober.close()
        await prober.wait_closed()
        results.append(
            f"{loop:8} {sent / elapsed:6.0f} probes/s, "
            f"replies/probes {accepted / max(sent, 1):6.1%}, "
            f"prober CPU {cpu / elapsed:6.1%} of a core "
            f"({cpu / max(sent + accepted, 1) * 1e6:4.1f} us/packet), responders' process "
            f"{child_cpu / elapsed:6.1%}; {rounds} rounds in {elapsed:.1f} s"
        )

    results: list[str] = []
    run(loop, main)
    return results[0]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--loops", default="asyncio,uvloop")
    parser.add_argument("--judge", action="store_true", help="replies also go to the judge")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    quiet()
    key = os.urandom(32)
    keyring = Keyring([key])
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(args.targets)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(key.hex() + "\n")
        child.stdin.flush()
        ports = json.loads(child.stdout.readline())
        print(
            f"{args.targets} targets every {args.interval * 1000:.0f} ms, "
            f"{args.seconds:.0f} s measured per loop, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.2f}"
            + (", each reply judged (NodeWatch.heard)" if args.judge else "")
        )
        for loop in args.loops.split(","):
            print(
                measure(loop, keyring, ports, args.interval, args.seconds, child.pid, args.judge),
                flush=True,
            )
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
