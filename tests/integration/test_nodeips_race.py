"""Story: 50 labelled Nodes appear at once while the caches lag; nobody gets two claims.

The kubestatic seed needed a 10 s per-node throttle to hide exactly this race (a second
reconcile from a cache that has not yet seen the first claim creates another). Here the
throttle is off, every watch event arrives late, the API is slow, and two replicas act at
once with leader election off: the slot protocol alone must keep it at one claim per Node.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from test_nodeips_support import (
    IPCLAIMPOOLS,
    NODES,
    claims_by_node,
    eventually,
    node,
    node_claims,
    nodeips,
    pool,
    slot,
    update,
)

from eipctl.kube.client import KubeApi
from kubemu import ApiServer

NODES_AT_ONCE = 50


async def _create_nodes(api: KubeApi, names: list[str]) -> None:
    await asyncio.gather(*(api.create(NODES, node(n)) for n in names))


async def _exactly_one_each(api: KubeApi, names: list[str]) -> bool:
    by_node = await claims_by_node(api)
    return all(len(by_node.get(n, [])) == 1 for n in names)


class Sampler:
    """Lists the claims every 10 ms: the most claims any Node held at any moment."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.worst = 0
        self.samples = 0

    async def run(self) -> None:
        while True:
            by_node = await claims_by_node(self.api)
            self.worst = max([self.worst] + [len(ips) for n, ips in by_node.items() if n])
            self.samples += 1
            await asyncio.sleep(0.01)


async def _check(api: KubeApi, names: list[str]) -> None:
    claims = await node_claims(api)
    assert len(claims) == len(names), f"{len(claims)} claims for {len(names)} nodes"
    ips = [c["spec"]["ip"] for c in claims]
    assert len(set(ips)) == len(ips)
    by_node = await claims_by_node(api)
    assert sorted(by_node) == sorted(names)
    for n in names:
        assert len(by_node[n]) == 1, f"{n}: {by_node[n]}"
        claim_name = by_node[n][0].replace(".", "-")
        assert await slot(api, n) == claim_name


async def test_fifty_nodes_at_once_with_lagging_caches_two_replicas(
    api: KubeApi, apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "198.51.100.0/24"))
    names = [f"node-{i:02d}" for i in range(NODES_AT_ONCE)]
    apiserver.faults.latency = 0.02
    async with contextlib.AsyncExitStack() as stack:
        for i in range(2):
            await stack.enter_async_context(
                nodeips(kubeconfig_path, lag=0.3, identity=f"r{i}", workers=8)
            )
        await asyncio.sleep(0.5)  # informers synced
        sampler = Sampler(api)
        sampling = asyncio.create_task(sampler.run())
        await _create_nodes(api, names)
        await eventually(lambda: _exactly_one_each(api, names), timeout=60, step=0.2)
        # the caches catch up and the periodic repair runs: still exactly one each
        await asyncio.sleep(1.5)
        await _check(api, names)
        # churn the Nodes (each update is a new reconcile from a lagging cache)
        for n in names[:20]:
            await update(api, NODES, n, lambda o: o["metadata"]["labels"].update(touched="1"))
        await asyncio.sleep(1.5)
        await _check(api, names)
        sampling.cancel()
        assert sampler.samples > 50
        assert sampler.worst == 1, f"a Node held {sampler.worst} claims at once"
    apiserver.faults.latency = 0.0


async def test_watch_drops_and_errors_still_one_claim_each(
    api: KubeApi, apiserver: ApiServer, kubeconfig_path: Path
) -> None:
    await api.create(IPCLAIMPOOLS, pool("nodes", "198.51.100.0/24"))
    names = [f"w-{i:02d}" for i in range(20)]
    async with nodeips(kubeconfig_path, lag=0.1):
        await asyncio.sleep(0.3)
        await _create_nodes(api, names)
        apiserver.faults.error_rate = 0.15
        for _ in range(3):
            apiserver.faults.drop_watches()
            await asyncio.sleep(0.3)
        apiserver.faults.error_rate = 0.0
        await eventually(lambda: _exactly_one_each(api, names), timeout=60, step=0.2)
        await asyncio.sleep(1.0)
        await _check(api, names)
