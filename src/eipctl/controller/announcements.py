"""Announcements in the background: one task per address on a link.

Announcing takes a while (several gratuitous ARPs / NAs spaced apart), so a pass starts it and
moves on. Adding the address again replaces its task; removing the address cancels it; and
`still_ours` (the fence's "may hold") is asked before every round, so a process that was frozen
or starved between two rounds never sends a late one for an address that has moved.

The fence may hold for up to ``--fence-timeout`` (2.5 s) after the API last answered, while the
scheduler moves the claims of a node silent for 400 ms; so a controller frozen for a second in
the middle of a schedule could thaw, still "may hold", and send its next round for an address
the leader had moved (soak seed 1202: the client's neighbour entry followed that late
gratuitous ARP to a node that let the address go 0.1 s later). Rounds after the first also ask
`leader_agrees`: the writing leader's latest probe carried the digest of the claims this node
holds (`Vouching.mismatch_since` is None). On a thaw the queued probes are read before the
round's timer fires (asyncio runs I/O callbacks first), so the newest one decides. The first
round is not held back by it: a claim just placed here may briefly be ahead of the digest of
the probe in flight, and Bound waits for that round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from eipctl.net.errors import NetError
from eipctl.net.link import Announcer, IPAddress

from .metrics import NET_ERRORS

log = structlog.get_logger(__name__)


class Announcements:
    def __init__(
        self,
        announcer: Announcer,
        still_ours: Callable[[], bool],
        leader_agrees: Callable[[], bool] | None = None,
    ) -> None:
        self._announcer = announcer
        self._still_ours = still_ours
        self._leader_agrees = leader_agrees
        self._tasks: dict[tuple[str, IPAddress], asyncio.Task[None]] = {}

    def start(
        self,
        link: str,
        ip: IPAddress,
        claim: str,
        on_first: Callable[[], None] | None = None,
    ) -> None:
        """Announce `ip` on `link` (for `claim`), replacing an announcement still running.

        `on_first` runs once the first round is out (or the announcer gave up): the caller
        reports Bound only then, because the old holder lets go on that Bound, and clients
        still pointing at it must already have been told where the IP went. Not run if the
        announcement is cancelled first (the address went) or stopped by `still_ours`.
        """
        self.stop(link, ip)
        task = asyncio.create_task(self._announce(link, ip, claim, on_first), name=f"announce-{ip}")
        self._tasks[(link, ip)] = task
        task.add_done_callback(lambda t: self._forget((link, ip), t))

    def stop(self, link: str, ip: IPAddress) -> None:
        task = self._tasks.pop((link, ip), None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _forget(self, key: tuple[str, IPAddress], task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]

    async def _announce(
        self, link: str, ip: IPAddress, claim: str, on_first: Callable[[], None] | None
    ) -> None:
        stopped = False
        rounds = 0

        def still_ours() -> bool:
            nonlocal stopped, rounds
            ours = self._still_ours()
            if ours and rounds and self._leader_agrees is not None and not self._leader_agrees():
                ours = False
                log.info("address.announce.held", claim=claim, ip=str(ip), round=rounds + 1)
            rounds += 1
            stopped = stopped or not ours
            return ours

        def first() -> None:
            nonlocal on_first
            if on_first is not None:
                callback, on_first = on_first, None
                callback()

        try:
            await self._announcer(link, ip, still_ours=still_ours, on_round=first)
        except NetError as exc:
            NET_ERRORS.labels("announce").inc()
            log.warning("address.announce.failed", claim=claim, ip=str(ip), error=str(exc))
        except Exception:  # a broken announcer must not keep the claim from Bound
            log.exception("address.announce.crashed", claim=claim, ip=str(ip))
        if not stopped:
            first()  # no round went out (the announcer failed): the address is there all the same
