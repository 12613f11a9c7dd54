"""`NodeSettings`: what one node's controller is told by its flags, in a module of its own so
that the controller's parts (`departure`, `node`) can name it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from eipctl.core.node_keys import NODE_KEY_NAMESPACE


@dataclass(frozen=True)
class NodeSettings:
    node: str
    link: str
    heartbeat_interval: float
    node_timeout: float
    resync_interval: float
    address_lifetime: float
    cleanup_on_exit: bool = False
    restart_grace: float = 0.0
    api_check_interval: float = 1.0
    probe_silence: float = 0.4
    liveness_address: str = ""
    """Empty: the first address on `link` that is not eipctl's (`liveness_endpoint`)."""
    liveness_port: int = 0
    """0: any free port (tests); the process passes --liveness-port."""
    bgp_link: str = ""
    """The dummy link for pools announced by BGP; "" = no BGP (and no pool watch)."""
    frr_config: str = ""
    """Where this node's FRR configuration is rendered to; "" = the operator's FRR config."""
    bgp_secret_namespace: str = "eipctl-bgp"
    """Where a BGPPeer's passwordSecret is read (a namespace of BGP passwords only)."""
    node_key_namespace: str = NODE_KEY_NAMESPACE
    """Where this node's liveness key is handed to the schedulers (`controller.node_key`)."""

    @property
    def vouch_window(self) -> float:
        """How long one agreeing probe of the writer justifies holding: long enough for the
        guard to notice the writer's silence (`probe_silence`) and check the API and the
        peers (another `probe_silence`) before it lapses."""
        return max(1.0, 2 * self.probe_silence + 0.2)

    @property
    def renew_interval(self) -> float:
        """Lifetime renewal (and drift repair) cadence: three renewals per lifetime."""
        return min(self.address_lifetime / 3, self.resync_interval)
