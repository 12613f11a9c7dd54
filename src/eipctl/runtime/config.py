"""Typed settings of each eipctl process; every field is a flag (see `runtime/settings.py`).

The failover-related defaults are chosen together; docs/liveness.md has the arithmetic:
liveness probes every 100 ms, a node dead after 400 ms without a reply (the scheduler's
--liveness-timeout), scheduler Lease 1 s / renew deadline 0.8 s / retry 0.2 s (the
allocator's and nodeips' 15 s / 10 s / 2 s: no failover waits for them); controllers
fence after 2.5 s without the API (--fence-timeout; at once when the probes stop too) and
write an API heartbeat every 10 s, for people only. Both timeouts were once --node-timeout;
that name is still read, with a deprecation warning (`runtime.settings.Deprecation`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any

from eipctl.kube.leader import LeaderElectionConfig
from eipctl.runtime.settings import setting
from eipctl.runtime.values import (
    BindAddress,
    int_range,
    one_of,
    parse_bind_address,
    parse_bool,
    parse_duration,
    parse_text,
    positive_duration,
    readable_file,
)

POLICIES = ("spread", "single", "all")


def _default_identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class CommonSettings:
    config: str | None = setting(
        None,
        parse_text,
        "YAML file of flag values, e.g. a mounted ConfigMap (top-level keys for every command, "
        "a map per command); a key no command has is refused",
    )
    kubeconfig: str | None = setting(
        None, readable_file, "kubeconfig path; unset: in-cluster config, then ~/.kube/config"
    )
    log_format: str = setting("text", one_of(("text", "json")), "log format: text or json")
    log_level: str = setting(
        "info", one_of(("debug", "info", "warning", "error")), "minimum log level"
    )
    metrics_bind_address: BindAddress = setting(
        ":9090", parse_bind_address, "where /metrics listens; 0 disables"
    )
    health_probe_bind_address: BindAddress = setting(
        ":9091", parse_bind_address, "where /healthz and /readyz listen; 0 disables"
    )


def _lease_duration(default: str) -> Any:
    return setting(default, positive_duration, "how long a Lease is valid after its last renewal")


def _renew_deadline(default: str) -> Any:
    return setting(
        default, positive_duration, "a leader that has not renewed for this long stops acting"
    )


def _retry_period(default: str) -> Any:
    return setting(
        default, positive_duration, "how often leaders renew and standbys try to acquire"
    )


@dataclass(frozen=True)
class LeaderSettings:
    leader_elect: bool = setting("true", parse_bool, "run leader election (off: act alone)")
    lease_namespace: str = setting(
        os.environ.get("POD_NAMESPACE", "eipctl-system"), parse_text, "namespace of the Lease"
    )
    identity: str = setting(
        _default_identity(),
        parse_text,
        "holder identity in the Lease",
        shown="$POD_NAME, else HOSTNAME-PID",
    )
    lease_duration: float = _lease_duration("1s")
    renew_deadline: float = _renew_deadline("800ms")
    retry_period: float = _retry_period("200ms")

    def election(self, lease_name: str) -> LeaderElectionConfig:
        """What the leader elector of Lease `lease_name` needs from these settings."""
        return LeaderElectionConfig(
            lease_name=lease_name,
            namespace=self.lease_namespace,
            identity=self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )

    def check(self) -> None:
        """Reject timings under which two leaders could act at once."""
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "--retry-period < --renew-deadline < --lease-duration must hold "
                f"(got {self.retry_period}s, {self.renew_deadline}s, {self.lease_duration}s)"
            )


@dataclass(frozen=True)
class PatientLeaderSettings(LeaderSettings):
    """The Lease of a leader-elected process that no failover waits for (the allocator,
    nodeips): client-go's timings, 15 s / 10 s / 2 s. The scheduler's 1 s Lease is the
    price of its failover budget (docs/leader-election.md); theirs would buy nothing, cost
    5 Lease writes and 5 reads a second, and hand over the term whenever the API server
    stalls past 0.8 s (a term start re-reads every cached object: 31 terms in 7 minutes
    for the allocator on the 1,000-node bench while it made 10,000 claims)."""

    lease_duration: float = _lease_duration("15s")
    renew_deadline: float = _renew_deadline("10s")
    retry_period: float = _retry_period("2s")


@dataclass(frozen=True)
class SchedulerSettings(LeaderSettings, CommonSettings):
    policy: str = setting("spread", one_of(POLICIES), "placement policy: spread, single or all")
    liveness_timeout: float = setting(
        "400ms",
        positive_duration,
        "a node that has answered no liveness probe for this long is dead (docs/liveness.md)",
    )
    node_timeout: float | None = setting(
        None,
        positive_duration,
        "deprecated old name of --liveness-timeout (the controller's --node-timeout was its "
        "fence timeout, now --fence-timeout); still read, with a warning",
        renamed_to="liveness-timeout",
    )
    liveness_interval: float = setting(
        "100ms", positive_duration, "how often every node is probed over UDP"
    )
    liveness_key_file: str | None = setting(
        None,
        parse_text,
        "file with the shared liveness key(s), one per line, first signs (a mounted Secret); "
        "waited for while missing or invalid (not ready meanwhile)",
    )
    liveness_secret: str = setting(
        "eipctl-liveness",
        parse_text,
        "Secret in --lease-namespace that the key file is mounted from: created with a new "
        "random key when the key file is missing and the Secret does not exist (never "
        "overwritten); empty: never created, the operator provides it",
    )
    node_key_namespace: str = setting(
        "eipctl-node-keys",
        parse_text,
        "namespace of the Secrets in which the controllers hand over their nodes' own "
        'liveness keys (docs/liveness.md, "Node keys"); empty: the cluster key only',
    )
    claim_unpooled_external_ips: bool = setting(
        "false",
        parse_bool,
        "also claim hand-set spec.externalIPs outside every allowManual pool (CVE-2020-8554 risk)",
    )
    default_prefix_length: int = setting(
        "32", int_range(1, 128), "prefix length for unpooled IPv4 claims (IPv6 uses 128)"
    )
    orphan_grace_period: float = setting(
        "30s", parse_duration, "delete a claim no Service references only after this long"
    )
    node_hold_down: float = setting(
        "10s",
        parse_duration,
        "a node declared dead and live again gets new claims only when no other node may take "
        "them, for this long (a flapping node; 0: off; docs/scheduler.md)",
    )
    rebalance: bool = setting("false", parse_bool, "even out claims after nodes join")
    rebalance_interval: float = setting(
        "30s", positive_duration, "how often rebalancing may move claims"
    )
    rebalance_max_moves: int = setting("5", int_range(1), "claims moved per rebalance interval")
    exclude_cordoned_nodes: bool = setting(
        "false",
        parse_bool,
        "move IPs off cordoned Nodes (spec.unschedulable) and place none there; off: only the "
        "label node.kubernetes.io/exclude-from-external-load-balancers and the taint "
        "eipctl.io/exclude-from-external-ips do (docs/operations.md)",
    )
    workers: int = setting("4", int_range(1, 64), "concurrent reconcile workers")

    def check(self) -> None:
        super().check()
        if self.liveness_key_file is None:
            raise ValueError(
                "--liveness-key-file is required: liveness probes are authenticated "
                "(docs/liveness.md, the Secret eipctl-liveness)"
            )
        if self.liveness_interval * 2 >= self.liveness_timeout:
            raise ValueError(
                f"--liveness-timeout ({self.liveness_timeout}s) must be more than twice "
                f"--liveness-interval ({self.liveness_interval}s): one lost reply is no death"
            )


@dataclass(frozen=True)
class AllocatorSettings(PatientLeaderSettings, CommonSettings):
    purge_on_pool_delete: bool = setting(
        "false",
        parse_bool,
        "deleting a pool releases its IPs (default: a finalizer holds the pool until they go)",
    )
    workers: int = setting("4", int_range(1, 64), "concurrent reconcile workers")
    serve_unclassed_load_balancers: bool = setting(
        "false",
        parse_bool,
        "also serve type LoadBalancer Services with no loadBalancerClass and no external-ip "
        "annotation (off: another LB controller may own them; see docs/allocator.md)",
    )


@dataclass(frozen=True)
class ControllerSettings(CommonSettings):
    # the controller runs on the host network: a wildcard bind would answer on the node's
    # every address, eipctl's external IPs included ([hostile]); the DaemonSet serves
    # /metrics through kube-rbac-proxy and binds the probes to status.hostIP
    metrics_bind_address: BindAddress = setting(
        "127.0.0.1:9482", parse_bind_address, "where /metrics listens; 0 disables"
    )
    health_probe_bind_address: BindAddress = setting(
        ":9483",
        parse_bind_address,
        "where /healthz and /readyz listen (deploy/ binds the node's own address); 0 disables",
    )
    node_name: str = setting(
        os.environ.get("NODE_NAME") or socket.gethostname(),
        parse_text,
        "name of this node's IpNode (the Kubernetes Node name)",
    )
    iface: str = setting(
        "auto",
        parse_text,
        "link that holds the claims (unless spec.link); auto: the Node's annotation "
        "eipctl.io/link, else the link holding its InternalIP (or --host-ip), else the "
        "default route's link",
    )
    host_ip: str = setting(
        os.environ.get("HOST_IP", ""),
        parse_text,
        "the node's own IP (the DaemonSet's status.hostIP): with --iface auto, the link "
        "holding it is found when the Node's InternalIPs cannot be read",
    )
    heartbeat_interval: float = setting(
        "10s",
        positive_duration,
        "how often the IpNode heartbeat (status.heartbeat, lastHeartbeatTime) is written; "
        "for kubectl, not for liveness",
    )
    api_check_interval: float = setting(
        "1s", positive_duration, "how often a read of our IpNode proves the API is reachable"
    )
    fence_timeout: float = setting(
        "2500ms",
        positive_duration,
        "no successful API read or write for this long: remove own addresses (fence)",
    )
    node_timeout: float | None = setting(
        None,
        positive_duration,
        "deprecated old name of --fence-timeout (the scheduler's --node-timeout was its "
        "liveness timeout, now --liveness-timeout); still read, with a warning",
        renamed_to="fence-timeout",
    )
    probe_silence: float = setting(
        "400ms",
        positive_duration,
        "no liveness probe for this long (the scheduler's --liveness-timeout): check the API "
        "at once and fence if it does not answer",
    )
    liveness_address: str = setting(
        "",
        parse_text,
        "IP where liveness probes are answered (default: the first address of the chosen "
        "link that is not eipctl's, an IPv4 one if there is one)",
    )
    liveness_port: int = setting("9473", int_range(1, 65535), "UDP port of liveness replies")
    liveness_key_file: str | None = setting(
        None,
        parse_text,
        "file with the shared liveness key(s), one per line (the Secret eipctl-liveness); "
        "waited for while missing or invalid (not ready meanwhile)",
    )
    resync_interval: float = setting(
        "30s",
        positive_duration,
        "full comparison of claims and link, repairing drift; refresh of the IpNode's labels",
    )
    announce_count: int = setting("3", int_range(1, 100), "gratuitous ARPs / NAs per add")
    announce_interval: float = setting(
        "1100ms", positive_duration, "spacing of announcements (past Linux arp locktime, 1 s)"
    )
    probe_timeout: float = setting(
        "200ms", parse_duration, "wait for another MAC to answer before adding; 0 skips the probe"
    )
    address_lifetime: float = setting(
        "2s",
        positive_duration,
        "netlink valid_lft of managed addresses (whole seconds), renewed every third of it "
        "until fenced; bounds how long a crashed or frozen controller's kernel answers",
    )
    cleanup_on_exit: bool = setting(
        "false", parse_bool, "remove managed addresses on SIGTERM (default: keep, for upgrades)"
    )
    restart_grace: float = setting(
        "15s",
        parse_duration,
        "on SIGTERM, keep addresses and ask the scheduler to wait this long before moving "
        "this node's IPs (a restart moves nothing); 0 disables",
    )
    bgp_link: str = setting(
        "eipctl-bgp",
        parse_text,
        "dummy link that holds the IPs of pools announced by BGP as host routes, for the "
        "node's FRR to redistribute (created when first needed); empty: every pool is l2",
    )
    frr_config: str = setting(
        "",
        parse_text,
        "file to render this node's FRR configuration into from the BGPPeers (the FRR "
        "container's reloader applies it); empty: the operator configures FRR and eipctl "
        "only manages the routes",
    )
    bgp_secret_namespace: str = setting(
        "eipctl-bgp",
        parse_text,
        "namespace of the Secrets a BGPPeer's passwordSecret names; the controller may read "
        "every Secret there, so it should hold BGP passwords and nothing else",
    )
    liveness_node_key_file: str = setting(
        "",
        parse_text,
        "file with this node's own liveness key, made there (0600) if missing and handed to "
        "the schedulers through --node-key-namespace, so that no other node can answer for "
        'this one (docs/liveness.md, "Node keys"); empty: the cluster key only',
    )
    node_key_namespace: str = setting(
        "eipctl-node-keys",
        parse_text,
        "namespace of the node-key Secrets: the controllers may write there, not read",
    )

    def check(self) -> None:
        """An API check slower than the timeout would fence a healthy node; a --host-ip
        that is no IP would find no link."""
        if self.liveness_key_file is None:
            raise ValueError(
                "--liveness-key-file is required: liveness probes are authenticated "
                "(docs/liveness.md, the Secret eipctl-liveness)"
            )
        if self.host_ip:
            try:
                ipaddress.ip_address(self.host_ip)
            except ValueError:
                raise ValueError(f"--host-ip: {self.host_ip!r} is not an IP address") from None
        if self.api_check_interval * 2 > self.fence_timeout:
            raise ValueError(
                f"--api-check-interval ({self.api_check_interval}s) must be at most half "
                f"--fence-timeout ({self.fence_timeout}s): one slow read is no partition"
            )


@dataclass(frozen=True)
class SandboxSettings:
    nodes: int = setting("3", int_range(1, 1000), "simulated nodes")
    services: int = setting("3", int_range(0, 1000), "demo Services annotated external-ip: auto")
    pool_cidr: str = setting("203.0.113.0/24", parse_text, "CIDR of the default pool")
    netns: bool = setting("false", parse_bool, "real network namespaces instead of in-memory links")
    duration: float = setting("0", parse_duration, "stop after this long; 0 runs until Ctrl-C")
    kubeconfig_out: str = setting(
        "sandbox.kubeconfig", parse_text, "where to write the kubeconfig for kubectl"
    )
    port: int = setting("0", int_range(0, 65535), "API port; 0 picks a free one")
    state_dir: str = setting(
        "sandbox-state", parse_text, "where the sandbox keeps its control socket and logs"
    )
    log_level: str = setting(
        "warning", one_of(("debug", "info", "warning", "error")), "log level of the components"
    )
    metrics: bool = setting(
        "false",
        parse_bool,
        "serve each process's /metrics on a free loopback port (listed in <state dir>/metrics.json"
        " and by `status`): the allocator, the scheduler, and this process' simulated nodes",
    )
