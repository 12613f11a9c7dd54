"""Metrics of the node controller, on the process-wide registry."""

from prometheus_client import Counter, Gauge, Histogram

from eipctl.metrics import REGISTRY

HEARTBEATS = Counter(
    "eipctl_controller_heartbeats",
    "IpNode heartbeat writes, by result (ok or error).",
    ["result"],
    registry=REGISTRY,
)
PROBES_SKIPPED = Counter(
    "eipctl_controller_probes_skipped",
    "Adds that skipped the address probe because the previous holder was declared dead.",
    registry=REGISTRY,
)
API_CHECKS = Counter(
    "eipctl_controller_api_checks",
    "Reads of the own IpNode that prove the API reachable, by result (ok or error).",
    ["result"],
    registry=REGISTRY,
)
API_SILENCE = Gauge(
    "eipctl_controller_api_silence_seconds",
    "Seconds since the API last answered this controller (a read or the heartbeat).",
    registry=REGISTRY,
)
FENCED = Gauge(
    "eipctl_controller_fenced",
    "1 while the controller has fenced itself (cut off: no API, no vouching leader, no "
    "quorum saying the control plane is down; docs/liveness.md).",
    registry=REGISTRY,
)
FENCE_TRANSITIONS = Counter(
    "eipctl_controller_fence_transitions",
    "Self-fencing transitions, by kind (fence or restore).",
    ["kind"],
    registry=REGISTRY,
)
ADDRESS_CHANGES = Counter(
    "eipctl_controller_address_changes",
    "Addresses added to or removed from the node's links, by action.",
    ["action"],
    registry=REGISTRY,
)
MANAGED_ADDRESSES = Gauge(
    "eipctl_controller_managed_addresses",
    "Managed addresses on the node's links after the last pass.",
    registry=REGISTRY,
)
CLAIM_CONFLICTS = Counter(
    "eipctl_controller_claim_conflicts",
    "Claims that could not be added because of a conflict, by reason.",
    ["reason"],
    registry=REGISTRY,
)
TAKEOVERS = Counter(
    "eipctl_controller_takeovers",
    "Addresses added although the probe was answered, by another eipctl node's MAC or a "
    "holder declared dead.",
    registry=REGISTRY,
)
NET_ERRORS = Counter(
    "eipctl_controller_net_errors",
    "Failed link operations, by operation.",
    ["op"],
    registry=REGISTRY,
)
TIME_TO_BOUND_SECONDS = Histogram(
    "eipctl_time_to_bound_seconds",
    "From this controller first seeing a claim placed on its node to the address being on "
    "the link and Bound requested.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
PASS_SECONDS = Histogram(
    "eipctl_controller_pass_seconds",
    "Duration of one reconcile pass over the node's links.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
FRR_CONFIG_APPLIED = Gauge(
    "eipctl_controller_frr_config_applied",
    "With --frr-config: 1 once FRR runs the configuration last rendered, 0 while the "
    "reloader refused it (BGPConfigured=False); by file (no series without --frr-config).",
    ["file"],
    registry=REGISTRY,
)
FRR_CONFIG_WRITES = Counter(
    "eipctl_controller_frr_config_writes",
    "With --frr-config: new versions of the node's FRR configuration written.",
    registry=REGISTRY,
)
HANDOVERS = Counter(
    "eipctl_controller_handovers",
    "Moved addresses this node held for their new node, by how the hold ended: bound (the "
    "new node bound it while held: no gap), expired (the hold ran out first: clients may "
    "have found nobody), released (the claim went or was unplaced), unknown (lookup failed).",
    ["result"],
    registry=REGISTRY,
)
HANDOVER_SECONDS = Histogram(
    "eipctl_controller_handover_seconds",
    "How long a moved address was held here until its new node bound it (make before break).",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0),
    registry=REGISTRY,
)
OUTAGE_HOLD = Gauge(
    "eipctl_controller_outage_hold",
    "1 while this controller keeps its addresses although its own API requests fail, by why "
    "that is safe: vouched (the writing leader's probes agree with its claims) or quorum "
    "(most nodes hear no writing leader: the control plane is down). docs/liveness.md.",
    ["reason"],
    registry=REGISTRY,
)
OUTAGE_VERDICTS = Counter(
    "eipctl_controller_outage_verdicts",
    "What the peers' answers said when this controller heard no writer and the API did not "
    "answer: outage (hold), writer_heard or unknown (let go).",
    ["verdict"],
    registry=REGISTRY,
)
