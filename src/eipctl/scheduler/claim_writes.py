"""The placement writes of one term in flight, and the claims they stored.

Not the writer's lanes: those order the writes to a claim. This keeps a pass from deciding
a claim twice on one observation (a claim with a write in flight counts as already where
that write puts it), says when a pass wanted to decide one meanwhile (another pass follows
the write), and lays the claims our writes stored over the older cached copies until the
informer delivers them (by resourceVersion): a stale cache never makes the scheduler place
a claim a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import structlog

from eipctl.core.fields import Obj, name_of
from eipctl.core.placement import Decision

log = structlog.get_logger(__name__)


class Cache(Protocol):
    def objects(self) -> list[Obj]: ...


def _rv_int(obj: Obj) -> int | None:
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else None


class ClaimWrites:
    """Writes in flight (by claim name) and the copies they stored."""

    def __init__(self, claims: Cache, kick: Callable[[float], None]) -> None:
        self.claims = claims
        self.kick = kick
        """Ask for another pass after a delay (the term's queue)."""
        self.pending: dict[str, Decision | None] = {}
        """Claims with a write in flight: the decision, or None for a repair or a copy."""
        self.deferred: set[str] = set()
        """Claims a pass wanted to decide while their write was in flight."""
        self._written: dict[str, Obj] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        """Held (the loop keeps only weak references), awaited by close."""

    def __len__(self) -> int:
        return len(self.pending)

    def start(self, name: str, decision: Decision | None, write: Coroutine[Any, Any, None]) -> None:
        self.pending[name] = decision
        task = asyncio.create_task(write, name=f"place-{name}")
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._finished(name, t))

    def defer(self, name: str, decision: Decision | None = None) -> None:
        """A pass decided `name` while its write is in flight: look again once it is done,
        unless the pass decided what that write already does."""
        if decision is None or self.pending.get(name) != decision:
            self.deferred.add(name)

    def _finished(self, name: str, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self.pending.pop(name, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.deferred.discard(name)
            log.warning("placement.write_failed", claim=name, error=repr(exc))
            self.kick(1.0)  # the writer already retried; look again a little later
        elif name in self.deferred:
            self.deferred.discard(name)
            self.kick(0.0)  # e.g. its target died while the write was in flight

    async def close(self) -> None:
        """End of the term: stop the writes still in flight."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def remember(self, stored: Obj) -> None:
        """Use this copy of a claim until the cache has caught up with it."""
        self._written[name_of(stored)] = stored

    def settled(self, cached: Callable[[str], Obj | None]) -> bool:
        """No write in flight, and ``cached`` (the cache, by name) holds every copy our writes
        stored: then the cache alone says where every claim is (`Placer.failover` counts
        the nodes' claims by it)."""
        if self.pending:
            return False
        for name, mine in self._written.items():
            now = cached(name)
            if now is None:
                continue  # deleted since: counted nowhere, as it should be
            now_rv, mine_rv = _rv_int(now), _rv_int(mine)
            if now_rv is None or mine_rv is None or now_rv < mine_rv:
                return False
        return True

    def is_echo(self, obj: Obj) -> bool:
        """True if ``obj`` is what our own write stored (no new pass needed for it)."""
        mine = self._written.get(name_of(obj))
        return mine is not None and _rv_int(mine) is not None and _rv_int(mine) == _rv_int(obj)

    def claim_objects(self) -> list[Obj]:
        """The cached claims, with our own not-yet-seen writes laid over them."""
        overlay = self.overlay()
        out = [overlay.current(cached) for cached in self.claims.objects()]
        overlay.done()
        return out

    def overlay(self) -> Overlay:
        """`claim_objects` one claim at a time, for a pass that walks them in slices."""
        return Overlay(self._written)


class Overlay:
    """Our stored copies laid over a walk of the cached claims (`ClaimWrites.overlay`).

    Writes may end between two claims of the walk (the pass yields to the loop): what they
    store is used when the walk reaches that claim, and a copy stored during the walk is kept
    for the next pass even if the walk's list of claims predates it.
    """

    __slots__ = ("_before", "_seen", "_written")

    def __init__(self, written: dict[str, Obj]) -> None:
        self._written = written
        self._before = set(written)
        self._seen: set[str] = set()

    def current(self, cached: Obj) -> Obj:
        """``cached``, or our newer stored copy of it; forgets ours once the cache has it."""
        name = name_of(cached)
        self._seen.add(name)
        mine = self._written.get(name)
        if mine is None:
            return cached
        cached_rv, mine_rv = _rv_int(cached), _rv_int(mine)
        if cached_rv is None or mine_rv is None or cached_rv >= mine_rv:
            del self._written[name]
            return cached
        return mine

    def done(self) -> None:
        """Forget our copies of claims the walk did not meet (deleted since)."""
        for name in self._before - self._seen:
            self._written.pop(name, None)
