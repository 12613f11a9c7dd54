"""`eipctl controller`: the real edges (kubeconfig, netlink, raw sockets) around
`NodeController`. Runs on the stock asyncio loop (pyroute2's async netlink fails under
uvloop). Returns when `stop` is set; addresses stay on the link unless --cleanup-on-exit.

First the link is chosen (`LinkFinder`, rules in `core.link_choice`); without a usable one
the process keeps running, not ready, and looks again every `LINK_RETRY` seconds, so a link
that appears later is picked up. The choice is made once: a changed annotation or a new
default route takes effect at the next restart, never under claims already placed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from eipctl.core.link_choice import ANNOTATION_LINK, LinkChoice, choose_link, is_auto
from eipctl.core.naming import API_VERSION
from eipctl.kube.client import NODES, KubeApi, connect
from eipctl.kube.errors import ApiError, Forbidden, NotFound
from eipctl.kube.events import EventRecorder, reference
from eipctl.kube.verbs import Gets
from eipctl.net.announce import announce
from eipctl.net.errors import NetError
from eipctl.net.inventory import LinkInventory
from eipctl.net.link import Announcer, IPAddress, ProbeConflict, Prober
from eipctl.net.netlink import NetlinkLinkBackend
from eipctl.net.probe import probe
from eipctl.runtime.config import ControllerSettings
from eipctl.runtime.health import Health
from eipctl.runtime.liveness_key import KeyFile

from .node import NodeController, NodeSettings
from .node_key import load_or_create

log = structlog.get_logger(__name__)

PROBES = 3
LINK_RETRY = 2.0
"""Seconds between looks for a usable link while there is none."""


def make_prober(timeout: float) -> Prober | None:
    """`--probe-timeout` spread over three probes; 0 turns probing off."""
    if timeout <= 0:
        return None

    async def prober(link: str, ip: str | IPAddress, /) -> ProbeConflict | None:
        return await probe(link, ip, probes=PROBES, interval=timeout / PROBES)

    return prober


def make_announcer(count: int, interval: float) -> Announcer:
    async def announcer(
        link: str,
        ip: str | IPAddress,
        /,
        *,
        still_ours: Callable[[], bool] | None = None,
        on_round: Callable[[], None] | None = None,
    ) -> int:
        return await announce(
            link, ip, count=count, interval=interval, still_ours=still_ours, on_round=on_round
        )

    return announcer


@dataclass(frozen=True)
class NodeFacts:
    """What the core v1 Node says about the link: its annotation and InternalIPs."""

    annotation: str | None = None
    internal_ips: tuple[IPAddress, ...] = ()


def node_facts_of(obj: Mapping[str, Any]) -> NodeFacts:
    """`NodeFacts` of a Node object; malformed entries are skipped, not fatal."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    annotation = annotations.get(ANNOTATION_LINK)
    ips: list[IPAddress] = []
    for entry in (obj.get("status") or {}).get("addresses") or []:
        if isinstance(entry, Mapping) and entry.get("type") == "InternalIP":
            with contextlib.suppress(ValueError):
                ips.append(ipaddress.ip_address(str(entry.get("address"))))
    return NodeFacts(annotation if isinstance(annotation, str) else None, tuple(ips))


async def read_node_facts(api: Gets, node: str) -> NodeFacts:
    """The Node's `NodeFacts`; empty if there is no such Node or we may not read it (other
    API errors raise: guessing a link while the annotation is unknown could pick another)."""
    try:
        obj = await api.get(NODES, node)
    except (NotFound, Forbidden) as exc:
        log.info("node.unavailable", node=node, error=type(exc).__name__)
        return NodeFacts()
    return node_facts_of(obj)


class LinkFinder:
    """Chooses the link once, at start, and waits for one while there is none.

    Each problem is told once when it starts: a log line, and a Warning Event on the IpNode
    (reason `core.link_choice.Problem`); `not_ready` names it for /readyz meanwhile. With
    an explicit --iface the Node is not read (that flag works as it always did).
    """

    def __init__(
        self,
        *,
        node: str,
        flag: str,
        host_ip: str,
        api: Gets,
        inventory: LinkInventory,
        events: EventRecorder,
        retry: float = LINK_RETRY,
    ) -> None:
        self._node = node
        self._flag = flag
        self._host_ips = (ipaddress.ip_address(host_ip),) if host_ip else ()
        self._api = api
        self._inventory = inventory
        self._events = events
        self._retry = retry
        self._trouble: str | None = "not chosen yet"
        self._told: str | None = None
        self.choice: LinkChoice | None = None

    def not_ready(self) -> str | None:
        """Why there is no link yet (a readiness reason); None once one is chosen."""
        return self._trouble

    async def look(self) -> LinkChoice:
        """One look: the Node (unless --iface names the link), the host's links, the rules."""
        facts = (
            NodeFacts() if not is_auto(self._flag) else await read_node_facts(self._api, self._node)
        )
        host = await self._inventory.host_links()
        return choose_link(
            self._flag, facts.annotation, (*facts.internal_ips, *self._host_ips), host
        )

    async def wait(self) -> str:
        """Look until a usable link is found; returns its name."""
        while True:
            try:
                choice = await self.look()
            except (ApiError, NetError, TimeoutError) as exc:
                self._trouble = f"cannot look for the link: {str(exc) or type(exc).__name__}"
                self._tell(self._trouble, None)
            else:
                self.choice = choice
                if choice.ok and choice.link is not None:
                    self._chosen(choice, choice.link)
                    return choice.link
                self._trouble = choice.message
                self._tell(choice.message, choice)
            await asyncio.sleep(self._retry)

    def _involved(self) -> dict[str, Any]:
        return reference(API_VERSION, "IpNode", {"metadata": {"name": self._node}})

    def _tell(self, trouble: str, choice: LinkChoice | None) -> None:
        if trouble == self._told:
            return
        self._told = trouble
        log.warning("link.unusable", node=self._node, problem=trouble)
        if choice is not None and choice.problem is not None:
            self._events.emit(
                self._involved(),
                "Warning",
                choice.problem.value,
                f"{trouble}: {self._node} holds no external IPs until it is usable",
            )

    def _chosen(self, choice: LinkChoice, link: str) -> None:
        self._trouble = None
        log.info(
            "link.chosen",
            node=self._node,
            link=link,
            reason=str(choice.source),
            detail=choice.detail,
        )
        if self._told is not None:
            self._events.emit(self._involved(), "Normal", "LinkChosen", choice.message)


def node_settings(settings: ControllerSettings, link: str | None = None) -> NodeSettings:
    """`link`: the chosen one (`LinkFinder`); None takes --iface as it is (the sandbox)."""
    return NodeSettings.from_flags(settings, settings.iface if link is None else link)


async def run(settings: ControllerSettings, *, health: Health, stop: asyncio.Event) -> None:
    log.info(
        "controller.starting",
        node=settings.node_name,
        iface=settings.iface,
        heartbeat_interval=settings.heartbeat_interval,
        fence_timeout=settings.fence_timeout,
        probe_silence=settings.probe_silence,
        address_lifetime=settings.address_lifetime,
    )
    keyring = None
    if settings.liveness_key_file:
        # on a fresh install the Secret comes later (a scheduler creates it): wait, alive
        key_file = KeyFile(settings.liveness_key_file)
        health.add_readiness_reason("liveness-key", key_file.not_ready)
        keyring = await key_file.wait(stop)
        if keyring is None:
            return
    node_key = (
        load_or_create(settings.liveness_node_key_file)
        if settings.liveness_node_key_file and keyring is not None
        else None
    )
    backend = NetlinkLinkBackend()
    apis: list[KubeApi] = []
    events: EventRecorder | None = None
    try:
        api = await connect(settings.kubeconfig, request_timeout=10.0)
        apis.append(api)
        # a client of its own: API checks and heartbeats never queue behind another request
        heartbeat_api = await connect(settings.kubeconfig, request_timeout=settings.fence_timeout)
        apis.append(heartbeat_api)
        events = EventRecorder(api, "eipctl-controller", host=settings.node_name)
        finder = LinkFinder(
            node=settings.node_name,
            flag=settings.iface,
            host_ip=settings.host_ip,
            api=api,
            inventory=backend,
            events=events,
        )
        health.add_readiness_reason("link", finder.not_ready)
        link = await _until_stopped(finder.wait(), stop)
        if link is None:
            return
        controller = NodeController(
            node_settings(settings, link),
            api=api,
            heartbeat_api=heartbeat_api,
            backend=backend,
            announcer=make_announcer(settings.announce_count, settings.announce_interval),
            prober=make_prober(settings.probe_timeout),
            keyring=keyring,
            node_key=node_key,
        )
        health.add_liveness_check("controller-tasks", controller.live)
        health.add_readiness_check("ipnode-registered-and-claims-synced", controller.ready)
        await controller.run(stop)
    finally:
        if events is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await events.flush()
        for client in apis:
            with contextlib.suppress(Exception):
                await client.close()
        await backend.close()


async def _until_stopped(wait: Coroutine[Any, Any, str], stop: asyncio.Event) -> str | None:
    """`wait`'s answer, or None if `stop` is set first (SIGTERM while no link is found)."""
    task = asyncio.ensure_future(wait)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopped):
            pending.cancel()
        await asyncio.gather(task, stopped, return_exceptions=True)
    return task.result() if not task.cancelled() else None
