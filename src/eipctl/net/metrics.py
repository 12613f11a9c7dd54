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
