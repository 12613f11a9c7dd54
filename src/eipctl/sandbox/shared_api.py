"""The one API client that all simulated nodes of a process share (`SharedApi`).

A deployed controller makes two kubernetes-asyncio clients; a sandbox process runs hundreds
of nodes, and two clients per node cost more CPU than the node's own work (each request of a
``trust_env`` session hops to a thread twice, for ~/.netrc and the proxy variables). So the
nodes share one client: one connection pool, no proxy or netrc lookups. Every node still
makes its own requests: its API checks, heartbeats, watch and writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from eipctl.kube import lean_import
from eipctl.kube.client import KubeApi

API_TIMEOUT = 10.0  # the controller's main client (`controller.process`)
READ_BUFFER = 2**21  # as kubernetes-asyncio's own session: a watch event may be large


async def loopback_client(
    kubeconfig: Path, trace_configs: Sequence[aiohttp.TraceConfig] = ()
) -> Any:
    """A kubernetes-asyncio client for many simulated nodes of one process: its session has
    no connection limit (each node's watch holds a connection for good: kubernetes-asyncio's
    100 would queue the 101st node's requests behind them) and does not trust the environment
    (no thread hop per request for ~/.netrc and the proxy variables: the API is on
    loopback); ``trace_configs`` to count its requests."""
    lean_import.install()
    from kubernetes_asyncio import config

    client = await config.new_client_from_config(config_file=str(kubeconfig))
    rest = client.rest_client
    stock, rest.pool_manager = (
        rest.pool_manager,
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            trust_env=False,
            read_bufsize=READ_BUFFER,
            trace_configs=list(trace_configs),
        ),
    )
    await stock.close()
    return client


class SharedApi:
    """One kubernetes-asyncio client (`loopback_client`) for every simulated node of this
    process, made on first use."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self._client: Any = None
        self._lock = asyncio.Lock()

    async def client(self) -> Any:
        async with self._lock:
            if self._client is None:
                self._client = await loopback_client(self.kubeconfig)
            return self._client

    async def apis(self, fence_timeout: float) -> tuple[KubeApi, KubeApi]:
        """A node's two views of the client, as `controller.process` connects them: the
        main one, and the API checks' and heartbeats' (whose requests time out after
        `fence_timeout`). Closing them leaves the client open."""
        client = await self.client()
        return (
            KubeApi(client, request_timeout=API_TIMEOUT),
            KubeApi(client, request_timeout=fence_timeout),
        )

    async def close(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()
