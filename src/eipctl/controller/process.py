"""`eipctl controller`: the real edges (kubeconfig, netlink, raw sockets) around
`NodeController`. Runs on the stock asyncio loop (pyroute2's async netlink fails under
uvloop). Returns when `stop` is set; addresses stay on the link unless --cleanup-on-exit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from eipctl.kube.client import KubeApi, connect
from eipctl.net.announce import announce
from eipctl.net.link import Announcer, IPAddress, ProbeConflict, Prober
from eipctl.net.liveness import read_keyring
from eipctl.net.netlink import NetlinkLinkBackend
from eipctl.net.probe import probe
from eipctl.runtime.config import ControllerSettings
from eipctl.runtime.health import Health

from .node import NodeController, NodeSettings

log = structlog.get_logger(__name__)

PROBES = 3


def make_prober(timeout: float) -> Prober | None:
    """`--probe-timeout` spread over three probes; 0 turns probing off."""
    if timeout <= 0:
        return None

    async def prober(link: str, ip: str | IPAddress, /) -> ProbeConflict | None:
        return await probe(link, ip, probes=PROBES, interval=timeout / PROBES)

    return prober


def make_announcer(count: int, interval: float) -> Announcer:
    async def announcer(
        link: str, ip: str | IPAddress, /, *, still_ours: Callable[[], bool] | None = None
    ) -> int:
        return await announce(link, ip, count=count, interval=interval, still_ours=still_ours)

    return announcer


def node_settings(settings: ControllerSettings) -> NodeSettings:
    return NodeSettings(
        node=settings.node_name,
        link=settings.iface,
        heartbeat_interval=settings.heartbeat_interval,
        node_timeout=settings.node_timeout,
        resync_interval=settings.resync_interval,
        address_lifetime=settings.address_lifetime,
        cleanup_on_exit=settings.cleanup_on_exit,
        restart_grace=settings.restart_grace,
        api_check_interval=settings.api_check_interval,
        probe_silence=settings.probe_silence,
        liveness_address=settings.liveness_address,
        liveness_port=settings.liveness_port,
    )


async def run(settings: ControllerSettings, *, health: Health, stop: asyncio.Event) -> None:
    log.info(
        "controller.starting",
        node=settings.node_name,
        iface=settings.iface,
        heartbeat_interval=settings.heartbeat_interval,
        node_timeout=settings.node_timeout,
        probe_silence=settings.probe_silence,
        address_lifetime=settings.address_lifetime,
    )
    keyring = read_keyring(settings.liveness_key_file) if settings.liveness_key_file else None
    backend = NetlinkLinkBackend()
    apis: list[KubeApi] = []
    try:
        api = await connect(settings.kubeconfig, request_timeout=10.0)
        apis.append(api)
        # a client of its own: API checks and heartbeats never queue behind another request
        heartbeat_api = await connect(settings.kubeconfig, request_timeout=settings.node_timeout)
        apis.append(heartbeat_api)
        controller = NodeController(
            node_settings(settings),
            api=api,
            heartbeat_api=heartbeat_api,
            backend=backend,
            announcer=make_announcer(settings.announce_count, settings.announce_interval),
            prober=make_prober(settings.probe_timeout),
            keyring=keyring,
        )
        health.add_liveness_check("controller-tasks", controller.live)
        health.add_readiness_check("ipnode-registered-and-claims-synced", controller.ready)
        await controller.run(stop)
    finally:
        for client in apis:
            with contextlib.suppress(Exception):
                await client.close()
        await backend.close()
