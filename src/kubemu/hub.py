"""The history window and the open watchers: where every committed event goes."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator

from . import errors
from .watch import Event, Watcher


class WatchHub:
    """Keeps the last `window` events (like etcd before compaction) and fans them out."""

    def __init__(self, window: int) -> None:
        self.history: deque[Event] = deque(maxlen=max(1, window))
        self.compacted = 0  # events at or below this revision may be gone
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}

    def publish(self, ev: Event) -> None:
        """Record an event and hand it to every watcher of its resource."""
        if len(self.history) == self.history.maxlen:
            self.compacted = self.history[0].rv
        self.history.append(ev)
        for w in self._watchers.get(ev.key, ()):
            w.offer(ev)

    def attach(self, w: Watcher, since: int | None) -> None:
        """Replay what came after `since` (410 if that left the window), then follow."""
        if since is not None:
            if since < self.compacted:
                raise errors.gone(f"too old resource version: {since} ({self.compacted + 1})")
            for ev in self._after(since):
                if ev.key == w.key:
                    w.offer(ev)
        self._watchers.setdefault(w.key, set()).add(w)

    def _after(self, since: int) -> Iterator[Event]:
        if not self.history or self.history[-1].rv <= since:
            return
        for ev in self.history:
            if ev.rv > since:
                yield ev

    def detach(self, w: Watcher) -> None:
        """Forget a watcher whose stream ended."""
        ws = self._watchers.get(w.key)
        if ws is not None:
            ws.discard(w)

    def close_resource(self, key: tuple[str, str]) -> None:
        """End every watch on a resource that stopped being served."""
        for w in self._watchers.pop(key, set()):
            w.close()

    def all(self) -> list[Watcher]:
        """Every open watcher."""
        return [w for ws in self._watchers.values() for w in ws]

    def close_all(self) -> int:
        """End every watch stream (clients see the stream close and re-watch)."""
        ws = self.all()
        for w in ws:
            w.close()
        return len(ws)

    async def run_bookmarks(self, interval: float, revision: Callable[[], int]) -> None:
        """Send a BOOKMARK to every watcher that asked for them, every `interval` seconds."""
        while True:
            await asyncio.sleep(interval)
            rv = revision()
            for w in self.all():
                w.bookmark(rv)
