"""`NodeSettings`: what one node's controller is told by its flags, in a module of its own so
that the controller's parts (`departure`, `node`, `link_reconciler`) can name it without
importing each other.

The flags are flat (`runtime.config.ControllerSettings`); here they are grouped by theme, one
small dataclass per group, each built from its flags by its `from_flags`. A part of the
controller is handed the group it needs (the link reconciler `AddressSettings`), and reads
`settings.addresses.lifetime` where it needs the whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eipctl.core.node_keys import NODE_KEY_NAMESPACE

if TYPE_CHECKING:
    from eipctl.runtime.config import ControllerSettings


@dataclass(frozen=True)
class LivenessSettings:
    """The liveness responder's endpoint and how long the schedulers' silence is borne: one
    group, since the responder, the peer list and the vouching window all read it."""

    address: str = ""
    """Empty: the first address on the link that is not eipctl's (`liveness_endpoint`)."""
    port: int = 0
    """0: any free port (tests); the process passes --liveness-port."""
    probe_silence: float = 0.4
    """No liveness probe for this long: check the API (and ask the peers) at once."""

    @classmethod
    def from_flags(cls, flags: ControllerSettings) -> LivenessSettings:
        return cls(
            address=flags.liveness_address,
            port=flags.liveness_port,
            probe_silence=flags.probe_silence,
        )

    @property
    def vouch_window(self) -> float:
        """How long one agreeing probe of the writer justifies holding: long enough for the
        guard to notice the writer's silence (`probe_silence`) and check the API and the
        peers (another `probe_silence`) before it lapses."""
        return max(1.0, 2 * self.probe_silence + 0.2)


@dataclass(frozen=True)
class FencingSettings:
    """When this node must let its addresses go: the fence and the API checks that feed it
    read these together (`api_check_interval` is at most half `fence_timeout`)."""

    fence_timeout: float
    """No successful API read or write for this long: fence (also bounds each API call)."""
    api_check_interval: float = 1.0

    @classmethod
    def from_flags(cls, flags: ControllerSettings) -> FencingSettings:
        return cls(fence_timeout=flags.fence_timeout, api_check_interval=flags.api_check_interval)


@dataclass(frozen=True)
class AddressSettings:
    """The managed addresses' lifetime and repair cadence: all the link reconciler needs of
    the settings, and what decides how often the reconcile loop runs."""

    lifetime: float
    """--address-lifetime: the addresses' netlink valid_lft, renewed until fenced."""
    resync_interval: float
    cleanup_on_exit: bool = False

    @classmethod
    def from_flags(cls, flags: ControllerSettings) -> AddressSettings:
        return cls(
            lifetime=flags.address_lifetime,
            resync_interval=flags.resync_interval,
            cleanup_on_exit=flags.cleanup_on_exit,
        )

    @property
    def renew_interval(self) -> float:
        """Lifetime renewal (and drift repair) cadence: three renewals per lifetime."""
        return min(self.lifetime / 3, self.resync_interval)

    @property
    def valid_lft(self) -> int:
        """netlink lifetimes are whole seconds; round up so they never undercut the flag."""
        return max(1, math.ceil(self.lifetime))


@dataclass(frozen=True)
class AnnounceSettings:
    """How pools announced by BGP reach the node's FRR: the route link, the rendered config
    and its passwords; all empty or unused while every pool is layer 2."""

    bgp_link: str = ""
    """The dummy link for pools announced by BGP; "" = no BGP (and no pool watch)."""
    frr_config: str = ""
    """Where this node's FRR configuration is rendered to; "" = the operator's FRR config."""
    bgp_secret_namespace: str = "eipctl-bgp"
    """Where a BGPPeer's passwordSecret is read (a namespace of BGP passwords only)."""

    @classmethod
    def from_flags(cls, flags: ControllerSettings) -> AnnounceSettings:
        return cls(
            bgp_link=flags.bgp_link,
            frr_config=flags.frr_config,
            bgp_secret_namespace=flags.bgp_secret_namespace,
        )


@dataclass(frozen=True)
class ApiSettings:
    """What this node writes into the API for the schedulers and people to read: its
    heartbeat, the restart grace it announces on SIGTERM, its own liveness key."""

    heartbeat_interval: float
    restart_grace: float = 0.0
    """On SIGTERM keep the addresses and ask the scheduler to wait this long; 0: off."""
    node_key_namespace: str = NODE_KEY_NAMESPACE
    """Where this node's liveness key is handed to the schedulers (`controller.node_key`)."""

    @classmethod
    def from_flags(cls, flags: ControllerSettings) -> ApiSettings:
        return cls(
            heartbeat_interval=flags.heartbeat_interval,
            restart_grace=flags.restart_grace,
            node_key_namespace=flags.node_key_namespace,
        )


@dataclass(frozen=True)
class NodeSettings:
    node: str
    link: str
    """The chosen link (`process.LinkFinder`): the claims' link unless spec.link."""
    api: ApiSettings
    fencing: FencingSettings
    addresses: AddressSettings
    liveness: LivenessSettings = field(default_factory=LivenessSettings)
    announcing: AnnounceSettings = field(default_factory=AnnounceSettings)

    @classmethod
    def from_flags(cls, flags: ControllerSettings, link: str) -> NodeSettings:
        return cls(
            node=flags.node_name,
            link=link,
            api=ApiSettings.from_flags(flags),
            fencing=FencingSettings.from_flags(flags),
            addresses=AddressSettings.from_flags(flags),
            liveness=LivenessSettings.from_flags(flags),
            announcing=AnnounceSettings.from_flags(flags),
        )
