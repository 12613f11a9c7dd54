"""Floods at every liveness socket, from an attacker on the node network; prints figures.

On the netns bed (3 nodes, 2 scheduler replicas, 6 Services spread 2 per node; the client
opens a TCP connection to every IP every 20 ms), an attacker namespace on the bed's switch
(198.51.100.250, its own address: no spoofing) runs a sender written in C (compiled here
with gcc; sendmmsg, paced, bounded in packets and seconds: it stops by itself) at

- a controller's responder (node-1, UDP 9473), and
- each scheduler replica's prober socket, the leader's and the standby's (its ephemeral
  port, read with `ss` in the control namespace: an attacker on the pod network finds it in
  the source port of any probe that reaches it),

with each kind of datagram of the [hostile] issue:

- ``garbage``: random bytes, 64 per datagram;
- ``key-id``: a well-formed probe (reply, for a scheduler) under an unknown key id;
- ``mac``: well-formed, a key id in force (as if sniffed), the right node name, a wrong MAC;
- ``short`` / ``long``: a valid packet cut by 9 bytes, or with 100 bytes more;
- ``replay``: one real packet recorded with tcpdump (a scheduler's probe on its way to
  node-1; node-1's reply on its way to the replica, in the replica's own session) sent
  again and again from the attacker's address;
- at the responder only, the kinds [stability] added to the wire, each well formed under a
  key id in force with a wrong MAC: ``probe-ext`` (a probe carrying a leader's digest),
  ``peer-query`` (another node asking node-1 whether it hears a writer) and ``peer-reply``
  (an answer to a query node-1 never sent).

With ``--spoof`` every datagram carries a forged source (a raw socket): at the responder
the schedulers' address, at a scheduler node-1's, the sources the flood guard never denies
once they have been answered ten times (docs/liveness.md, "Under attack"). This is the
attacker that can forge source addresses, which most CNIs stop and a node's root can do.

Per step (`--seconds`, default 60): datagrams sent and the rate reached, the victim
process's CPU (% of one core, from /proc), its socket's kernel drops (`ss -uanm` in its
namespace: the filter's refusals and full-buffer drops), node.dead verdicts on live nodes in
the schedulers' logs, claims moved (placement polled every 0.5 s), the longest time any IP
went unanswered, and whether every IP is held by one node afterwards. Nothing is asserted.

Run as root: python benchmarks/bench_hostile.py [--seconds 60] [--rate 200000]
[--only responder,leader,standby] [--kinds garbage,key-id,mac,short,long,replay,probe-ext,...]
[--spoof]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from eipctl.core.liveness_wire import (
    DIGEST_LENGTH,
    Flag,
    Keyring,
    Kind,
    Packet,
    encode,
    peer_ext,
    probe_ext,
)
from eipctl.net.liveness import read_keyring
from eipctl.sandbox.testbed import BedOptions, LocalBed, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.checks import placement, spread_services
from eipctl.sandbox.testbed.network import CONTROL4
from figures import machine, skip_unless_root

ATTACKER4 = "198.51.100.250"
KINDS = ("garbage", "key-id", "mac", "short", "long", "replay")
RESPONDER_KINDS = ("probe-ext", "peer-query", "peer-reply")  # [stability]'s packet kinds
TARGETS = ("responder", "leader", "standby")
LIVENESS_PORT = 9473

SENDER_C = r"""
/* flood: send UDP datagrams to one address at a paced rate, then stop.
   usage: flood IP PORT RATE SECONDS MODE HEX [SOURCE]
   MODE: exact (HEX as is), random (random bytes, as many as HEX has), mac (HEX with its
   last 16 bytes random), keyid (HEX with bytes 24..27 random). SOURCE: an IPv4 address to
   forge as the source (a raw socket writes the IP and UDP headers). Prints "sent seconds". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#define BATCH 64
static unsigned long long rng = 88172645463325252ULL;
static unsigned char next_byte(void) {
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned char)rng;
}
static double now(void) {
  struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: flood IP PORT RATE SECONDS MODE HEX [SOURCE]\n"); return 2;
  }
  double rate = atof(argv[3]), seconds = atof(argv[4]);
  const char *mode = argv[5], *hex = argv[6];
  size_t len = strlen(hex) / 2;
  if (len == 0 || len > 1024) return 2;
  unsigned char tmpl[1024];
  for (size_t i = 0; i < len; i++) sscanf(hex + 2 * i, "%2hhx", &tmpl[i]);
  rng ^= (unsigned long long)getpid() << 20;
  int spoof = argc == 8;
  size_t off = spoof ? 28 : 0; /* the IPv4 and UDP headers a raw socket sends */
  int fd = spoof ? socket(AF_INET, SOCK_RAW, IPPROTO_RAW) : socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) { perror("socket"); return 1; }
  int big = 1 << 22;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  struct sockaddr_in to = {0}, from = {0};
  to.sin_family = AF_INET; to.sin_port = htons(atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) return 2;
  if (spoof && inet_pton(AF_INET, argv[7], &from.sin_addr) != 1) return 2;
  if (!spoof && connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
    perror("connect"); return 1;
  }
  unsigned char head[28] = {0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17};
  size_t total_len = 28 + len;
  head[2] = (unsigned char)(total_len >> 8); head[3] = (unsigned char)total_len;
  memcpy(head + 12, &from.sin_addr, 4); memcpy(head + 16, &to.sin_addr, 4);
  head[20] = 0x9c; head[21] = 0x40; /* source port 40000 */
  memcpy(head + 22, &to.sin_port, 2);
  head[24] = (unsigned char)((8 + len) >> 8); head[25] = (unsigned char)(8 + len);
  static unsigned char buf[BATCH][1100];
  struct mmsghdr msgs[BATCH]; struct iovec iov[BATCH];
  memset(msgs, 0, sizeof msgs);
  for (int i = 0; i < BATCH; i++) {
    if (spoof) memcpy(buf[i], head, off);
    memcpy(buf[i] + off, tmpl, len);
    iov[i].iov_base = buf[i]; iov[i].iov_len = off + len;
    msgs[i].msg_hdr.msg_iov = &iov[i]; msgs[i].msg_hdr.msg_iovlen = 1;
    if (spoof) { msgs[i].msg_hdr.msg_name = &to; msgs[i].msg_hdr.msg_namelen = sizeof to; }
  }
  long total = (long)(rate * seconds), sent = 0;
  double start = now(), t = 0;
  while (sent < total && (t = now() - start) < seconds + 1.0) {
    long due = (long)(t * rate);
    if (due > total) due = total;
    if (sent >= due) { struct timespec nap = {0, 50000}; nanosleep(&nap, NULL); continue; }
    int n = (due - sent) < BATCH ? (int)(due - sent) : BATCH;
    for (int i = 0; i < n; i++) {
      unsigned char *p = buf[i] + off;
      if (!strcmp(mode, "random")) for (size_t j = 0; j < len; j++) p[j] = next_byte();
      else if (!strcmp(mode, "mac"))
        for (size_t j = len - 16; j < len; j++) p[j] = next_byte();
      else if (!strcmp(mode, "keyid")) for (size_t j = 24; j < 28; j++) p[j] = next_byte();
    }
    int r = sendmmsg(fd, msgs, n, 0);
    if (r > 0) sent += r;
    else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED) {
      perror("sendmmsg"); break;
    }
  }
  printf("%ld %.3f\n", sent, now() - start);
  return 0;
}
"""


def compile_sender(directory: Path) -> Path:
    source, binary = directory / "flood.c", directory / "flood"
    source.write_text(SENDER_C)
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def datagram(kind: str, template: bytes) -> tuple[str, bytes]:
    """(sender mode, template bytes) for a kind of flood built on a valid ``template``."""
    if kind == "garbage":
        return "random", bytes(64)
    if kind == "key-id":
        return "keyid", template
    if kind in ("mac", *RESPONDER_KINDS):
        return "mac", template
    if kind == "short":
        return "exact", template[:-9]
    if kind == "long":
        return "exact", template + bytes(100)
    return "exact", template  # replay


def capture(ns: str, expression: str, directory: Path) -> bytes:
    """The UDP payload of the next datagram matching ``expression`` in ``ns`` (tcpdump):
    the recording an attacker on the path would replay."""
    path = directory / "capture.pcap"
    subprocess.run(
        ["ip", "netns", "exec", ns, "tcpdump", "-i", "eth0", "-c", "1", "-w", str(path),
         "-U", expression],
        check=True, capture_output=True, timeout=15,
    )  # fmt: skip
    raw = path.read_bytes()
    frame = raw[24 + 16 :]  # pcap global header, one record header; Ethernet from here
    ip = frame[14:]
    header = (ip[0] & 0x0F) * 4
    return ip[header + 8 :]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def socket_drops(ns: str, port: int) -> int | None:
    """The kernel's drop count of the UDP socket bound to ``port`` in ``ns`` (ss -m: dN)."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "ss", "-uanmH", "sport", "=", f":{port}"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout
    found = re.findall(r"\bd(\d+)\)", out)
    return int(found[0]) if found else None


def scheduler_port(ns: str, pid: int) -> int:
    """The UDP port of the scheduler ``pid``'s prober socket (IPv4)."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "ss", "-uanpH"], check=False, capture_output=True, text=True
    ).stdout
    for line in out.splitlines():
        if f"pid={pid}," in line and "0.0.0.0:" in line:
            return int(line.split()[3].rsplit(":", 1)[1])
    raise RuntimeError(f"no IPv4 liveness socket of pid {pid} in {ns}")


class Moves:
    """Polls the claims' placement every 0.5 s and counts the changes."""

    def __init__(self, bed: LocalBed) -> None:
        self.bed = bed
        self.count = 0
        self._stop = threading.Event()
        self._last = placement(bed.kube.claims())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                now = placement(self.bed.kube.claims())
            except Exception:  # the API busy: poll again
                continue
            self.count += sum(1 for ip, n in now.items() if self._last.get(ip, n) != n)
            self._last = now

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.count


def step(
    bed: LocalBed,
    sender: Path,
    attacker: str,
    target: str,
    kind: str,
    seconds: float,
    rate: float,
    keys: Keyring,
    workdir: Path,
    spoof: bool = False,
) -> str:
    bed.reset()
    placed = spread_services(bed, "fl")
    control = bed.network.control
    assert control is not None
    node1 = bed.network.node("node-1")
    if target == "responder":
        victim = bed.controllers["node-1"]
        ns, host, port = node1.ns.name, node1.ip4, LIVENESS_PORT
        valid = encode(Packet(Kind.PROBE, "node-1", secrets.token_bytes(8), 1), keys)
        if kind == "replay":  # a real probe of a scheduler, recorded on the way in
            valid = capture(ns, f"udp and dst port {LIVENESS_PORT}", workdir)
        session = secrets.token_bytes(8)
        if kind == "probe-ext":
            ext = probe_ext(secrets.token_bytes(DIGEST_LENGTH), 3)
            valid = encode(Packet(Kind.PROBE_EXT, "node-1", session, 1, Flag.WRITER, ext), keys)
        if kind == "peer-query":
            valid = encode(Packet(Kind.PEER_QUERY, "node-1", session, 1), keys)
        if kind == "peer-reply":
            answer = Packet(Kind.PEER_REPLY, "node-2", session, 1, Flag.WRITER_HEARD, peer_ext(0))
            valid = encode(answer, keys)
    else:
        leader = bed.leader("scheduler")
        victim = (
            leader if target == "leader" else next(s for s in bed.schedulers if s is not leader)
        )
        assert victim.pid is not None
        ns, host = control.name, "198.51.100.3"
        port = scheduler_port(ns, victim.pid)
        valid = encode(Packet(Kind.REPLY, "node-1", secrets.token_bytes(8), 1, Flag.NONE), keys)
        if kind == "replay":  # a real reply to this replica, in its session, recorded
            valid = capture(ns, f"udp and src {node1.ip4} and dst port {port}", workdir)
    source = [] if not spoof else [CONTROL4 if target == "responder" else node1.ip4]
    mode, template = datagram(kind, valid)
    assert victim.pid is not None
    offsets = {s.name: s.log_size() for s in bed.schedulers}
    series = bed.client.start_probes(placed, interval=0.02)
    moves = Moves(bed)
    drops_before = socket_drops(ns, port) or 0
    cpu_before, started = cpu_seconds(victim.pid), time.monotonic()
    try:
        out = subprocess.run(
            [
                "ip", "netns", "exec", attacker, str(sender), host, str(port), str(rate),
                str(seconds), mode, template.hex(), *source,
            ],
            capture_output=True, text=True, check=True, timeout=seconds + 30,
        ).stdout.split()  # fmt: skip
        cpu = (cpu_seconds(victim.pid) - cpu_before) / (time.monotonic() - started)
        drops = (socket_drops(ns, port) or 0) - drops_before
        time.sleep(1.0)
    finally:
        moved = moves.stop()
        bed.client.stop_probes(series)
    sent, took = int(out[0]), float(out[1])
    deaths = sum(s.log_since(offsets[s.name]).count("node.dead") for s in bed.schedulers)
    dark = max(series.longest_loss(ip) for ip in placed)
    after = wait_for(lambda: placement(bed.kube.claims()) or None, 30, what="the claims")
    single = all(bed.holders(ip) == [after.get(ip)] for ip in placed)
    return (
        f"  {target:<9} {kind:<8}{' spoofed' if spoof else ''} "
        f"sent {sent:>9,} ({sent / took / 1000:6.1f}k/s)  "
        f"victim CPU {cpu * 100:5.1f} %  kernel drops {drops:>9,}  "
        f"node.dead {deaths:>2}  moved {moved:>2}  longest dark {dark * 1000:5.0f} ms  "
        f"one holder each {'yes' if single else 'NO'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=200_000.0, help="datagrams/s asked for")
    parser.add_argument("--only", type=lambda t: t.split(","), default=list(TARGETS))
    parser.add_argument("--kinds", type=lambda t: t.split(","), default=[*KINDS, *RESPONDER_KINDS])
    parser.add_argument(
        "--spoof", action="store_true", help="forge the source: a scheduler's, or node-1's"
    )
    args = parser.parse_args()
    skip_unless_root("bench_hostile")
    if shutil.which("gcc") is None:
        print("bench_hostile: gcc is needed for the sender (apt-get install gcc)")
        return 0
    install_signal_handlers()
    print(f"machine: {machine()}")
    print(f"each step {args.seconds:g} s at up to {args.rate:,.0f} datagrams/s asked for\n")
    with tempfile.TemporaryDirectory() as tmp, LocalBed(BedOptions(nodes=3)) as bed:
        sender = compile_sender(Path(tmp))
        keys = read_keyring(str(bed.key_file))
        attacker = bed.network.add_host("attacker", ATTACKER4)
        bed.reset()
        for target in args.only:
            for kind in args.kinds:
                if kind in RESPONDER_KINDS and target != "responder":
                    continue  # packets only a controller's responder takes
                print(
                    step(
                        bed,
                        sender,
                        attacker.name,
                        target,
                        kind,
                        args.seconds,
                        args.rate,
                        keys,
                        Path(tmp),
                        args.spoof,
                    ),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
