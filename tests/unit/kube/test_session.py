"""The client's session looks at the environment once, at start, not on a thread per request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from eipctl.kube.client import NODES, connect
from eipctl.kube.session import environment_proxy, without_environment
from kubemu import ApiServer

API = "https://192.0.2.10:6443"  # never contacted by the tests that use it


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting what is handed to its threads."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def _client(host: str = API, proxy: str | None = None) -> Any:
    cfg = k8s.Configuration(host=host)
    cfg.proxy = proxy
    return k8s.ApiClient(cfg)


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


async def _requests_hopping(api_server_kubeconfig: Path, *, fixed: bool) -> int:
    """Executor hand-offs of 5 GETs through a client, with or without the fixed session."""
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    api = await connect(str(api_server_kubeconfig))
    if not fixed:  # the stock session, as kubernetes-asyncio makes it
        rest = api.api_client.rest_client
        await rest.pool_manager.close()
        rest.pool_manager = _client(api.api_client.configuration.host).rest_client.pool_manager
    try:
        before = executor.submitted
        for _ in range(5):
            await api.list(NODES)
        return executor.submitted - before
    finally:
        await api.close()


@pytest.mark.usefixtures("no_proxy_env")
async def test_a_request_makes_no_thread_hop(apiserver: ApiServer, kubeconfig_path: Path) -> None:
    assert await _requests_hopping(kubeconfig_path, fixed=True) == 0
    # the control: kubernetes-asyncio's own session hops for netrc and the proxy, per request
    assert await _requests_hopping(kubeconfig_path, fixed=False) >= 10


@pytest.mark.usefixtures("no_proxy_env")
async def test_the_session_keeps_the_connector_and_closes_it() -> None:
    api_client = _client()
    stock = api_client.rest_client.pool_manager
    connector = stock.connector
    without_environment(api_client)
    session = api_client.rest_client.pool_manager
    assert session is not stock and not session.trust_env
    assert session.connector is connector  # the TLS settings and the connection limit
    assert stock.closed  # detached: nothing left to close, nothing to warn about
    await api_client.close()
    assert connector.closed


async def test_the_environments_proxy_is_fixed_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@198.51.100.7:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    api_client = _client()
    without_environment(api_client)
    rest = api_client.rest_client
    assert rest.proxy == "http://198.51.100.7:3128"
    assert rest.proxy_headers == {"Proxy-Authorization": "Basic dXNlcjpzZWNyZXQ="}
    await api_client.close()


async def test_no_proxy_exempts_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://198.51.100.7:3128")
    monkeypatch.setenv("NO_PROXY", "192.0.2.10")
    assert environment_proxy(API) is None
    monkeypatch.setenv("NO_PROXY", "203.0.113.1")
    assert environment_proxy(API) == ("http://198.51.100.7:3128", None)


async def test_a_configured_proxy_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://198.51.100.7:3128")
    api_client = _client(proxy="http://203.0.113.9:8080")
    without_environment(api_client)
    assert api_client.rest_client.proxy == "http://203.0.113.9:8080"
    assert not api_client.rest_client.proxy_headers
    await api_client.close()
