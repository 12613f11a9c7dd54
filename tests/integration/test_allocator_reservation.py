"""Story: the allocator reserves an IP by creating its IpClaim, and a name that is already
taken is someone else's IP, even when the allocator's own caches have not heard of it yet.

docs/allocator.md, "The record: IpClaims": the claim (named after the IP) is created first,
as the atomic reservation; AlreadyExists means someone else holds the IP unless the claim
that is there is ours (made by the allocator, listing this Service). The allocator's claim
informer normally tells it about every claim before it plans, so these stories make it lag:
the allocator runs in this loop on a client whose watch streams can be held back (events
arrive later, in order, none lost), as on a replica whose watch is behind the API while
another replica or a person creates a claim.

Mutants these stories kill (each passed every other test):
- `ServiceReconciler._acquire` treating AlreadyExists on the claim create as success, or
  checking only half of "ours" (made by the allocator; lists this Service);
- `SerializedWriter._create` counting any AlreadyExists after an ambiguous failure as its
  own create, without checking the write-id (under a flaky API, the same double allocation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path
from typing import Any

from test_allocator_support import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    SERVICES,
    check_consistent,
    create,
    eventually,
    ips_of,
    pool,
    service,
    service_ips,
    settings,
)

from eipctl.allocator.process import Allocator
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import KubeApi, Obj, ResourceRef, WatchEvent, connect
from eipctl.kube.errors import error_for

FIRST_FREE = "198.51.100.1"  # the lowest address of pool "p" (network address excluded)
NEXT_FREE = "198.51.100.2"


class LaggingClient(KubeApi):
    """The allocator's own client, with two switches at its boundary.

    - `hold(ref)`: the events of `ref`'s watch streams wait until `let_go(ref)`; the
      informer is then behind the API, exactly as with a slow watch.
    - `refuse_next_create(ref, code)`: the next create of `ref` is answered with `code`
      without reaching the server, as an API server that failed before applying it.
    """

    def __init__(self, base: KubeApi) -> None:
        super().__init__(base.api_client, owns_client=True)
        self._gates: dict[str, asyncio.Event] = {}
        self._refusals: dict[str, list[int]] = {}
        self.refused: list[Obj] = []

    def _gate(self, ref: ResourceRef) -> asyncio.Event:
        gate = self._gates.get(ref.plural)
        if gate is None:
            gate = self._gates[ref.plural] = asyncio.Event()
            gate.set()
        return gate

    def hold(self, *refs: ResourceRef) -> None:
        for ref in refs:
            self._gate(ref).clear()

    def let_go(self, *refs: ResourceRef) -> None:
        for ref in refs:
            self._gate(ref).set()

    def refuse_next_create(self, ref: ResourceRef, code: int) -> None:
        self._refusals.setdefault(ref.plural, []).append(code)

    async def watch(
        self, ref: ResourceRef, namespace: str | None = None, **kw: Any
    ) -> AsyncGenerator[WatchEvent, None]:
        stream = super().watch(ref, namespace, **kw)
        async with contextlib.aclosing(stream):
            async for event in stream:
                await self._gate(ref).wait()
                yield event

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        refusals = self._refusals.get(ref.plural)
        if refusals:
            code = refusals.pop(0)
            self.refused.append(obj)
            raise error_for(code, json.dumps({"reason": "ServiceUnavailable", "code": code}))
        return await super().create(ref, obj, namespace)


@dataclass
class Running:
    allocator: Allocator
    client: LaggingClient

    async def settled(self, claim: str) -> None:
        """Until the allocator's claim cache has `claim` and it has acted on all it knows."""
        await eventually(lambda: self.allocator.caches.claims.get(claim) is not None)
        term = self.allocator.term
        assert term is not None
        async with asyncio.timeout(10):
            await term.queue.wait_idle()


@contextlib.asynccontextmanager
async def lagging_allocator(kubeconfig: Path) -> AsyncIterator[Running]:
    """The allocator (one worker, so Services are served in the order it sees them) in this
    loop, leading at once, on a `LaggingClient`."""
    client = LaggingClient(await connect(str(kubeconfig)))
    allocator = Allocator(client, settings(kubeconfig, identity="lagging", workers=1))
    allocator.start()
    leading = asyncio.create_task(allocator.lead())
    try:
        await eventually(lambda: allocator.term is not None, what="the allocator leads")
        yield Running(allocator, client)
    finally:
        client.let_go(IPCLAIMS, SERVICES)
        leading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leading
        await allocator.stop()
        await client.close()


def replica_claim(ip: str, holder: str) -> Obj:
    """The claim another allocator replica creates to reserve `ip` for `holder`."""
    return allocator_claim(
        ip_address(ip), pool="p", prefix_length=None, service=holder, sharing_key=""
    )


def hand_made_claim(ip: str, holder: str) -> Obj:
    """A claim a person made with kubectl: no eipctl labels, so not the allocator's."""
    return {"metadata": {"name": claim_name_for(ip)}, "spec": {"ip": ip, "services": [holder]}}


async def test_an_ip_another_replica_just_reserved_for_another_service_is_not_taken(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    """Guards: AlreadyExists on the claim create means "taken" unless the claim lists this
    Service. Kills: `_acquire` returning True on AlreadyExists (web would get 198.51.100.1,
    already reserved for other) and `_acquire` accepting any allocator-made claim as ours.

    Another replica reserved the lowest free IP for Service `other` while this allocator's
    watches lagged: it sees `web` (then `other`) but not the claim, plans 198.51.100.1 for web,
    and its create finds the name taken."""
    await create(api, IPCLAIMPOOLS, pool("p", "198.51.100.0/29"))
    async with lagging_allocator(kubeconfig_path) as running:
        running.client.hold(SERVICES, IPCLAIMS)
        web = await create(api, SERVICES, service("web"))
        await create(api, SERVICES, service("other"))
        foreign = await create(api, IPCLAIMS, replica_claim(FIRST_FREE, "default/other"))

        running.client.let_go(SERVICES)  # web is served first, the claim still unseen
        await eventually(lambda: ips_of(api, "web"))
        # the other replica's Service gets the IP it reserved (this allocator finishes the job)
        assert await eventually(lambda: ips_of(api, "other")) == [FIRST_FREE]

        running.client.let_go(IPCLAIMS)
        await running.settled(claim_name_for(FIRST_FREE))
        await _untouched(api, foreign)
        await _never_carried(api, web, FIRST_FREE, ending_with=[NEXT_FREE])
    await check_consistent(api, expect_services=2)


async def test_a_hand_made_claim_on_the_next_free_ip_is_not_adopted(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    """Guards: a claim the allocator did not make is never ours, even one that names the
    Service: it is not the allocator's to hand out (nor, later, to delete). Kills: `_acquire` returning
    True on AlreadyExists, and `_acquire` taking any claim that lists the Service as ours
    without checking that the allocator made it (web would get 198.51.100.1).

    A person creates a claim for the lowest free IP by hand, naming web, while the
    allocator's claim watch lags; web, created right after, gets the next IP and the claim
    is not touched."""
    await create(api, IPCLAIMPOOLS, pool("p", "198.51.100.0/29"))
    async with lagging_allocator(kubeconfig_path) as running:
        running.client.hold(IPCLAIMS)
        foreign = await create(api, IPCLAIMS, hand_made_claim(FIRST_FREE, "default/web"))
        web = await create(api, SERVICES, service("web"))
        await eventually(lambda: ips_of(api, "web"))

        running.client.let_go(IPCLAIMS)
        await running.settled(claim_name_for(FIRST_FREE))
        await _untouched(api, foreign)
        await _never_carried(api, web, FIRST_FREE, ending_with=[NEXT_FREE])


async def test_a_refused_claim_create_then_a_taken_name_is_still_taken(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    """Guards, under a flaky API: a claim create refused with a 5xx and not applied, then
    retried by the writer into AlreadyExists, is someone else's claim unless it carries the
    writer's write-id. Kills: `SerializedWriter._create` counting every AlreadyExists after
    an ambiguous failure as its own (the writer would hand back the other replica's claim
    as created, and web would get 198.51.100.1)."""
    await create(api, IPCLAIMPOOLS, pool("p", "198.51.100.0/29"))
    async with lagging_allocator(kubeconfig_path) as running:
        running.client.hold(SERVICES, IPCLAIMS)
        web = await create(api, SERVICES, service("web"))
        await create(api, SERVICES, service("other"))
        foreign = await create(api, IPCLAIMS, replica_claim(FIRST_FREE, "default/other"))
        running.client.refuse_next_create(IPCLAIMS, 503)

        running.client.let_go(SERVICES)
        await eventually(lambda: ips_of(api, "web"))
        assert [c["spec"]["ip"] for c in running.client.refused] == [FIRST_FREE]
        assert await eventually(lambda: ips_of(api, "other")) == [FIRST_FREE]

        running.client.let_go(IPCLAIMS)
        await running.settled(claim_name_for(FIRST_FREE))
        await _untouched(api, foreign)
        await _never_carried(api, web, FIRST_FREE, ending_with=[NEXT_FREE])
    await check_consistent(api, expect_services=2)


async def _never_carried(api: KubeApi, created: Obj, ip: str, *, ending_with: list[str]) -> None:
    """The Service never carried `ip`, not even for an instant, and now carries `ending_with`.

    Every version it had since `created` is read back from the API's watch history, so a
    wrong IP written and then corrected by a later reconcile is not missed."""
    meta = created["metadata"]
    now = await api.get(SERVICES, meta["name"], meta["namespace"])
    last = int(now["metadata"]["resourceVersion"])
    carried = [service_ips(created)]
    stream = api.watch(
        SERVICES,
        meta["namespace"],
        resource_version=meta["resourceVersion"],
        field_selector=f"metadata.name={meta['name']}",
    )
    async with asyncio.timeout(10), contextlib.aclosing(stream):
        async for event in stream:
            if event.type != "BOOKMARK":
                carried.append(service_ips(event.object))
            if int(event.object["metadata"]["resourceVersion"]) >= last:
                break
    assert not [ips for ips in carried if ip in ips], f"{meta['name']} carried {carried}"
    assert carried[-1] == ending_with, f"{meta['name']} carried {carried}"


async def _untouched(api: KubeApi, before: Obj) -> None:
    """The claim is exactly as its maker left it."""
    now = await api.get(IPCLAIMS, before["metadata"]["name"])
    assert now["spec"].get("services") == before["spec"].get("services")
    assert now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
