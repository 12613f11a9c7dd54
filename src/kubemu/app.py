"""The aiohttp application: middleware (auth, faults, errors), discovery and admin routes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog
from aiohttp import web

from . import discovery, field_validation, openapi_proto, protobuf
from .errors import ApiError, status_body
from .faults import Faults
from .handlers import Handlers, error_response, json_response
from .plugins import Plugins
from .rbac import Rbac
from .store import Store

log = structlog.get_logger(__name__)
ADMIN_PREFIX = "/_emulator/"
MAX_DOWN_FOR = 600.0  # seconds a restart may leave the port closed
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _not_found() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", "NotFound")


class Lifecycle(Protocol):
    """What the admin routes see of the server's lifecycle (`ApiServer`)."""

    @property
    def generation(self) -> int:
        """Restarts done; moves only once the restarted server listens."""
        ...

    def request_restart(self, down_for: float = 0.0) -> int:
        """Restart after this answer, listening nowhere for ``down_for`` seconds in between;
        returns the generation the restart will move past."""
        ...


class Routes:
    """Everything that is not a resource verb, plus the middleware around all of it."""

    def __init__(
        self,
        store: Store,
        faults: Faults,
        token: str | None,
        lifecycle: Lifecycle,
        rbac: Rbac | None = None,
    ) -> None:
        self.store = store
        self.faults = faults
        self.token = token
        self.lifecycle = lifecycle
        self.rbac = rbac
        self.handlers = Handlers(store, faults)
        self.server_address = ""

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Faults and auth for API paths (never the admin path); ApiError -> Status."""
        if not request.path.startswith(ADMIN_PREFIX):
            if self.rbac is not None:  # RBAC mode: rbac.py
                refused = self.rbac.check(
                    request.method,
                    request.path,
                    request.query,
                    request.headers.get("Authorization"),
                )
                if refused is not None:
                    return error_response(refused)
            elif self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
                return json_response(status_body(401, "Unauthorized", "Unauthorized"), 401)
            code = await self.faults.before_request()
            if code is not None:
                resp = json_response(status_body(code, _reason(code), "injected fault"), code)
                if code == 429:
                    resp.headers["Retry-After"] = "1"
                return resp
        try:
            return await handler(request)
        except ApiError as err:
            if err.code >= 500:
                log.warning("request.failed", path=request.path, code=err.code, detail=err.message)
            return error_response(err)

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """Route by path prefix: discovery, openapi, admin, or a resource."""
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if path.startswith(ADMIN_PREFIX.rstrip("/")):
            return await self.admin(request, parts[1:])
        if request.method == "GET" and path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        if request.method == "GET":
            doc = self.discovery(request, path, parts)
            if doc is not None:
                return doc if isinstance(doc, web.Response) else json_response(doc)
        if parts[:1] in (["api"], ["apis"]) and len(parts) >= (3 if parts[0] == "api" else 4):
            return await self.handlers.resource(request)
        raise _not_found()

    def discovery(self, request: web.Request, path: str, parts: list[str]) -> Any:
        """Discovery and OpenAPI documents, or None when the path is not one of them."""
        reg = self.store.registry
        if path == "/version":
            return discovery.KUBE_VERSION
        if not parts:
            return {"paths": ["/api", "/api/v1", "/apis", "/openapi/v3", "/version", "/healthz"]}
        if path == "/api":
            return discovery.api_versions(request.host)
        if path == "/apis":
            return discovery.api_group_list(reg)
        if parts[0] == "api" and len(parts) == 2:
            return _or_404(discovery.api_resource_list(reg, "", parts[1]))
        if parts[0] == "apis" and len(parts) == 2:
            return _or_404(discovery.api_group(reg, parts[1]))
        if parts[0] == "apis" and len(parts) == 3:
            return _or_404(discovery.api_resource_list(reg, parts[1], parts[2]))
        if path == "/openapi/v2":
            return openapi_proto.answer(request, discovery.openapi_v2(reg))
        if path == "/openapi/v3":
            return discovery.openapi_v3_root(reg)
        if parts[:2] == ["openapi", "v3"]:
            gv = parts[2:]
            if gv[:1] == ["api"] and len(gv) == 2:
                return _or_404(discovery.openapi_v3_gv(reg, "", gv[1]))
            if gv[:1] == ["apis"] and len(gv) == 3:
                return _or_404(discovery.openapi_v3_gv(reg, gv[1], gv[2]))
            raise _not_found()
        if parts[0] == "openapi":
            raise _not_found()
        return None

    async def admin(self, request: web.Request, parts: list[str]) -> web.Response:
        """/_emulator/faults and /_emulator/admission (GET state, POST knobs),
        /_emulator/restart (POST), /_emulator/state (with the restart generation)."""
        what = parts[0] if parts else ""
        knobs: dict[str, Faults | Plugins] = {"faults": self.faults}
        knobs["admission"] = self.store.plugins
        switch = knobs.get(what)
        if switch is not None:
            if request.method == "POST":
                try:
                    body = json.loads(await request.read() or b"{}")
                except ValueError:
                    return json_response({"error": "body must be JSON"}, 400)
                if not isinstance(body, dict):
                    return json_response({"error": "body must be a JSON object"}, 400)
                switch.configure(body)
            return json_response(switch.state())
        if what == "restart" and request.method == "POST":
            # the restart starts after this answer; "generation" is the one it moves past.
            # {"downFor": seconds}: the port stays closed that long (connections refused), as
            # while a real API server's process is replaced
            try:
                body = json.loads(await request.read() or b"{}")
                down_for = float(body.get("downFor", 0.0)) if isinstance(body, dict) else -1.0
            except (ValueError, TypeError):
                down_for = -1.0
            if not 0.0 <= down_for <= MAX_DOWN_FOR:
                return json_response(
                    {"error": f"body must be a JSON object; downFor 0..{MAX_DOWN_FOR:g} seconds"},
                    400,
                )
            generation = self.lifecycle.request_restart(down_for)
            return json_response({"restarting": True, "generation": generation})
        if what == "state":
            return json_response(
                {
                    "revision": self.store.revision,
                    "compacted": self.store.compacted,
                    "watchers": len(self.store.watchers()),
                    "generation": self.lifecycle.generation,
                }
            )
        raise _not_found()


def _reason(code: int) -> str:
    return {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}.get(
        code, "InternalError"
    )


def _or_404(doc: Any) -> Any:
    if doc is None:
        raise _not_found()
    return doc


def make_app(routes: Routes) -> web.Application:
    """The aiohttp application: one catch-all route, the resource paths are parsed by hand."""
    app = web.Application(
        middlewares=[protobuf.middleware, routes.middleware], client_max_size=8 * 1024 * 1024
    )
    app.router.add_route("*", "/{tail:.*}", routes.dispatch)
    app.on_response_prepare.append(field_validation.add_warnings)
    return app
