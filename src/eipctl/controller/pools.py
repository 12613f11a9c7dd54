"""The pools as the controller sees them: how each announces its IPs, and which go by BGP.

A pool's `spec.announce` decides where a claim's address goes on this node (the link, or the
BGP link as a host route), and the BGP pools' CIDRs go into the FRR configuration
(`controller.bgp`). Pools are few and rarely change: one cluster-wide watch per node costs
no event in steady state.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from eipctl.core.fields import ResourceError, name_of
from eipctl.core.resources import IpClaimPool
from eipctl.kube.client import IPCLAIMPOOLS, KubeApi, Obj
from eipctl.kube.informer import Informer

log = structlog.get_logger(__name__)


class PoolCache:
    """`announcing.PoolModes` from an informer over every IpClaimPool."""

    def __init__(self, api: KubeApi, on_change: Callable[[], None]) -> None:
        self._informer = Informer(api, IPCLAIMPOOLS, backoff_max=1.0)
        self._listeners = [on_change]
        self._informer.add_key_handler(lambda _key: self._changed())
        self._unparsable: set[str] = set()
        self._memo: dict[str, tuple[str, IpClaimPool | None]] = {}
        """name -> (resourceVersion, parsed): a pass asks once per claim."""

    def add_listener(self, fn: Callable[[], None]) -> None:
        """Also call `fn` when a pool changes (the FRR configuration lists BGP pools)."""
        self._listeners.append(fn)

    def _changed(self) -> None:
        for fn in self._listeners:
            fn()

    @property
    def has_synced(self) -> bool:
        return self._informer.has_synced

    def _parsed(self, name: str) -> IpClaimPool | None:
        obj = self._informer.get(name)
        if obj is None:
            return None
        rv = str(obj.get("metadata", {}).get("resourceVersion", ""))
        memo = self._memo.get(name)
        if memo is not None and memo[0] == rv and rv:
            return memo[1]
        parsed = self._parse(name, obj)
        self._memo[name] = (rv, parsed)
        return parsed

    def _parse(self, name: str, obj: Obj) -> IpClaimPool | None:
        try:
            pool = IpClaimPool.from_dict(obj)
        except (ResourceError, ValueError) as exc:
            if name not in self._unparsable:  # once per pool: this runs every pass
                self._unparsable.add(name)
                log.warning("pool.unparsable", pool=name, error=str(exc))
            return None
        self._unparsable.discard(name)
        return pool

    def announce_of(self, pool: str) -> str:
        """``bgp`` or ``l2``; a pool that is absent or does not parse is ``l2`` (the
        allocator reports such a pool; its IPs stay where they are)."""
        parsed = self._parsed(pool) if pool else None
        return "l2" if parsed is None else parsed.spec.announce

    def bgp_pools(self) -> dict[str, str]:
        """pool name -> cidr, for every pool announced by BGP."""
        out: dict[str, str] = {}
        for obj in self._informer.objects():
            parsed = self._parsed(name_of(obj))
            if parsed is not None and parsed.spec.announce == "bgp":
                out[parsed.name] = parsed.spec.cidr
        return dict(sorted(out.items()))

    def start(self) -> None:
        self._informer.start()

    async def stop(self) -> None:
        await self._informer.stop()
