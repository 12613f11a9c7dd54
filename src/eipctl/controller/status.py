"""Claims in, claim and IpNode status out.

`StatusReporter` writes what the controller observed, through the serialized writer and in
the background (a pass over the links never waits for the API):

- claim `status.phase: Bound` + `status.boundNode` once the address is really on the link,
  and the `Conflict` condition (True while a probe or an admin address stops the add): the
  mutations are `core.claim_status.mark_bound` and `mark_conflict`;
- IpNode `status.addresses`: the managed addresses really on the links, as ip/prefixLength.

A write is only submitted when the cached object differs from what it should say, and one
write per object is in flight at a time; the next pass retries whatever is still different.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

import structlog

from eipctl.core.claim_status import has_conflict, is_bound_here, mark_bound, mark_conflict
from eipctl.core.claims import reference
from eipctl.core.fields import Mutation
from eipctl.core.ipnode import ADDRESSES, MACS
from eipctl.core.resources import IpClaim
from eipctl.kube.client import IPCLAIMS, IPNODES, Obj
from eipctl.kube.errors import NotFound
from eipctl.kube.events import EventType
from eipctl.kube.verbs import WritesPatch, WritesStatus

log = structlog.get_logger(__name__)

_IPNODE_KEY = "ipnode"
"""The `_inflight` key of the IpNode status patch (a claim's is `_claim_key(name)`)."""


class StatusWriter(WritesStatus, WritesPatch, Protocol):
    """The part of `SerializedWriter` used here."""


class EventSink(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...


class StatusReporter:
    """Background, deduplicated status writes for one node's claims and its IpNode."""

    def __init__(self, writer: StatusWriter, events: EventSink, node: str) -> None:
        self._writer = writer
        self._events = events
        self._node = node
        # Not the writer's lanes, which would queue every pass's copy: the cache shows a write
        # only once it lands, so this keeps one per object and one Conflict Event per write.
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._addresses: tuple[list[str], list[str]] | None = None  # last addresses, macs

    def bound(self, claim: IpClaim) -> None:
        if is_bound_here(claim, self._node):
            return
        self._spawn(
            _claim_key(claim.name),
            self._update(claim.name, mark_bound(self._node), "bound"),
        )

    def conflict(self, claim: IpClaim, reason: str, message: str) -> None:
        if has_conflict(claim, reason, message):
            return
        key = _claim_key(claim.name)
        if key in self._inflight:
            return
        self._events.emit(_involved(claim), "Warning", reason, message)
        self._spawn(
            key,
            self._update(claim.name, mark_conflict(self._node, reason, message), "conflict"),
        )

    def event(self, claim: IpClaim, type_: EventType, reason: str, message: str) -> None:
        """Post an Event about `claim` through the node's recorder."""
        self._events.emit(_involved(claim), type_, reason, message)

    def node_addresses(self, addresses: list[str], macs: list[str] | None = None) -> None:
        """IpNode status: the managed addresses really on the links, and the links' MACs
        (so another node whose probe meets one of them knows it is eipctl's)."""
        published = (addresses, macs or [])
        if published == self._addresses or _IPNODE_KEY in self._inflight:
            return  # one patch in flight: a later pass publishes what is true by then
        self._addresses = published
        self._spawn(_IPNODE_KEY, self._patch_addresses(*published))

    def forget_addresses(self) -> None:
        """Make the next `node_addresses` write even if unchanged (after the IpNode was
        recreated, or a write failed)."""
        self._addresses = None

    async def drain(self) -> None:
        """Wait for the writes in flight (bound it with `asyncio.timeout`)."""
        tasks = list(self._inflight.values())
        if tasks:
            await asyncio.wait(tasks)

    def cancel(self) -> None:
        for task in self._inflight.values():
            task.cancel()

    def _spawn(self, key: str, coro: Coroutine[Any, Any, None]) -> None:
        if key in self._inflight:
            coro.close()
            return
        task = asyncio.create_task(coro, name=f"status-{key}")
        self._inflight[key] = task
        task.add_done_callback(lambda _t: self._inflight.pop(key, None))

    async def _update(self, name: str, mutate: Mutation, what: str) -> None:
        try:
            await self._writer.update_status(IPCLAIMS, name, mutate)
            log.info("claim.status_written", status=what, claim=name, node=self._node)
        except NotFound:
            log.info("claim.status_gone", status=what, claim=name)
        except Exception as exc:
            log.warning("claim.status_failed", status=what, claim=name, error=repr(exc))

    async def _patch_addresses(self, addresses: list[str], macs: list[str]) -> None:
        try:
            await self._writer.patch(
                IPNODES, self._node, {"status": {ADDRESSES: addresses, MACS: macs}}, status=True
            )
            log.info("ipnode.addresses", node=self._node, addresses=addresses)
        except Exception as exc:
            self._addresses = None
            log.warning("ipnode.addresses.failed", node=self._node, error=repr(exc))


def _claim_key(name: str) -> str:
    """The `_inflight` key of a claim's status write."""
    return f"claim/{name}"


def _involved(claim: IpClaim) -> Obj:
    """The claim as the involved object of an Event."""
    return reference({"metadata": claim.metadata})
