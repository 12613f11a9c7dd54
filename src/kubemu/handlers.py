"""The resource verbs over HTTP: get, list, watch, create, update, patch, delete.

Options are validated first (options.py), field selectors per resource (field_labels.py);
events.k8s.io/v1 Events are served from the core Events (events_view.py); the self reviews
of `kubectl auth` are answered by reviews.py.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiohttp import web

from . import errors, events_view, field_validation, options, patching, reviews, tables
from .errors import ApiError
from .faults import Faults
from .field_labels import labels_for
from .resources import ResourceType
from .selectors import Predicate, combine, field_selector, label_selector
from .store import Store
from .targets import Target, View, parse_target
from .watch import encode_line

Obj = dict[str, Any]
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_TRUE = ("true", "True", "1", "t", "T", "TRUE")


def json_response(obj: Any, status: int = 200) -> web.Response:
    """A JSON body with the content type client-go expects."""
    return web.Response(body=_dumps(obj).encode(), status=status, content_type="application/json")


def error_response(err: ApiError) -> web.Response:
    """A Status body for an error."""
    return json_response(err.status(), err.code)


async def _body(request: web.Request) -> Any:
    ctype = request.headers.get("Content-Type", "")
    if "protobuf" in ctype or "cbor" in ctype:
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - accepted media "
            f"types include: application/json, application/yaml ({ctype} is not supported)",
            "UnsupportedMediaType",
        )
    raw = await request.read()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        import yaml

        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"the body could not be decoded: {exc}") from None


_MAX_SNAPSHOTS = 64


class Handlers:
    """Verb handlers bound to one store and one set of faults."""

    def __init__(self, store: Store, faults: Faults) -> None:
        self.store = store
        self.faults = faults
        # Paged lists are served from a snapshot taken at the first page, as etcd does: later
        # pages and the collection resourceVersion describe one instant. Stored objects are
        # replaced, never mutated, on write, so keeping references is a true snapshot.
        self._snapshots: OrderedDict[str, tuple[int, list[Obj]]] = OrderedDict()

    async def resource(self, request: web.Request) -> web.StreamResponse:
        """Dispatch a resource URL by method."""
        review = reviews.review_path(request.path)
        if review is not None:
            return await self.review(request, review)
        t = parse_target(self.store, request.path)
        if t is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        q = request.query
        v = self._view(t.rt)
        dry_runs = list(q.getall("dryRun", []))
        m = request.method
        if t.sub and m not in ("GET", "PUT", "PATCH"):
            raise errors.method_not_allowed(m, request.path)
        if m == "GET":
            if t.name:
                obj = v.out(self.store.get_object(v.stored, t.namespace, t.name))
                return self._maybe_table(
                    request,
                    t.rt,
                    [obj],
                    {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    obj,
                )
            watch = options.is_watch(q)
            options.check_list(q, watch)
            if watch:
                return await self.watch(request, t, v)
            return self.collection(request, t, v)
        if m == "POST" and not t.name:
            dry = options.write_dry_run("CreateOptions", q, dry_runs)
            body = await self._object_body(request, t)
            self._strict(request, t.rt, body)
            obj = self.store.create_object(v.stored, t.namespace, v.into(body), dry_run=dry)
            return json_response(v.out(obj), 201)
        if m == "PUT" and t.name:
            dry = options.write_dry_run("UpdateOptions", q, dry_runs)
            body = await self._object_body(request, t)
            self._strict(request, t.rt, body)
            obj = self.store.update_object(
                v.stored, t.namespace, t.name, v.into(body), subresource=t.sub or None, dry_run=dry
            )
            return json_response(v.out(obj))
        if m == "PATCH" and t.name:
            dry = options.write_dry_run("PatchOptions", q, dry_runs)
            return await self.patch(request, t, v, dry)
        if m == "DELETE":
            opts = options.delete_options(await _body(request), q)
            if not t.name:
                options.check_list(q, watch=False)
                return self.delete_collection(request, t, v, opts)
            obj = self.store.delete_object(
                v.stored, t.namespace, t.name, opts.preconditions, dry_run=opts.dry_run
            )
            return json_response(v.out(obj))
        raise errors.method_not_allowed(m, request.path)

    def _view(self, rt: ResourceType) -> View:
        if events_view.is_view(rt):
            return View(rt, self.store.registry.lookup("", "v1", "events"))
        return View(rt, rt)

    def _predicate(self, request: web.Request, rt: ResourceType) -> Predicate | None:
        """labelSelector and fieldSelector; a field label `rt` does not support is a 400."""
        q = request.query
        fields = q.get("fieldSelector")
        resolve = labels_for(self.store, rt).getter if fields else None
        return combine(label_selector(q.get("labelSelector")), field_selector(fields, resolve))

    async def review(self, request: web.Request, review: tuple[str, str, str]) -> web.Response:
        """POST of a SelfSubjectAccessReview or SelfSubjectReview (nothing is stored)."""
        if request.method != "POST":
            raise errors.method_not_allowed(request.method, request.path)
        options.write_dry_run(
            "CreateOptions", request.query, list(request.query.getall("dryRun", []))
        )
        group, _, kind = review
        body = await _body(request) or {}
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        api_version = body.get("apiVersion")
        if api_version and api_version != f"{group}/v1":
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({group}/v1)"
            )
        if kind == reviews.SSAR[2]:
            return json_response(reviews.access_review(self.store, body), 201)
        return json_response(reviews.self_review(), 201)

    async def _object_body(self, request: web.Request, t: Target) -> Obj:
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        kind, api_version = body.get("kind"), body.get("apiVersion")
        if api_version and api_version != t.rt.group_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({t.rt.group_version})"
            )
        if kind and kind != t.rt.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({t.rt.kind})"
            )
        return body

    def _strict(self, request: web.Request, rt: ResourceType, body: Obj) -> None:
        """fieldValidation: unknown fields warned about, or a 400 under Strict."""
        field_validation.remember(request, rt, body)

    def _maybe_table(
        self, request: web.Request, rt: ResourceType, objs: list[Obj], meta: Obj, plain: Obj
    ) -> web.Response:
        if tables.wants_table(request.headers.get("Accept", "")):
            include = request.query.get("includeObject", "Metadata")
            return json_response(tables.to_table(rt, objs, meta, include))
        return json_response(plain)

    def collection(self, request: web.Request, t: Target, v: View) -> web.Response:
        """List with selectors and limit/continue; the collection carries the store revision."""
        q = request.query
        pred = self._predicate(request, t.rt)
        limit = int(q.get("limit") or 0)
        if q.get("continue"):
            revision, objs = self._resume(q["continue"])
        else:
            revision = self.store.revision
            objs = self.store.list_objects(v.stored, t.namespace or None, pred)
        meta: Obj = {"resourceVersion": str(revision)}
        if 0 < limit < len(objs):
            snapshot_id = uuid.uuid4().hex
            self._snapshots[snapshot_id] = (revision, objs[limit:])
            while len(self._snapshots) > _MAX_SNAPSHOTS:
                self._snapshots.popitem(last=False)
            token = {"snapshot": snapshot_id}
            meta["continue"] = base64.urlsafe_b64encode(_dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(objs) - limit
            objs = objs[:limit]
        items = [v.out(o) for o in objs]
        plain = {
            "kind": f"{t.rt.kind}List",
            "apiVersion": t.rt.group_version,
            "metadata": meta,
            "items": items,
        }
        return self._maybe_table(request, t.rt, items, meta, plain)

    def _resume(self, token: str) -> tuple[int, list[Obj]]:
        """The rest of a paged list's snapshot; 410 when it has been dropped, as for etcd."""
        try:
            snapshot_id = json.loads(base64.urlsafe_b64decode(token))["snapshot"]
        except (ValueError, KeyError, TypeError):
            raise errors.bad_request("invalid continue token") from None
        snapshot = self._snapshots.pop(snapshot_id, None)
        if snapshot is None:
            raise errors.gone(
                "the provided continue parameter is too old to display a consistent list result"
            )
        return snapshot

    async def watch(self, request: web.Request, t: Target, v: View) -> web.StreamResponse:
        """Stream events as JSON lines until timeoutSeconds, a dropped watch, or disconnect."""
        q = request.query
        pred = self._predicate(request, t.rt)
        rv = q.get("resourceVersion", "")
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        try:
            if rv not in ("", "0") and self.faults.take_gone():
                raise errors.gone(f"too old resource version: {rv} (forced by fault injection)")
            w = self.store.watch(
                v.stored,
                t.namespace or None,
                pred,
                rv,
                q.get("allowWatchBookmarks") in _TRUE,
                initial_events=q.get("sendInitialEvents") in _TRUE,
                render=self._render(request, v),
            )
            w.api_version = t.rt.group_version  # bookmarks name the version asked for
        except ApiError as err:
            if err.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(encode_line("ERROR", err.status()))
            return resp
        await resp.prepare(request)
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    if self.faults.paused:  # a paused server sends nothing, watches included
                        await self.faults.wait_resumed()
                    if w.buf:
                        data = w.take()
                        if data:
                            await resp.write(data)
                        continue
                    if w.closed:
                        break
                    w.wake.clear()
                    await w.wake.wait()
        except TimeoutError:
            pass
        finally:
            self.store.unwatch(w)
        with contextlib.suppress(ConnectionError):
            await resp.write_eof()
        return resp

    def _render(self, request: web.Request, v: View) -> Callable[[str, Obj], bytes] | None:
        """Per-watcher encoding: one-row Tables for `kubectl get -w`, converted objects for
        a view; None for the shared encoding."""
        table = tables.wants_table(request.headers.get("Accept", ""))
        if not table and not v.converted:
            return None
        include = request.query.get("includeObject", "Metadata")

        def render(kind: str, obj: Obj) -> bytes:
            shown = v.out(obj)
            if not table:
                return encode_line(kind, shown)
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return encode_line(kind, tables.to_table(v.rt, [shown], meta, include))

        return render

    async def patch(self, request: web.Request, t: Target, v: View, dry: bool) -> web.Response:
        """Apply the patch to the current object, then update with its resourceVersion
        (a patch that carries metadata.resourceVersion gets the usual conflict check)."""
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith(patching.APPLY):
            raise ApiError(
                415,
                "server-side apply is not supported by the eipctl emulator",
                "UnsupportedMediaType",
            )
        patch = await _body(request)
        current = v.out(self.store.get_object(v.stored, t.namespace, t.name))
        patched = patching.apply_patch(ctype, current, patch, t.rt.from_crd)
        if not ctype.startswith(patching.JSON_PATCH):
            patched = copy.deepcopy(patched)  # merges share untouched parts with the stored object
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patched object is not a Kubernetes object")
        self._strict(request, t.rt, patched)
        if not patched["metadata"].get("resourceVersion"):
            patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        obj = self.store.update_object(
            v.stored,
            t.namespace,
            t.name,
            v.into(patched),
            subresource=t.sub or None,
            from_patch=True,
            dry_run=dry,
        )
        return json_response(v.out(obj))

    def delete_collection(
        self, request: web.Request, t: Target, v: View, opts: options.DeleteOptions
    ) -> web.Response:
        """DELETE on a collection: every object the selectors match (none with dryRun)."""
        pred = self._predicate(request, t.rt)
        objs: list[Obj] = list(self.store.list_objects(v.stored, t.namespace or None, pred))
        items = []
        for o in objs:
            meta = o["metadata"]
            with contextlib.suppress(ApiError):
                gone = self.store.delete_object(
                    v.stored, meta.get("namespace", ""), meta["name"], dry_run=opts.dry_run
                )
                items.append(v.out(gone))
        return json_response(
            {
                "kind": f"{t.rt.kind}List",
                "apiVersion": t.rt.group_version,
                "metadata": {"resourceVersion": str(self.store.revision)},
                "items": items,
            }
        )
