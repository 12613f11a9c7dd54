"""ApiServer: the emulator's lifecycle (start, restart, stop) and its kubeconfig."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import socket
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog
import yaml
from aiohttp import web

from .app import Routes, make_app
from .faults import Faults
from .rbac import Rbac
from .store import Store
from .tls import ServingCert, make_serving_cert

if TYPE_CHECKING:
    from .admission import PolicyEvaluator

log = structlog.get_logger(__name__)
LISTEN_BACKLOG = 128  # aiohttp's default


def _read_yaml_files(directory: Path) -> list[str]:
    return [f.read_text() for f in sorted(directory.glob("*.y*ml"))]


class ApiServer:
    """An in-process Kubernetes API emulator on the running asyncio loop.

    `store` gives tests direct access (`srv.store.get(group, plural, name, namespace)`,
    `.list`, `.create`, `.update`, `.delete`, `.revision`); `faults` injects failures.
    """

    def __init__(
        self,
        history_window: int = 1000,
        bookmark_interval: float = 5.0,
        token: str | None = None,
        shutdown_timeout: float = 1.0,
        tls: bool = False,
        *,
        rbac: bool = False,
        admission: bool = False,
        deny_service_external_ips: bool = False,
    ) -> None:
        self.store = Store(history_window)
        self.plugins = self.store.plugins  # built-in admission plugins (plugins.py)
        self.plugins.deny_service_external_ips = deny_service_external_ips
        self.faults = Faults(self.store.close_watchers)
        self.bookmark_interval = bookmark_interval
        self.token = token
        self.shutdown_timeout = shutdown_timeout
        self.tls = tls
        self._cert: ServingCert | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.rbac: Rbac | None = None
        self.admission: PolicyEvaluator | None = None
        if rbac:  # docs/emulator.md, "RBAC and admission"
            self.rbac = Rbac(self.store, admin_token=token)
            self.token = self.rbac.admin_token
        if admission:
            if self.rbac is None:
                raise ValueError("admission=True needs rbac=True: policies judge the user")
            from .admission import PolicyEvaluator

            self.admission = PolicyEvaluator(self.store)
            self.store.admission = self.admission.admit
        self.generation = 0  # restarts done; moves only once the new listener serves
        self.failure: BaseException | None = None  # why a background restart failed
        self._failed: asyncio.Future[BaseException] | None = None
        self._restart_lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self._routes = Routes(
            self.store, self.faults, None if rbac else token, self, rbac=self.rbac
        )
        self._runner: web.AppRunner | None = None
        self._bookmarks: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT (https with tls=True)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on host:port (0 picks a free port) and start sending bookmarks."""
        self.host = host
        if self.tls and self._cert is None:
            self._cert = await make_serving_cert(host)
        await self._listen(port)
        if self._bookmarks is None and self.bookmark_interval > 0:
            self._bookmarks = asyncio.create_task(
                self.store.hub.run_bookmarks(self.bookmark_interval, lambda: self.store.revision)
            )
        log.info("apiserver.started", url=self.url)

    async def _listen(self, port: int) -> None:
        """Bind and listen on host:port, then serve; raises if it is not listening after.

        The socket is put to listen() here, not left to the event loop: uvloop's
        create_server(sock=...) swallows an OSError from listen() (it closes the socket and
        returns a Server that serves nothing), so a port taken mid-restart would go unseen.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        runner: web.AppRunner | None = None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, port))
            self.port = sock.getsockname()[1]
            sock.listen(LISTEN_BACKLOG)
            runner = web.AppRunner(
                make_app(self._routes),
                access_log=None,
                handler_cancellation=True,
                shutdown_timeout=self.shutdown_timeout,
            )
            await runner.setup()
            ctx = self._cert.context if self._cert is not None else None
            site = web.SockSite(runner, sock, ssl_context=ctx, backlog=LISTEN_BACKLOG)
            await site.start()
            if sock.fileno() < 0 or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                raise OSError(errno.EADDRNOTAVAIL, f"not listening on {self.host}:{port}")
        except BaseException:
            sock.close()
            if runner is not None:
                await runner.cleanup()
            raise
        self._runner = runner

    async def _close(self) -> None:
        self.store.close_watchers()
        self.faults.resume()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def restart(self, down_for: float = 0.0) -> None:
        """Close every connection (watches included) and listen again on the same port,
        ``down_for`` seconds later (meanwhile connections are refused); the data, revision
        and history survive, as they would with etcd behind a restart.

        Returns once the new listener serves, and only then moves `generation` (what
        `/_emulator/state` reports), so a client can tell the restarted server from the old
        one still finishing its answers. Restarts run one at a time. Raises when the port
        cannot be listened on again: the server then listens nowhere.
        """
        async with self._restart_lock:
            log.info("apiserver.restarting", url=self.url, generation=self.generation)
            await self._close()
            if down_for > 0:
                await asyncio.sleep(down_for)
            await self._listen(self.port)
            self.generation += 1
            log.info("apiserver.restarted", url=self.url, generation=self.generation)

    def request_restart(self, down_for: float = 0.0) -> int:
        """Restart in the background once the current request is answered (the admin
        endpoint's restart), the port closed for ``down_for`` seconds in between; returns
        the generation that the restart will move past.

        A background restart that fails is logged with its exception and ends `failed()`:
        `python -m kubemu` then exits non-zero instead of running on
        without a listener.
        """
        # the task's first step runs after this one, which writes the answer; a connection
        # still answering is let finish by the runner's graceful shutdown anyway
        task = asyncio.create_task(self._restart_or_fail(down_for), name="apiserver-restart")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return self.generation

    async def _restart_or_fail(self, down_for: float) -> None:
        try:
            await self.restart(down_for)
        except Exception as exc:
            log.exception(
                "apiserver.restart_failed", url=self.url, generation=self.generation, error=str(exc)
            )
            self.failure = exc
            failed = self._failed_future()
            if not failed.done():
                failed.set_result(exc)

    def _failed_future(self) -> asyncio.Future[BaseException]:
        if self._failed is None:
            self._failed = asyncio.get_running_loop().create_future()
        return self._failed

    async def failed(self) -> BaseException:
        """Wait until a background restart fails; returns its exception."""
        return await asyncio.shield(self._failed_future())

    async def stop(self) -> None:
        """Close everything; safe to call twice."""
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._bookmarks is not None:
            self._bookmarks.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._bookmarks
            self._bookmarks = None
        await self._close()
        log.info("apiserver.stopped", url=self.url)

    async def __aenter__(self) -> ApiServer:
        if self._runner is None:
            await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def kubeconfig(
        self,
        context: str = "eipctl-sandbox",
        namespace: str = "default",
        token: str | None = None,
    ) -> dict[str, Any]:
        """A kubeconfig dict pointing at this server (as `token`'s user, default the admin)."""
        token = token or self.token
        user: dict[str, Any] = {"token": token} if token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self._cert is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._cert.cert_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": namespace},
                }
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(
        self, path: str | Path, context: str = "eipctl-sandbox", token: str | None = None
    ) -> Path:
        """Write a kubeconfig usable by kubectl and kubernetes_asyncio; returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(self.kubeconfig(context, token=token), sort_keys=False))
        p.chmod(0o600)
        return p

    async def load_crds_from_dir(self, directory: str | Path) -> list[str]:
        """Create (or replace) every CRD in the YAML files of a directory; returns names."""
        group, plural = "apiextensions.k8s.io", "customresourcedefinitions"
        names = []
        texts = await asyncio.to_thread(_read_yaml_files, Path(directory))
        for text in texts:
            for doc in yaml.safe_load_all(text):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = doc["metadata"]["name"]
                old = self.store.find(group, plural, name)
                if old is None:
                    self.store.create(group, plural, doc)
                else:
                    doc["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                    self.store.update(group, plural, doc)
                names.append(name)
        return names
