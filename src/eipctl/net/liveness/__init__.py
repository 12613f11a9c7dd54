"""Node liveness over UDP: a responder in each controller, a prober in each scheduler replica.

The packet and its keys are `core.liveness_wire` (read its docstring for why challenge/response
keeps a dead node from looking alive). Here are the sockets:

- `LivenessResponder` answers each authenticated probe for its own node with a reply carrying
  the controller's flags (FENCED while it holds nothing), once per seq (a replay gets no
  reply), and notes when the last valid probe came (`last_probe_at`), so a controller can
  tell that probes stopped arriving.
- `LivenessProber` sends one probe per interval to every target and calls ``on_reply(node,
  flags)`` for each reply that echoes one of its own recent probes, once. Judging liveness
  from those calls is the caller's business.

Bind a responder to the address the probers are given, not to a wildcard: a reply leaves
from the socket's address, and a prober counts a reply only from the (address, port) it
probed, so on a multi-homed node a wildcard socket could answer from another address.

Load: a prober with 1,000 targets at 100 ms sends 10,000 probes and reads as many replies a
second (benchmarks/bench_liveness_udp.py measures it). One round is not sent in one burst:
the targets go out in chunks of `CHUNK` spread over the interval, so a round's replies never
need more than a chunk's worth of the socket's receive buffer (a Linux default buffer holds
only ~250 small datagrams). Sends use the non-blocking socket directly: a full buffer drops
the probe (counted), it never waits and never queues.

Under a flood (docs/liveness.md, "Under attack"): every socket carries a kernel filter
(`core.liveness_filter`) that drops what is malformed or not for it before Python reads it
(one in 64 sampled through, counted x64); sockets are read in batches (`DatagramSocket`); the
responder denies a flooding source in the kernel (`core.flood.FloodGuard`); the prober's
`drain` lets the judge read what is queued before it judges. The kernel's own drop count per
socket is ``eipctl_liveness_kernel_drops``.

Every datagram not accepted is counted by role and reason (`eipctl_liveness_packets_rejected`)
and logged at debug (`liveness.packet.rejected`); per reason, at most one info line a minute
says how many there were. The reasons: `core.liveness_wire.WIRE_ERRORS` for both roles,
then ``not_probe``, ``other_node`` and ``replay`` (responder); ``not_reply``, ``session``,
``unknown_node``, ``source``, ``unsent_seq``, ``stale`` and ``replay`` (prober). A failed
send is counted by its errno name (`eipctl_liveness_send_errors`, ``EAGAIN``, ``ENOBUFS``,
``ENETUNREACH``...) and logged the same way (`liveness.packet.unsent`, a warning a minute).
"""

from .peers import PeerQuerier
from .prober import LivenessProber
from .responder import LivenessResponder
from .sockets import CHUNK, read_keyring

__all__ = ["CHUNK", "LivenessProber", "LivenessResponder", "PeerQuerier", "read_keyring"]
