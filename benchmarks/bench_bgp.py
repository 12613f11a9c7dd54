"""Failover through BGP on the netns bed, with default settings; prints figures, asserts nothing.

The bed of tests/e2e/test_scenarios_bgp.py (`BedOptions(nodes=3, bgp=True)`): bird as the
router (BFD 3 x 100 ms with every node), a far client behind it that reaches an external IP
only through the router's BGP routes, FRR in every node namespace configured by that node's
controller from two BGPPeers (one per family). docs/bgp.md has the design. Each story runs
`--trials` times on a healed, reset bed (`bed.reset()`, the pools applied again, bird's
sessions Established with BFD Up and stable for 1 s):

1. kill (policy spread): the holder killed (`bed.kill_node`: controller and FRR SIGKILL, link
   down) -> (a) the router's route via it withdrawn (BFD), (b) a route via the new holder
   installed, (c) the far client's longest outage, probing every 20 ms (a fresh TCP
   connection each, 200 ms timeout), (d) the claim Bound on the new node (API view).
2. ecmp (policy all, 3 nodes): a node killed -> its next hop gone from the router's multipath
   route; the far client's failed connections meanwhile (a connection every 20 ms, each hashed
   over the next hops: about a third should fail until the group shrinks).
3. fence: a node's controller cut from the API and its liveness path (`bed.cut_from_api`,
   `bed.cut_liveness`; since [stability] a cut from the API alone fences nothing) -> its next
   hop withdrawn
   (the controller fences after --fence-timeout 2.5 s and removes its addresses, FRR withdraws);
   reconnected -> the next hop back.
4. new: a Service created in a bgp pool -> external IP set, claim Bound, route at the router,
   first answer at the far client (time to a routed IP); also for a policy-all pool (route
   with every node's next hop).
5. switch: a pool switched l2 -> bgp under a Service (the router has the pool on-link for the
   l2 half, removed afterwards) -> route installed, address gone from the segment link; the
   far client's longest outage; then back bgp -> l2, likewise.
6. api (once, before the stories): API cost in a quiet window with BGP on and two bgp
   Services: every request each node's controller sends through its API relay and every watch
   event the relay hands back, by resource (counted in this process by wrapping the relays'
   byte pipes; the emulator keeps no request log), and the emulator's committed writes
   (its revision). The pool and peer watches' events per node per second are printed apart.

Run as root: python benchmarks/bench_bgp.py [--trials 5] [--stories kill,ecmp,fence,new,
switch,api] [--window 20] [--settle 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import functools
import json
import os
import re
import subprocess
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from eipctl.sandbox.relay import ApiRelay
from eipctl.sandbox.testbed import (
    BedOptions,
    LocalBed,
    ProbeSeries,
    Router,
    install_signal_handlers,
    routing_unavailable,
    wait_for,
)
from eipctl.sandbox.testbed.network import LINK, POOL4
from eipctl.sandbox.testbed.pools import SELECTOR_LABEL, labelled_pool
from eipctl.sandbox.testbed.router import FarClient
from eipctl.sandbox.testbed.routing import (
    BFD_INTERVAL_MS,
    BFD_MULTIPLIER,
    ROUTER4,
    ROUTER6,
    router_peer,
)
from figures import machine, percentile, skip_unless_root

SPREAD = "bench-bgp"
ALL = "bench-bgp-all"
SWITCHED = "bench-switch"
POOL_LABEL = SELECTOR_LABEL
PROBE_INTERVAL = 0.02
PROBE_TIMEOUT = 0.2
STORIES = ("api", "kill", "ecmp", "fence", "new", "switch")


POOLS = {
    SPREAD: labelled_pool("203.0.113.201", "203.0.113.215", "bgp", announce="bgp"),
    ALL: labelled_pool(
        "203.0.113.216", "203.0.113.225", "bgp-all", announce="bgp", placement="all"
    ),
    SWITCHED: labelled_pool("203.0.113.226", "203.0.113.235", "switch", announce="l2"),
}


# -- counting API traffic at the relays ------------------------------------------------------
WATCH_EVENT = re.compile(rb'\{"type":"(ADDED|MODIFIED|DELETED|BOOKMARK|ERROR)","object"')
TAIL = 64  # bytes kept between reads, so that an event's start split across two is still seen
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def classify(verb: str, target: str) -> tuple[str, str]:
    """(GET | LIST | WATCH | POST | ..., resource[/subresource]) of a request line's target."""
    url = urlsplit(target)
    parts = [p for p in url.path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if rest else url.path
    if len(rest) >= 3:
        resource += "/" + rest[2]
    if verb == "GET":
        watch = parse_qs(url.query).get("watch", [""])[0].lower()
        if watch in ("true", "1"):
            verb = "WATCH"
        elif len(rest) < 2:
            verb = "LIST"
    return verb, resource


def body_fields(body: bytes) -> str:
    """What a write's JSON body sets, e.g. ``status.heartbeat+lastHeartbeatTime`` (a JSON
    patch: the paths it touches); "?" when it is not JSON."""
    try:
        doc = json.loads(body)
    except ValueError:
        return "?"
    if isinstance(doc, list):
        return "+".join(sorted({str(op.get("path")) for op in doc if isinstance(op, dict)}))
    if not isinstance(doc, dict):
        return "?"
    parts = []
    for top in ("metadata", "spec", "status"):
        value = doc.get(top)
        if isinstance(value, dict):
            keys = sorted(k for k in value if k not in ("name", "resourceVersion"))
            if keys:
                parts.append(f"{top}." + "+".join(keys))
    return " ".join(parts) or "-"


class RequestParser:
    """HTTP/1.1 requests out of one connection's node -> API bytes (Content-Length bodies;
    a chunked body, which the clients here do not send, ends the parsing of that connection)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.need: int | None = None  # body bytes still expected
        self.head: tuple[str, str] = ("", "")
        self.broken = False

    def feed(self, data: bytes) -> list[tuple[str, str, bytes]]:
        """(verb, target, body) of every request completed by `data`."""
        if self.broken:
            return []
        self.buf += data
        done: list[tuple[str, str, bytes]] = []
        while True:
            if self.need is None:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return done
                lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
                del self.buf[: end + 4]
                verb, _, rest = lines[0].partition(" ")
                self.head = (verb, rest.rpartition(" ")[0])
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines[1:])
                }
                if "chunked" in headers.get("transfer-encoding", ""):
                    self.broken = True
                    done.append((*self.head, b""))
                    return done
                self.need = int(headers.get("content-length") or 0)
            if len(self.buf) < self.need:
                return done
            body = bytes(self.buf[: self.need])
            del self.buf[: self.need]
            self.need = None
            done.append((*self.head, body))


@dataclass
class RelayTally:
    """What each relay carried: requests (node -> API) by verb and resource, and the writes by
    what their bodies set; watch events (API -> node) by the resource of the request on that
    connection. Touched only on the bed's loop thread (the relays'); `snapshot` copies it
    there."""

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    changes: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(netns, "verb resource", what the body sets)."""
    events: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    last_resource: dict[int, str] = field(default_factory=dict)

    def request(self, netns: str, conn: int, verb: str, target: str, body: bytes) -> None:
        kind, resource = classify(verb, target)
        self.requests[(netns, kind, resource)] += 1
        self.last_resource[conn] = resource
        if kind in WRITES:
            self.changes[(netns, f"{kind} {resource}", body_fields(body))] += 1

    def answer(self, netns: str, conn: int, buf: bytes, seen: int) -> None:
        """Count the watch events in `buf` that end after its first `seen` bytes."""
        for m in WATCH_EVENT.finditer(buf):
            if m.end() > seen:
                resource = self.last_resource.get(conn, "?")
                self.events[(netns, resource, m.group(1).decode())] += 1

    def snapshot(self) -> RelayTally:
        return RelayTally(Counter(self.requests), Counter(self.changes), Counter(self.events))


async def counting_pipe(
    tally: RelayTally, relay: ApiRelay, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """`ApiRelay._pipe`, counting what passes. Both directions of a connection are told apart
    by the node-side socket (the relay's port is its local port) and share its transport."""
    sockname = writer.get_extra_info("sockname")
    to_node = isinstance(sockname, tuple) and sockname[1] == relay.port
    transport = writer.transport if to_node else getattr(reader, "_transport", None)
    conn = id(transport)
    parser = RequestParser()
    tail = b""
    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            if to_node:
                buf = tail + data
                tally.answer(relay.netns, conn, buf, len(tail))
                tail = buf[-TAIL:]
            else:
                for verb, target, body in parser.feed(data):
                    tally.request(relay.netns, conn, verb, target, body)


def instrument_relays(tally: RelayTally) -> None:
    """Every ApiRelay started from now on counts into `tally` (the bed starts its relays
    inside `LocalBed.start`, so this goes first; nothing of eipctl's is changed)."""
    original = ApiRelay.start

    async def start(self: ApiRelay) -> None:
        # an instance attribute wins over the static method `_accept` calls as self._pipe
        setattr(self, "_pipe", functools.partial(counting_pipe, tally, self))  # noqa: B010
        await original(self)

    ApiRelay.start = start  # type: ignore[method-assign]


# -- watching the router and the API from threads --------------------------------------------
class RouteWatch:
    """The router's route to `ip`, read every `interval` on a thread; `changes` holds (time of
    the read that saw it, next hops) for the first read and each change."""

    def __init__(self, router: Router, ip: str, interval: float = 0.01) -> None:
        self.router, self.ip, self.interval = router, ip, interval
        self.changes: list[tuple[float, list[str]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"routes-{ip}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last: list[str] | None = None
        while not self._stop.is_set():
            try:
                hops = self.router.routes(self.ip)
            except RuntimeError:
                hops = ["?"]
            at = time.monotonic()
            if hops != last:
                self.changes.append((at, hops))
                last = hops
            self._stop.wait(self.interval)

    def first(self, predicate: Callable[[list[str]], bool], after: float) -> float | None:
        """When the route first satisfied `predicate` after `after` (a read's time)."""
        for at, hops in self.changes:
            if at >= after and predicate(hops):
                return at
        return None

    def wait(
        self, predicate: Callable[[list[str]], bool], after: float, timeout: float, what: str
    ) -> float:
        """`first`, waited for; the seconds from `after`."""
        found = wait_for(
            lambda: self.first(predicate, after), timeout, interval=0.01, what=f"route {what}"
        )
        return float(found) - after

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class Stamp:
    """Polls `predicate` on a thread until it returns something truthy: `at` is when (the end
    of that poll), `value` what it returned. Errors of a poll are kept and polling goes on."""

    def __init__(self, predicate: Callable[[], Any], timeout: float, interval: float = 0.02):
        self.at: float | None = None
        self.value: Any = None
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(predicate, timeout, interval), daemon=True
        )
        self._thread.start()

    def _run(self, predicate: Callable[[], Any], timeout: float, interval: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                value = predicate()
            except Exception as exc:  # a transient API error: try again
                self.error = exc
                value = None
            if value:
                self.at, self.value = time.monotonic(), value
                return
            self._stop.wait(interval)

    def result(self, what: str) -> tuple[float, Any]:
        """(when, value), waited for; raises if the poll timed out."""
        self._thread.join()
        if self.at is None:
            raise TimeoutError(f"{what}: not seen (last error: {self.error!r})")
        return self.at, self.value

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# -- the bed ---------------------------------------------------------------------------------
def router_of(bed: LocalBed) -> tuple[Router, FarClient]:
    assert bed.router is not None and bed.router.far_client is not None
    return bed.router, bed.router.far_client


def bound_on(bed: LocalBed, ip: str, not_on: str = "") -> str | None:
    """The node the claim of `ip` is Bound on (None: not Bound, or Bound on `not_on`)."""
    claim = bed.kube.claim_for(ip) or {}
    status = claim.get("status") or {}
    node = (claim.get("spec") or {}).get("nodeName")
    if not node or node == not_on:
        return None
    return str(node) if status.get("phase") == "Bound" and status.get("boundNode") == node else None


def all_bound(bed: LocalBed, ip: str, count: int) -> str | None:
    """Policy all: "n nodes" once `count` per-node claims of `ip` are Bound on their nodes."""
    bound = 0
    for claim in bed.kube.claims():
        spec, status = claim.get("spec") or {}, claim.get("status") or {}
        mine = spec.get("ip") == ip and spec.get("nodeBound") and spec.get("nodeName")
        if mine and status.get("phase") == "Bound" and status.get("boundNode") == spec["nodeName"]:
            bound += 1
    return f"{bound} nodes" if bound >= count else None


def placed_off(bed: LocalBed, ip: str, node: str) -> str | None:
    """The node the claim of `ip` is placed on (spec.nodeName), if another than `node`."""
    placed = ((bed.kube.claim_for(ip) or {}).get("spec") or {}).get("nodeName")
    return str(placed) if placed and placed != node else None


def holder(bed: LocalBed, ip: str, timeout: float = 15.0) -> str:
    return str(wait_for(lambda: bound_on(bed, ip), timeout, what=f"{ip} Bound"))


def hops_of(bed: LocalBed, nodes: list[str]) -> list[str]:
    return sorted(bed.node(n).ip4 for n in nodes)


def new_service(bed: LocalBed, name: str, label: str) -> str:
    bed.kube.create_service(name, labels={POOL_LABEL: label})
    return bed.wait_for_ip(name)


def bird_routes(bed: LocalBed) -> list[str]:
    """The router's kernel routes from bird, both families."""
    router, _ = router_of(bed)
    assert router.ns is not None
    found = []
    for family in ("-4", "-6"):
        out = router.ns.ip(f"{family} -j route show proto bird", check=False) or "[]"
        found += [str(r.get("dst")) for r in json.loads(out)]
    return found


def apply_pools(bed: LocalBed) -> None:
    for name, spec in POOLS.items():
        bed.kube.apply_pool(name, spec)


def prepare(bed: LocalBed) -> None:
    """As the e2e fixture: healed, Services gone, pools as they were, every session up and
    stable; and the router without a route left from the previous trial."""
    try:
        bed.reset()
    except RuntimeError as exc:  # reset cleaned up by hand; say so and go on
        print(f"    (reset: {exc})", flush=True)
    apply_pools(bed)
    router, _ = router_of(bed)
    router.wait_established(timeout=30)
    wait_for(lambda: not bird_routes(bed), 15, interval=0.1, what="the router's BGP routes gone")


def failed_probes(series: ProbeSeries, ip: str, start: float, end: float) -> tuple[int, int]:
    """(failed, all) probes sent in [start, end)."""
    sent = [s for s in series.of(ip) if start <= s.sent < end]
    return sum(1 for s in sent if not s.answer), len(sent)


# -- the stories: each returns {figure key: value} -------------------------------------------
Figures = dict[str, float]


def story_kill(bed: LocalBed, trial: int) -> tuple[Figures, str]:
    router, far = router_of(bed)
    ip = new_service(bed, f"bgp-kill-{trial}", "bgp")
    victim = holder(bed, ip)
    hop = bed.node(victim).ip4
    router.wait_routes(ip, [hop], timeout=15)
    wait_for(lambda: far.ask(ip, timeout=0.5) == victim, 15, what=f"{victim} answering")
    watch = RouteWatch(router, ip)
    series = far.start_probes([ip], interval=PROBE_INTERVAL, timeout=PROBE_TIMEOUT)
    stamps: list[Stamp] = []
    try:
        time.sleep(0.3)
        killed_at = time.monotonic()
        bed.kill_node(victim)
        kill_call = time.monotonic() - killed_at
        placed = Stamp(lambda: placed_off(bed, ip, victim), 15)
        rebound = Stamp(lambda: bound_on(bed, ip, not_on=victim), 15)
        stamps += [placed, rebound]
        withdrawn = watch.wait(lambda h: hop not in h, killed_at, 15, "withdrawn")
        installed = watch.wait(lambda h: any(x != hop for x in h), killed_at, 15, "via another")
        placed_at, _ = placed.result("the claim placed on another node")
        bound_at, new = rebound.result("the claim Bound on another node")
        wait_for(lambda: far.ask(ip, timeout=0.3) == new, 10, what=f"{new} answering")
        time.sleep(0.3)
    finally:
        far.stop_probes(series)
        watch.stop()
        for stamp in stamps:
            stamp.stop()
    first = series.first_answer_after(ip, killed_at, by=new)
    last_old = max((s.sent for s in series.of(ip) if s.answer == victim), default=killed_at)
    figures = {
        "kill_withdrawn": withdrawn,
        "kill_placed": placed_at - killed_at,
        "kill_installed": installed,
        "kill_bound": bound_at - killed_at,
        "kill_answer": (first - killed_at) if first is not None else float("nan"),
        "kill_outage": series.longest_outage(ip),
        "kill_last_old": last_old - killed_at,
    }
    both = watch.first(lambda h: hop in h and len(h) > 1, killed_at)
    line = (
        f"{victim} killed (kill_node took {kill_call:.3f}s; last answer from it to a probe "
        f"sent {figures['kill_last_old']:+.3f}s) -> route withdrawn {withdrawn:.3f}s, claim "
        f"placed on {new} {figures['kill_placed']:.3f}s, route via {new} {installed:.3f}s, "
        f"claim Bound {figures['kill_bound']:.3f}s, first answer from {new} "
        f"{figures['kill_answer']:.3f}s; longest outage {figures['kill_outage']:.3f}s "
        f"(prober's longest pause {series.longest_probe_pause(ip):.3f}s)"
        + (" [both next hops for a while]" if both is not None else "")
    )
    return figures, line


def story_ecmp(bed: LocalBed, trial: int) -> tuple[Figures, str]:
    router, far = router_of(bed)
    ip = new_service(bed, f"bgp-ecmp-{trial}", "bgp-all")
    nodes = bed.node_names
    victim = nodes[trial % len(nodes)]
    rest = [n for n in nodes if n != victim]
    hop = bed.node(victim).ip4
    router.wait_routes(ip, hops_of(bed, nodes), timeout=15)
    before = far.spread(ip, count=30, timeout=0.5)
    watch = RouteWatch(router, ip)
    series = far.start_probes([ip], interval=PROBE_INTERVAL, timeout=PROBE_TIMEOUT)
    try:
        time.sleep(0.5)
        killed_at = time.monotonic()
        bed.kill_node(victim)
        left = watch.wait(lambda h: hop not in h, killed_at, 15, "without the dead node")
        time.sleep(1.0)
        router.wait_routes(ip, hops_of(bed, rest), timeout=10)
    finally:
        far.stop_probes(series)
        watch.stop()
    samples = series.of(ip)
    failed_before, _ = failed_probes(series, ip, series.started, killed_at)
    failed, during = failed_probes(series, ip, killed_at, killed_at + left)
    failed_after, _ = failed_probes(series, ip, killed_at + left, series.stopped)
    last_failed = max((s.sent for s in samples if not s.answer), default=killed_at)
    after = {s.answer for s in samples if s.sent >= killed_at + left}
    figures = {
        "ecmp_left": left,
        "ecmp_failed": float(failed + failed_after),
        "ecmp_fraction": failed / during if during else float("nan"),
        "ecmp_window": max(0.0, last_failed - killed_at),
    }
    line = (
        f"{victim} killed -> next hop gone after {left:.3f}s; failed connections "
        f"{failed}/{during} while it was in the group ({figures['ecmp_fraction']:.0%}), "
        f"{failed_after} after, {failed_before} before the kill; last failing one sent "
        f"{figures['ecmp_window']:.3f}s after the kill; before: {dict(before)}; "
        f"answering after: {sorted(str(a) for a in after)}"
    )
    return figures, line


def story_fence(bed: LocalBed, trial: int) -> tuple[Figures, str]:
    router, far = router_of(bed)
    ip = new_service(bed, f"bgp-fence-{trial}", "bgp-all")
    nodes = bed.node_names
    victim = nodes[(trial + 1) % len(nodes)]
    hop = bed.node(victim).ip4
    router.wait_routes(ip, hops_of(bed, nodes), timeout=15)
    watch = RouteWatch(router, ip)
    series = far.start_probes([ip], interval=PROBE_INTERVAL, timeout=PROBE_TIMEOUT)
    try:
        time.sleep(0.3)
        cut_at = time.monotonic()
        bed.cut_from_api(victim)  # cut from the API only it would hold, vouched for:
        bed.cut_liveness(victim)  # cut from the liveness path too, it fences
        gone = watch.wait(lambda h: hop not in h, cut_at, 20, f"without {victim}")
        time.sleep(0.5)
        sessions = router.sessions()
        reconnected_at = time.monotonic()
        bed.heal_liveness(victim)
        bed.reconnect_to_api(victim)
        back = watch.wait(lambda h: hop in h, reconnected_at, 30, f"with {victim} again")
        time.sleep(0.5)
    finally:
        far.stop_probes(series)
        watch.stop()
        with contextlib.suppress(Exception):
            bed.heal_liveness(victim)
            bed.reconnect_to_api(victim)
    failed_cut, _ = failed_probes(series, ip, cut_at, reconnected_at)
    failed_back, _ = failed_probes(series, ip, reconnected_at, series.stopped)
    down = sorted(name for name, state in sessions.items() if state != "Established")
    figures = {
        "fence_withdrawn": gone,
        "fence_restored": back,
        "fence_failed": float(failed_cut + failed_back),
    }
    line = (
        f"{victim} cut from the API and the liveness path -> next hop withdrawn after {gone:.3f}s "
        f"(sessions not Established then: {down or 'none'}); reconnected -> back after "
        f"{back:.3f}s; failed far connections {failed_cut} around the fence, {failed_back} "
        "around the return"
    )
    return figures, line


def time_to_route(bed: LocalBed, name: str, label: str) -> tuple[Figures, str]:
    """A Service created in the pool of `label`: IP set, claim Bound, routed, answered."""
    router, far = router_of(bed)
    want = 1 if label == "bgp" else len(bed.node_names)
    created_at = time.monotonic()
    bed.kube.create_service(name, labels={POOL_LABEL: label})
    found = wait_for(lambda: bed.kube.external_ips(name), 15, interval=0.01, what="an IP")
    ip = str(found[0])
    ip_at = time.monotonic()
    rebound = Stamp(
        (lambda: bound_on(bed, ip)) if want == 1 else (lambda: all_bound(bed, ip, want)), 15
    )
    watch = RouteWatch(router, ip)
    series = far.start_probes([ip], interval=PROBE_INTERVAL, timeout=PROBE_TIMEOUT)
    try:
        routed = watch.wait(lambda h: len(h) >= want, created_at, 15, "installed")
        wait_for(lambda: series.first_answer_after(ip, created_at), 10, what="an answer")
        bound_at, node = rebound.result("the claim Bound")
    finally:
        far.stop_probes(series)
        watch.stop()
        rebound.stop()
    first = series.first_answer_after(ip, created_at)
    assert first is not None
    figures = {
        "ip": ip_at - created_at,
        "bound": bound_at - created_at,
        "routed": routed,
        "answer": first - created_at,
    }
    line = (
        f"{label}: IP {figures['ip']:.3f}s, Bound on {node} {figures['bound']:.3f}s, "
        f"routed ({want} hop{'s' if want > 1 else ''}) {routed:.3f}s, "
        f"answered {figures['answer']:.3f}s"
    )
    return figures, line


def story_new(bed: LocalBed, trial: int) -> tuple[Figures, str]:
    figures: Figures = {}
    parts = []
    for key, label in (("new", "bgp"), ("new_all", "bgp-all")):
        found, line = time_to_route(bed, f"bgp-{key.replace('_', '-')}-{trial}", label)
        figures.update({f"{key}_{k}": v for k, v in found.items()})
        parts.append(line)
    return figures, "created -> " + "; ".join(parts)


def story_switch(bed: LocalBed, trial: int) -> tuple[Figures, str]:
    router, far = router_of(bed)
    assert router.ns is not None
    router.ns.ip(f"route add {POOL4} dev {LINK}")  # l2 pools are on-link for the router
    try:
        ip = new_service(bed, f"bgp-switch-{trial}", "switch")
        node = holder(bed, ip)
        wait_for(lambda: far.ask(ip, timeout=0.3) == node, 15, what="answered over l2")
        if router.routes(ip):
            raise RuntimeError(f"a route to {ip} before the switch: {router.routes(ip)}")
        hop = bed.node(node).ip4
        figures: Figures = {}
        for key, announce in (("to_bgp", "bgp"), ("to_l2", "l2")):
            watch = RouteWatch(router, ip)
            series = far.start_probes([ip], interval=PROBE_INTERVAL, timeout=PROBE_TIMEOUT)
            try:
                time.sleep(0.3)
                switched_at = time.monotonic()
                bed.kube.apply_pool(SWITCHED, {**POOLS[SWITCHED], "announce": announce})
                if announce == "bgp":
                    routed = watch.wait(lambda h: h == [hop], switched_at, 15, "installed")
                    wait_for(lambda: ip not in bed.node(node).external_addresses(), 10, 0.01)
                else:
                    routed = watch.wait(lambda h: h == [], switched_at, 15, "withdrawn")
                    wait_for(lambda: ip in bed.node(node).external_addresses(), 10, 0.01)
                segment = time.monotonic() - switched_at
                wait_for(lambda: far.ask(ip, timeout=0.3) == node, 10, what=f"{node} answering")
                time.sleep(0.5)
            finally:
                far.stop_probes(series)
                watch.stop()
            figures[f"{key}_route"] = routed
            figures[f"{key}_segment"] = segment
            figures[f"{key}_outage"] = series.longest_outage(ip)
            if bound_on(bed, ip) != node:
                raise RuntimeError(f"the claim of {ip} moved off {node}")
        line = (
            f"{ip} on {node}: l2 -> bgp: routed {figures['to_bgp_route']:.3f}s, off eth0 "
            f"{figures['to_bgp_segment']:.3f}s, longest outage {figures['to_bgp_outage']:.3f}s; "
            f"bgp -> l2: route gone {figures['to_l2_route']:.3f}s, on eth0 "
            f"{figures['to_l2_segment']:.3f}s, longest outage {figures['to_l2_outage']:.3f}s"
        )
        return figures, line
    finally:
        router.ns.ip(f"route del {POOL4} dev {LINK}", check=False)
        bed.kube.apply_pool(SWITCHED, POOLS[SWITCHED])


# -- 6: API cost in steady state -------------------------------------------------------------
def api_cost(bed: LocalBed, tally: RelayTally, window: float, settle: float) -> list[str]:
    """Requests and watch events per node per second through the nodes' relays, and the
    emulator's writes, over a quiet window with two bgp Services (spread and all)."""
    assert bed.loop is not None and bed.emulator is not None
    router, _ = router_of(bed)
    names = {relay.netns: name for name, relay in bed.relays.items()}
    nodes = bed.node_names
    spread = new_service(bed, "bgp-quiet", "bgp")
    everywhere = new_service(bed, "bgp-quiet-all", "bgp-all")
    router.wait_routes(spread, [bed.node(holder(bed, spread)).ip4], timeout=15)
    router.wait_routes(everywhere, hops_of(bed, nodes), timeout=15)
    time.sleep(settle)
    before = bed.loop.call(tally.snapshot)
    rev0 = int(bed.emulator.state()["revision"])
    started = time.monotonic()
    time.sleep(window)
    elapsed = time.monotonic() - started
    rev1 = int(bed.emulator.state()["revision"])
    after = bed.loop.call(tally.snapshot)
    requests = after.requests - before.requests
    events = after.events - before.events

    rate = len(nodes) * elapsed  # per node per second
    reqs: Counter[tuple[str, str]] = Counter()  # (verb, resource), every node summed
    evs: Counter[tuple[str, str]] = Counter()  # (resource, event type)
    for (ns, verb, resource), n in requests.items():
        if names.get(ns) in nodes:
            reqs[(verb, resource)] += n
    for (ns, resource, kind), n in events.items():
        if names.get(ns) in nodes:
            evs[(resource, kind)] += n
    by_verb: Counter[str] = Counter()
    writes: Counter[str] = Counter()
    for (verb, resource), n in reqs.items():
        by_verb[verb] += n
        if verb in WRITES:
            writes[resource] += n
    changed: Counter[str] = Counter()
    for (ns, what, fields), n in (after.changes - before.changes).items():
        if names.get(ns) in nodes:
            changed[f"{what} {fields}"] += n
    by_resource: Counter[str] = Counter()
    bookmarks = 0
    for (resource, kind), n in evs.items():
        by_resource[resource] += 0
        if kind == "BOOKMARK":
            bookmarks += n
        else:
            by_resource[resource] += n
    pool_peer = by_resource["ipclaimpools"] + by_resource["bgppeers"]
    watches = sorted(
        {r for (ns, v, r) in after.requests if v == "WATCH" and names.get(ns) in nodes}
    )

    def listed(counter: Counter[str]) -> str:
        return ", ".join(f"{k} {v / rate:.3f}" for k, v in sorted(counter.items())) or "none"

    out = [f"quiet window {elapsed:.1f}s after {settle:g}s settling; {len(nodes)} nodes"]
    out.append(f"emulator: {(rev1 - rev0) / elapsed:.2f} committed writes/s in all")
    out.append(f"node controllers, requests per node per s: {listed(by_verb)}")
    by_request = Counter({f"{verb} {resource}": n for (verb, resource), n in reqs.items()})
    out.append(f"  requests per node per s by resource: {listed(by_request)}")
    out.append(f"  write requests per node per s by resource: {listed(writes)}")
    out.append(
        f"  write requests per node per s by what they set (the emulator commits only those "
        f"that change something): {listed(changed)}"
    )
    out.append(
        f"  watch events per node per s by resource (bookmarks apart): {listed(by_resource)}"
    )
    out.append(
        f"  bookmarks per node per s (the emulator sends one a second per watch): "
        f"{bookmarks / rate:.3f}"
    )
    out.append(
        f"  pool and peer watches: {pool_peer / rate:.3f} events/node/s ({pool_peer} events "
        f"in the window; watches the controllers opened: {', '.join(watches)})"
    )
    sched = sum(n for (ns, _, _), n in requests.items() if names.get(ns) == "control")
    sched_events: Counter[str] = Counter()
    for (ns, resource, kind), n in events.items():
        if names.get(ns) == "control" and kind != "BOOKMARK":
            sched_events[resource] += n
    sched_reqs: Counter[str] = Counter()
    for (ns, verb, resource), n in requests.items():
        if names.get(ns) == "control":
            sched_reqs[f"{verb} {resource}"] += n
    replicas = len(bed.schedulers)
    out.append(
        f"schedulers ({replicas} replicas, through the control relay): {sched / elapsed:.2f} "
        f"requests/s; watch events per replica per node per s (bookmarks apart): "
        + (
            ", ".join(
                f"{r} {n / replicas / len(nodes) / elapsed:.3f}"
                for r, n in sorted(sched_events.items())
            )
            or "none"
        )
    )
    out.append(
        "  schedulers' requests/s: "
        + ", ".join(f"{k} {n / elapsed:.2f}" for k, n in sorted(sched_reqs.items()))
    )
    return out


# -- running, summing up ---------------------------------------------------------------------
ROWS: list[tuple[str, str, str]] = [  # key, figure, unit ("s" or "" for a count or ratio)
    ("kill_withdrawn", "spread, node killed -> router's route via it withdrawn", "s"),
    ("kill_last_old", "spread, node killed -> last probe the dead node answered (sent)", "s"),
    ("kill_placed", "spread, node killed -> claim placed on another node (scheduler)", "s"),
    ("kill_installed", "spread, node killed -> route via the new holder installed", "s"),
    ("kill_bound", "spread, node killed -> claim Bound on the new node (API)", "s"),
    ("kill_answer", "spread, node killed -> first far answer from the new holder", "s"),
    ("kill_outage", "spread, node killed: far client's longest outage (probe every 20 ms)", "s"),
    ("ecmp_left", "all (ECMP), node killed -> its next hop gone from the route", "s"),
    ("ecmp_failed", "all, node killed: failed far connections (one every 20 ms)", ""),
    ("ecmp_fraction", "all, node killed: share failing until the hop left", "%"),
    ("ecmp_window", "all, node killed -> last failing far connection sent", "s"),
    ("fence_withdrawn", "controller cut from the API -> its next hop withdrawn", "s"),
    ("fence_restored", "API reconnected -> next hop back", "s"),
    ("fence_failed", "fence and return: failed far connections", ""),
    ("new_ip", "new Service (spread) -> external IP set", "s"),
    ("new_bound", "new Service (spread) -> claim Bound", "s"),
    ("new_routed", "new Service (spread) -> route at the router", "s"),
    ("new_answer", "new Service (spread) -> far client answered", "s"),
    ("new_all_routed", "new Service (all) -> ECMP route with every node", "s"),
    ("new_all_answer", "new Service (all) -> far client answered", "s"),
    ("to_bgp_route", "pool l2 -> bgp -> route installed", "s"),
    ("to_bgp_segment", "pool l2 -> bgp -> address off the segment link", "s"),
    ("to_bgp_outage", "pool l2 -> bgp: far client's longest outage", "s"),
    ("to_l2_route", "pool bgp -> l2 -> route withdrawn", "s"),
    ("to_l2_segment", "pool bgp -> l2 -> address on the segment link", "s"),
    ("to_l2_outage", "pool bgp -> l2: far client's longest outage", "s"),
]


def fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{100 * value:.0f} %"
    if unit == "":
        return f"{value:g}"
    return f"{value:.3f} s"


def table(results: dict[str, list[float]]) -> list[str]:
    out = ["| figure | n | p50 | p95 | max |", "|---|---|---|---|---|"]
    for key, label, unit in ROWS:
        values = [v for v in results.get(key, []) if v == v]  # NaN: not measured
        if not values:
            continue
        cells = [fmt(percentile(values, q), unit) for q in (50, 95)] + [fmt(max(values), unit)]
        out.append(f"| {label} | {len(values)} | " + " | ".join(cells) + " |")
    return out


def run_story(
    bed: LocalBed,
    name: str,
    story: Callable[[LocalBed, int], tuple[Figures, str]],
    trials: int,
    results: dict[str, list[float]],
    failures: list[str],
) -> None:
    print(f"\n--- {name}", flush=True)
    for trial in range(trials):
        started = time.monotonic()
        try:
            prepare(bed)
            figures, line = story(bed, trial)
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            failures.append(f"{name} trial {trial + 1}: {why}")
            print(f"  trial {trial + 1}: FAILED ({why})", flush=True)
            print("    " + traceback.format_exc().strip().splitlines()[-3], flush=True)
            with contextlib.suppress(Exception):
                bed.heal()
            continue
        for key, value in figures.items():
            results.setdefault(key, []).append(value)
        took = time.monotonic() - started
        print(f"  trial {trial + 1}: {line} [{took:.0f}s with the reset]", flush=True)


def commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--stories", default=",".join(STORIES), help="comma-separated subset")
    parser.add_argument("--window", type=float, default=20.0, help="API cost: seconds (10-30)")
    parser.add_argument("--settle", type=float, default=5.0, help="API cost: seconds before")
    args = parser.parse_args()
    stories = [s.strip() for s in args.stories.split(",") if s.strip()]
    unknown = sorted(set(stories) - set(STORIES))
    if unknown:
        parser.error(f"unknown stories {unknown}; known: {', '.join(STORIES)}")
    skip_unless_root("bench_bgp")
    if (reason := routing_unavailable()) is not None:
        print(f"bench_bgp: skipped ({reason})")
        return 0
    install_signal_handlers()
    began = time.monotonic()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {machine()}")
    print(f"started {now}, commit {commit()}")
    print(
        "settings: eipctl defaults (liveness probes every 100ms, scheduler liveness timeout 400ms, "
        "controller fence timeout 2.5s, address lifetime 2s); router bird, BFD "
        f"{BFD_MULTIPLIER} x {BFD_INTERVAL_MS} ms, hold 9s; 3 nodes; far client probe every "
        f"{PROBE_INTERVAL * 1000:.0f} ms, timeout {PROBE_TIMEOUT * 1000:.0f} ms"
    )
    tally = RelayTally()
    instrument_relays(tally)
    results: dict[str, list[float]] = {}
    failures: list[str] = []
    api_lines: list[str] = []
    options = BedOptions(nodes=3, bgp=True, fast=False, log_level="info")
    with LocalBed(options) as bed:
        for peer in (router_peer("router", ROUTER4), router_peer("router-v6", ROUTER6)):
            bed.kube.kubectl("apply", "-f", "-", stdin=json.dumps(peer))
        apply_pools(bed)
        router_of(bed)[0].wait_established(timeout=60)
        print(f"bed up after {time.monotonic() - began:.1f}s; logs: {bed.run_dir}", flush=True)
        if "api" in stories:
            print("\n--- api (steady state, BGP on)", flush=True)
            try:
                prepare(bed)
                api_lines = api_cost(bed, tally, max(10.0, args.window), args.settle)
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                failures.append(f"api: {why}")
                api_lines = [f"FAILED ({why})"]
            for line in api_lines:
                print(f"  {line}", flush=True)
        story_fns: dict[str, Callable[[LocalBed, int], tuple[Figures, str]]] = {
            "kill": story_kill,
            "ecmp": story_ecmp,
            "fence": story_fence,
            "new": story_new,
            "switch": story_switch,
        }
        for name in stories:
            if name in story_fns:
                run_story(bed, name, story_fns[name], args.trials, results, failures)
        print(f"\nlogs: {bed.run_dir}")
    print(f"\n=== BGP figures ({args.trials} trials per story)")
    for line in table(results):
        print(line)
    if api_lines:
        print("\nAPI cost in steady state with BGP on:")
        for line in api_lines:
            print(f"  {line}")
    if failures:
        print(f"\nfailed trials ({len(failures)}):")
        for line in failures:
            print(f"  {line}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload average after: {load}; took {time.monotonic() - began:.0f}s")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the bed is already cleaned up
        raise SystemExit(130) from None
