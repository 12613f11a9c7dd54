"""Kubernetes Events for operators: `kubectl describe` shows why eipctl did what it did.

Recording an Event is best effort: it never raises into the caller and never blocks it
(`emit` schedules the post). Repeats of the same (object, type, reason, message) bump the
existing Event's count instead of creating a new one, as client-go's correlator does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Literal, Protocol

import structlog

from eipctl.kube.client import EVENTS, Obj
from eipctl.kube.errors import NotFound
from eipctl.kube.verbs import Creates, Patches

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]


class EventApi(Creates, Patches, Protocol):
    """The verbs Events need (`KubeApi` satisfies it)."""


def reference(api_version: str, kind: str, obj: Obj) -> Obj:
    """`obj` as the involved object of an Event: informers and the API drop apiVersion and
    kind from items, so the caller names them; metadata (uid, resourceVersion) is kept."""
    return {"apiVersion": api_version, "kind": kind, "metadata": dict(obj.get("metadata") or {})}


class Tells(Protocol):
    """What posts an Event and logs it as a decision (`EventRecorder.tell`); tests fake it."""

    def tell(
        self, involved: Obj, type_: EventType, reason: str, message: str, **fields: object
    ) -> None: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Posts core/v1 Events about objects, as `component` (e.g. "eipctl-scheduler")."""

    def __init__(
        self,
        api: EventApi,
        component: str,
        *,
        host: str = "",
        max_remembered: int = 4096,
        max_in_flight: int = 4,
        max_backlog: int = 1000,
    ) -> None:
        self.api = api
        self.component = component
        self.host = host
        self._max = max_remembered
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        # Every post scheduled, for the backlog bound and `flush` (Events bypass the writer).
        self._tasks: set[asyncio.Task[None]] = set()
        # Events are best effort: a few posts at a time so a burst (2,000 Services at once)
        # never competes with the writes that matter, and a bounded backlog beyond which
        # new Events are dropped (and counted) rather than queued without end.
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._max_backlog = max_backlog
        self.dropped = 0

    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None:
        """Fire and forget: schedule `record` without awaiting it."""
        if len(self._tasks) >= self._max_backlog:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning("event.dropped", dropped=self.dropped, reason=reason)
            return
        try:
            task = asyncio.get_running_loop().create_task(
                self.record(involved, type_, reason, message)
            )
        except RuntimeError:  # no running loop: nothing to post with
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def tell(
        self, involved: Obj, type_: EventType, reason: str, message: str, **fields: object
    ) -> None:
        """Log a decision about an object and post it as an Event on that object, in one
        call, so the log line and what `kubectl describe` shows say the same thing.

        The log line is `object.event` (a warning for a Warning Event) with the object's
        kind, name and namespace, the reason, the message as `detail`, and `fields`.
        """
        meta = involved.get("metadata") or {}
        level = log.warning if type_ == "Warning" else log.info
        level(
            "object.event",
            kind=involved.get("kind"),
            name=meta.get("name"),
            namespace=meta.get("namespace"),
            reason=reason,
            detail=message,
            **fields,
        )
        self.emit(involved, type_, reason, message)

    async def flush(self) -> None:
        """Wait for scheduled posts (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def record(self, involved: Obj, type_: EventType, reason: str, message: str) -> None:
        """Post (or bump) the Event; errors are logged, never raised."""
        try:
            async with self._in_flight:
                await self._record(involved, type_, reason, message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("event.post_failed", reason=reason, error=repr(exc))

    async def _record(self, involved: Obj, type_: EventType, reason: str, message: str) -> None:
        meta = involved.get("metadata") or {}
        ns = meta.get("namespace") or "default"  # cluster-scoped objects: events in default
        ident = (
            str(meta.get("uid") or ""),
            str(involved.get("kind") or ""),
            ns,
            str(meta.get("name") or ""),
            type_,
            reason,
            message,
        )
        now = _now()
        known = self._seen.get(ident)
        if known is not None:
            name, event_ns, count = known
            self._seen[ident] = (name, event_ns, count + 1)
            self._seen.move_to_end(ident)
            patch: Obj = {"count": count + 1, "lastTimestamp": now}
            try:
                await self.api.patch(EVENTS, name, patch, event_ns)
                return
            except NotFound:  # the Event expired server-side: start a new one
                self._seen.pop(ident, None)
        name = f"{meta.get('name', 'unknown')}.{uuid.uuid4().hex[:16]}"
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace", ""),
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._seen[ident] = (name, ns, 1)
        if len(self._seen) > self._max:
            self._seen.popitem(last=False)
        try:
            await self.api.create(EVENTS, body, ns)
        except BaseException:
            self._seen.pop(ident, None)
            raise
        log.debug("event.posted", object=meta.get("name"), reason=reason, type=type_)
