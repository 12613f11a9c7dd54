"""A small typed wrapper over kubernetes_asyncio's ApiClient: one generic path for all kinds.

Core and CRD kinds go through the same code: a `ResourceRef` says where the objects live,
objects are plain JSON dicts, and every failure is an `errors.ApiError`. Requests go through
``ApiClient.call_api`` (so kubeconfig auth and token refresh keep working) with
``_preload_content=False``: we read the aiohttp response ourselves, which gives us the HTTP
status of every reply and a watch stream without ``watch.Watch``'s reconnect quirks.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

import aiohttp
import structlog

from eipctl.core.fields import Obj
from eipctl.kube import lean_import
from eipctl.kube.errors import ApiError, Gone, KubeConfigError, TransportError, error_for
from eipctl.kube.session import without_environment

log = structlog.get_logger(__name__)

Subresource = Literal["status"] | None

MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ResourceRef:
    """Where a kind lives in the API: group ("" for core), version, plural, kind, scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: Subresource = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if sub:
                base += f"/{sub}"
        return base


SERVICES = ResourceRef("", "v1", "services", "Service", namespaced=True)
NODES = ResourceRef("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = ResourceRef("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = ResourceRef("", "v1", "events", "Event", namespaced=True)
SECRETS = ResourceRef("", "v1", "secrets", "Secret", namespaced=True)
LEASES = ResourceRef("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
ENDPOINTSLICES = ResourceRef(
    "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", namespaced=True
)
IPCLAIMS = ResourceRef("eipctl.io", "v1alpha1", "ipclaims", "IpClaim", namespaced=False)
IPNODES = ResourceRef("eipctl.io", "v1alpha1", "ipnodes", "IpNode", namespaced=False)
IPCLAIMPOOLS = ResourceRef("eipctl.io", "v1alpha1", "ipclaimpools", "IpClaimPool", namespaced=False)
BGPPEERS = ResourceRef("eipctl.io", "v1alpha1", "bgppeers", "BGPPeer", namespaced=False)


def object_key(obj: Mapping[str, Any]) -> str:
    """The cache/queue key of an object: "namespace/name", or "name" when cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{ns}/{name}" if ns else name


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of `object_key`: (namespace or None, name)."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, key)


@dataclass(frozen=True)
class ObjectList:
    items: list[Obj]
    resource_version: str


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: Obj


def _sub(status: bool) -> Subresource:
    return "status" if status else None


class KubeApi:
    """Typed verbs over one ApiClient. Thread-unsafe, loop-bound, like the ApiClient."""

    def __init__(
        self, api_client: Any, *, owns_client: bool = False, request_timeout: float = 30.0
    ) -> None:
        self.api_client = api_client
        self._owns_client = owns_client
        self._timeout = request_timeout

    async def close(self) -> None:
        if self._owns_client:
            await self.api_client.close()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        try:
            resp: aiohttp.ClientResponse = await self.api_client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=client_timeout or aiohttp.ClientTimeout(total=self._timeout),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise TransportError(f"{method} {path}: {exc!r}") from exc
        if resp.status >= 300:
            try:
                data = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                data = str(exc).encode()
            finally:
                resp.release()
            raise error_for(resp.status, data)
        return resp

    async def _request(self, method: str, path: str, **kw: Any) -> Obj:
        resp = await self._open(method, path, **kw)
        try:
            data = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransportError(f"{method} {path}: {exc!r}") from exc
        finally:
            resp.release()
        try:
            result: Obj = json.loads(data) if data else {}
        except ValueError as exc:
            raise TransportError(f"{method} {path}: bad JSON body") from exc
        return result

    async def get(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        status: bool = False,
        resource_version: str | None = None,
    ) -> Obj:
        """One object. ``resource_version="0"`` lets the server answer from its watch cache
        (no etcd quorum read): any version is fine when the read only proves the API up."""
        query = None if resource_version is None else [("resourceVersion", resource_version)]
        return await self._request("GET", ref.path(namespace, name, _sub(status)), query=query)

    async def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList:
        """All objects, following `continue` pages.

        The RV returned is the *first* page's: a real apiserver serves every page from that
        snapshot, and a server whose later pages are live reads (the emulator) may omit
        objects created meanwhile; watching from the first RV replays them either way.
        """
        items: list[Obj] = []
        cont = ""
        first_rv: str | None = None
        while True:
            query = _selectors(label_selector, field_selector)
            query.append(("limit", str(page_size)))
            if cont:
                query.append(("continue", cont))
            page = await self._request("GET", ref.path(namespace), query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if first_rv is None:
                first_rv = str(meta.get("resourceVersion", ""))
            cont = meta.get("continue") or ""
            if not cont:
                return ObjectList(items, first_rv)

    async def watch(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after `resource_version`, bookmarks included; ends when the server closes.

        Raises `Gone` (HTTP 410 or an in-stream 410 ERROR event) when the RV is too old.
        """
        query = _selectors(label_selector, field_selector)
        query += [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_connect=self._timeout)
        resp = await self._open("GET", ref.path(namespace), query=query, client_timeout=timeout)
        try:
            async for raw in resp.content:
                line = raw.strip()
                if not line:
                    continue
                ev = json.loads(line)
                etype, obj = ev.get("type", ""), ev.get("object") or {}
                if etype == "ERROR":
                    code = int(obj.get("code") or 500)
                    err = error_for(code, json.dumps(obj))
                    raise Gone(code, err.reason, err.message) if code == 410 else err
                yield WatchEvent(etype, obj)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise TransportError(f"watch {ref.plural}: {exc!r}") from exc
        finally:
            resp.close()

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        return await self._request("POST", ref.path(ns), body=_with_type(ref, obj))

    async def replace(self, ref: ResourceRef, obj: Obj, *, status: bool = False) -> Obj:
        """PUT (of the status subresource with `status`): carries metadata.resourceVersion,
        so a stale copy gets `Conflict`."""
        meta = obj.get("metadata") or {}
        path = ref.path(meta.get("namespace"), meta["name"], _sub(status))
        return await self._request("PUT", path, body=_with_type(ref, obj))

    async def patch(
        self,
        ref: ResourceRef,
        name: str,
        patch: Obj,
        namespace: str | None = None,
        *,
        status: bool = False,
    ) -> Obj:
        """JSON merge patch (RFC 7386): the content type CRDs and core kinds all accept; of
        the status subresource with `status`."""
        path = ref.path(namespace, name, _sub(status))
        return await self._request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
    ) -> Obj:
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        return await self._request("DELETE", ref.path(namespace, name), body=body)


def _selectors(label: str | None, field: str | None) -> list[tuple[str, str]]:
    query: list[tuple[str, str]] = []
    if label:
        query.append(("labelSelector", label))
    if field:
        query.append(("fieldSelector", field))
    return query


def _with_type(ref: ResourceRef, obj: Obj) -> Obj:
    if obj.get("apiVersion") and obj.get("kind"):
        return obj
    return {"apiVersion": ref.api_version, "kind": ref.kind, **obj}


def _default_kubeconfig_exists() -> bool:
    """Whether $KUBECONFIG (a path list) or ~/.kube/config names a file (startup, once)."""
    paths = (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    return any(os.path.isfile(os.path.expanduser(p)) for p in paths if p)


async def connect(kubeconfig: str | None = None, *, request_timeout: float = 30.0) -> KubeApi:
    """A KubeApi from `kubeconfig`, else in-cluster config, else $KUBECONFIG/~/.kube/config."""
    lean_import.install()  # the loaders without the generated APIs and models: ~40 MB less
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    if kubeconfig:
        source = kubeconfig
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        source = "in-cluster"
    else:
        source = os.environ.get("KUBECONFIG", "~/.kube/config")
    if source not in (kubeconfig, "in-cluster") and not _default_kubeconfig_exists():
        raise KubeConfigError(
            f"no kubeconfig: not in a cluster, and {source} does not exist (give --kubeconfig)"
        )
    try:
        if kubeconfig:
            api_client = await config.new_client_from_config(config_file=kubeconfig)
        elif source == "in-cluster":
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            api_client = client.ApiClient(cfg)
        else:
            api_client = await config.new_client_from_config()
    except (ConfigException, OSError, ValueError) as exc:
        raise KubeConfigError(f"cannot use {source} to reach the API: {exc}") from exc
    without_environment(api_client)
    log.info("kube.connected", source=source, host=api_client.configuration.host)
    return KubeApi(api_client, owns_client=True, request_timeout=request_timeout)


__all__ = [
    "EVENTS",
    "IPCLAIMPOOLS",
    "IPCLAIMS",
    "IPNODES",
    "LEASES",
    "NODES",
    "SERVICES",
    "ApiError",
    "KubeApi",
    "Obj",
    "ObjectList",
    "ResourceRef",
    "WatchEvent",
    "connect",
    "object_key",
    "split_key",
]
