"""Watch events and watchers: each event is encoded once per (type, apiVersion), then shared."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .selectors import Predicate

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode_line(kind: str, obj: dict[str, Any]) -> bytes:
    """One watch-stream line: {"type": ..., "object": ...} and a newline."""
    return (_dumps({"type": kind, "object": obj}) + "\n").encode()


@dataclass(eq=False)
class Event:
    """One change, at one revision of the whole store."""

    rv: int
    type: str
    key: tuple[str, str]
    obj: dict[str, Any]
    old: dict[str, Any] | None = None
    _lines: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def line(self, kind: str, api_version: str) -> bytes:
        """The encoded line, built at most once per event type and apiVersion."""
        k = (kind, api_version)
        data = self._lines.get(k)
        if data is None:
            obj = self.obj
            if obj.get("apiVersion") != api_version:
                obj = {**obj, "apiVersion": api_version}
            data = self._lines[k] = encode_line(kind, obj)
        return data


class Watcher:
    """One open watch stream: filters events and buffers their encoded lines for the writer."""

    def __init__(
        self,
        key: tuple[str, str],
        api_version: str,
        kind: str,
        namespace: str | None,
        predicate: Predicate | None,
        *,
        bookmarks: bool,
        max_buffer: int = 200_000,
        render: Callable[[str, dict[str, Any]], bytes] | None = None,
    ) -> None:
        self.key = key
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.predicate = predicate
        self.bookmarks = bookmarks
        self.max_buffer = max_buffer
        self.render = render  # per-watcher encoding (Tables for `kubectl get -w`), else shared
        self.buf: list[bytes] = []
        self.wake = asyncio.Event()
        self.closed = False
        self.overflowed = False

    def start_with(self, objects: Iterable[dict[str, Any]], end: int | None) -> None:
        """Begin with the current state: one ADDED per object, then (sendInitialEvents) the
        BOOKMARK at revision `end` that says the initial state is complete."""
        for obj in objects:
            if self.render is not None:
                self.push(self.render("ADDED", obj))
            else:
                self.push(Event(0, "ADDED", self.key, obj).line("ADDED", self.api_version))
        if end is not None:
            self.bookmark(end, initial_events_end=True)

    def _in_scope(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.predicate is None or self.predicate(obj)

    def offer(self, ev: Event) -> None:
        """Queue the event if this watcher sees it; a selector change turns MODIFIED into
        ADDED or DELETED, as the apiserver does."""
        if self.closed:
            return
        kind = ev.type
        if self.namespace is not None or self.predicate is not None:
            now = self._in_scope(ev.obj)
            if kind == "MODIFIED":
                before = self._in_scope(ev.old)
                if not now and not before:
                    return
                if now and not before:
                    kind = "ADDED"
                elif before and not now:
                    kind = "DELETED"
            elif not now:
                return
        if self.render is not None:
            self.push(self.render(kind, ev.obj))
        else:
            self.push(ev.line(kind, self.api_version))

    def push(self, line: bytes) -> None:
        """Queue an encoded line; a watcher too far behind is closed so it re-watches."""
        self.buf.append(line)
        if len(self.buf) > self.max_buffer:
            self.overflowed = True
            self.close()
        self.wake.set()

    def bookmark(self, revision: int, initial_events_end: bool = False) -> None:
        """Tell the client how far it is up to date, even with nothing to report."""
        if (self.bookmarks or initial_events_end) and not self.closed:
            meta: dict[str, Any] = {"resourceVersion": str(revision)}
            if initial_events_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            obj = {"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}
            self.push(encode_line("BOOKMARK", obj))

    def close(self) -> None:
        """End the stream after what is already buffered."""
        self.closed = True
        self.wake.set()

    def take(self) -> bytes:
        """Everything buffered, joined, so a busy watcher costs one write per wake-up."""
        buf, self.buf = self.buf, []
        if self.overflowed:
            return b""
        return b"".join(buf)
