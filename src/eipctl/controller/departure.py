"""A controller stopping on SIGTERM: bridge a restart, or hand the addresses over.

A restart (a rolling update) must move no IP: the addresses outlive the process by the
restart grace and the scheduler is told to wait as long. A node that is leaving (being
deleted, drained or excluded: `core.eligibility.leaving_reason`) gets no grace: its
addresses get one fresh lifetime while the scheduler moves the claims and the new holders
take over. docs/controller.md, "Stopping".
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from eipctl.core.eligibility import leaving_reason
from eipctl.kube.client import NODES, KubeApi

from .heartbeat import Heartbeat
from .link_reconciler import LinkReconciler
from .settings import NodeSettings

log = structlog.get_logger(__name__)


class Departure:
    def __init__(
        self,
        settings: NodeSettings,
        api: KubeApi,
        reconciler: LinkReconciler,
        heartbeat: Heartbeat,
    ) -> None:
        self.settings = settings
        self._api = api
        self._reconciler = reconciler
        self._heartbeat = heartbeat

    async def run(self) -> None:
        leaving = await self._leaving()
        if leaving is None:
            await self._announce_restart()
        else:
            await self._hand_over(leaving)

    async def _leaving(self) -> str | None:
        """Why our node is leaving (`core.eligibility.leaving_reason`), or None for a restart.
        A Node we cannot read (gone, forbidden, API down) counts as a restart: the old rule."""
        try:
            async with asyncio.timeout(self.settings.fencing.fence_timeout):
                node = await self._api.get(NODES, self.settings.node)
        except Exception as exc:  # NotFound, Forbidden, timeout: no evidence of a drain
            log.info("shutdown.node_unreadable", node=self.settings.node, error=repr(exc))
            return None
        return leaving_reason(node)

    async def _hand_over(self, reason: str) -> None:
        """The node is being drained, deleted or excluded: no restart grace. The addresses
        get one fresh lifetime, so they keep answering while the scheduler (which stops
        hearing us now) moves the claims and the new holders take over from our MAC."""
        kept = await self._reconciler.extend_lifetimes(self.settings.addresses.lifetime)
        log.info(
            "shutdown.handing_over",
            node=self.settings.node,
            reason=reason,
            addresses=kept,
            lifetime=self.settings.addresses.lifetime,
        )

    async def _announce_restart(self) -> None:
        """Bridge a restart: the addresses outlive this process by `restart_grace`, and the
        scheduler is told to wait that long before judging this node dead.

        Lifetimes first, so the kernel never drops an address the scheduler still leaves
        here; if the new process never comes, both run out together and the IPs move.
        """
        grace = self.settings.api.restart_grace
        extended = await self._reconciler.extend_lifetimes(grace)
        announced = False
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.settings.fencing.fence_timeout):
                await self._heartbeat.announce_grace(grace)
                announced = True
        log.info(
            "shutdown.restart_grace",
            node=self.settings.node,
            grace=grace,
            addresses=extended,
            announced=announced,
        )
