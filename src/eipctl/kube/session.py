"""The HTTP session under kubernetes-asyncio's client, without two thread hops per request.

kubernetes-asyncio makes its aiohttp session with ``trust_env=True``, and aiohttp then looks
at the environment again for every request, each time on a thread of the loop's default
executor: ~/.netrc (`run_in_executor`) and the proxy variables (`to_thread`). In a write
burst that is most of what a process does: py-spy put ~30 % of the scheduler's samples in
those threads and their hand-offs while it moved a dead node's 100 claims, and every hop
also waits for the GIL behind the loop. The environment does not change while a process
runs, so the proxy is looked up once, here, with aiohttp's own rules (HTTPS_PROXY,
NO_PROXY); ~/.netrc is not read at all: the API's credentials come from the kubeconfig or
the service account token, never from netrc.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import structlog
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

log = structlog.get_logger(__name__)

READ_BUFFER = 2**21
"""As kubernetes-asyncio's own session: a watch event may be large (etcd allows 1.5 MiB)."""


def environment_proxy(host: str) -> tuple[str, aiohttp.BasicAuth | None] | None:
    """The proxy the environment names for the API at ``host`` (a URL), with its
    credentials; None if there is none or NO_PROXY exempts the host."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:
        return None
    return str(proxy), auth


def without_environment(api_client: Any) -> None:
    """Give ``api_client`` (a kubernetes-asyncio ApiClient that has made no request yet) a
    session that does not look at the environment per request, on the same connector (its
    TLS settings and connection limit), with the environment's proxy fixed at start unless
    the configuration names one."""
    rest = api_client.rest_client
    stock: aiohttp.ClientSession = rest.pool_manager
    connector = stock.connector
    if connector is None:  # already closed: nothing to replace
        return
    stock.detach()  # closed without closing the connector, which the new session owns
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, connector_owner=True, trust_env=False, read_bufsize=READ_BUFFER
    )
    if rest.proxy:
        return
    found = environment_proxy(api_client.configuration.host)
    if found is None:
        return
    rest.proxy, auth = found
    if auth is not None:
        rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    log.info("kube.proxy", proxy=URL(rest.proxy).with_user(None).human_repr())
