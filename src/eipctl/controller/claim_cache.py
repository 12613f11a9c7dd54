"""The claims placed on this node: an informer on the node's label that can be swapped.

After fencing, the old cache may be stale: a restore must act on a fresh list, so the cache
relists into a new informer and passes wait (`has_synced` is False) until it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from eipctl.core.naming import LABEL_NODE, is_label_value
from eipctl.kube.client import IPCLAIMS, KubeApi, Obj
from eipctl.kube.informer import Informer

log = structlog.get_logger(__name__)


class ClaimCache:
    """The claims placed on this node, from an informer that can be replaced by a fresh one
    (after fencing the old cache may be stale: a restore must act on a new list)."""

    def __init__(self, api: KubeApi, node: str, on_change: Callable[[], None]) -> None:
        self._api = api
        self._node = node
        self._on_change = on_change
        self._informer = self._new()
        self.generation = 0
        """Bumped by every refresh (`LinkReconciler` voids decisions from the old cache)."""
        self._settled = 0
        """The last generation whose refresh ended; behind `generation` while one runs."""

    def _new(self) -> Informer:
        selector = f"{LABEL_NODE}={self._node}" if is_label_value(self._node) else None
        informer = Informer(self._api, IPCLAIMS, label_selector=selector, backoff_max=1.0)
        informer.add_key_handler(lambda _key: self._on_change())
        return informer

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced and self._settled == self.generation

    def objects(self) -> list[Obj]:
        return self._informer.objects()

    def get(self, key: str) -> Obj | None:
        return self._informer.get(key)

    def start(self) -> None:
        self._informer.start()

    def start_refresh(self) -> asyncio.Task[None]:
        """Swap in a freshly listed informer, in the background; passes wait (do nothing)
        from this call on, not from when the task first runs: a pass the same wake-up
        triggers must not act on the old cache (a thawed node re-adding and announcing
        addresses that have moved away, soak seed 202)."""
        self.generation += 1
        return asyncio.create_task(self._refresh(self.generation), name="claims-refresh")

    def _settle(self, generation: int) -> None:
        """A refresh ended; only the newest one lets passes act again."""
        if generation == self.generation:
            self._settled = generation

    async def _refresh(self, generation: int) -> None:
        fresh = self._new()
        fresh.start()
        try:
            await fresh.wait_synced()
        except BaseException:
            await fresh.stop()
            self._settle(generation)
            raise
        old, self._informer = self._informer, fresh
        self._settle(generation)
        await old.stop()
        log.info("claims.relisted", node=self._node, claims=len(fresh))
        self._on_change()

    async def stop(self) -> None:
        await self._informer.stop()
