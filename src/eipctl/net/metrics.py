"""Metrics of the networking edge, on the process-wide registry."""

from prometheus_client import Counter

from eipctl.metrics import REGISTRY

ANNOUNCEMENTS_SENT = Counter(
    "eipctl_announcements_sent",
    "Gratuitous ARPs and unsolicited neighbour advertisements sent, by address family.",
    ["family"],
    registry=REGISTRY,
)
PROBES_SENT = Counter(
    "eipctl_address_probes_sent",
    "ARP probes and DAD neighbour solicitations sent before adding an address.",
    ["family"],
    registry=REGISTRY,
)
PROBE_CONFLICTS = Counter(
    "eipctl_address_probe_conflicts",
    "Probes that found another MAC answering for the address.",
    ["family"],
    registry=REGISTRY,
)
LIVENESS_PROBES_SENT = Counter(
    "eipctl_liveness_probes_sent",
    "Node-liveness probes sent by this prober, by address family.",
    ["family"],
    registry=REGISTRY,
)
LIVENESS_REPLIES_ACCEPTED = Counter(
    "eipctl_liveness_replies_accepted",
    "Node-liveness replies accepted by this prober (each fresh reply counts once).",
    registry=REGISTRY,
)
LIVENESS_REPLIES_SENT = Counter(
    "eipctl_liveness_replies_sent",
    "Node-liveness replies sent by this responder.",
    registry=REGISTRY,
)
LIVENESS_PACKETS_REJECTED = Counter(
    "eipctl_liveness_packets_rejected",
    "Node-liveness datagrams dropped, by role (prober or responder) and reason.",
    ["role", "reason"],
    registry=REGISTRY,
)
LIVENESS_KERNEL_DROPS = Counter(
    "eipctl_liveness_kernel_drops",
    "Node-liveness datagrams the kernel dropped before this process read them, by role: "
    "refused by the socket filter (malformed, not ours) or the receive buffer was full.",
    ["role"],
    registry=REGISTRY,
)
LIVENESS_SEND_ERRORS = Counter(
    "eipctl_liveness_send_errors",
    "Node-liveness datagrams not sent, by role and reason (the errno name, e.g. EAGAIN).",
    ["role", "reason"],
    registry=REGISTRY,
)
LIVENESS_PEER_QUERIES = Counter(
    "eipctl_liveness_peer_queries_sent",
    "Queries a controller sent to its peers, asking whether they hear a writing leader "
    "(only while it hears none itself and the API does not answer).",
    registry=REGISTRY,
)
LIVENESS_PEER_ANSWERS = Counter(
    "eipctl_liveness_peer_answers",
    "Peer answers accepted by this controller, by what they said (writer_heard, no_writer).",
    ["answer"],
    registry=REGISTRY,
)
