"""controller/status.py: the status writes (their mutations: test_claim_status.py)."""

from __future__ import annotations

import asyncio

from eipctl.controller.status import StatusReporter
from eipctl.kube.client import Obj

NODE = "node-a"


def claim(ip: str, node: str = NODE, name: str | None = None, **spec: object) -> Obj:
    return {
        "metadata": {"name": name or ip.replace(".", "-").replace(":", "-")},
        "spec": {"ip": ip, "nodeName": node, **spec},
    }


class HeldPatches:
    """A writer whose IpNode patches wait until the test lets them land."""

    def __init__(self) -> None:
        self.landed: list[Obj] = []
        self.release = asyncio.Event()

    async def patch(self, ref: object, name: str, patch: Obj, **kw: object) -> Obj:
        await self.release.wait()
        self.landed.append(patch)
        return {}


class NoEvents:
    def emit(self, *args: object) -> None:
        pass


async def test_addresses_that_change_while_a_patch_is_in_flight_are_published_next_pass() -> None:
    """The IpNode must end up with what is on the links: a change seen while the previous
    patch was still in flight is written by a later pass, not recorded as published."""
    writer = HeldPatches()
    reporter = StatusReporter(writer, NoEvents(), NODE)  # type: ignore[arg-type]
    reporter.node_addresses(["203.0.113.1/32"], ["02:00:00:00:00:01"])
    await asyncio.sleep(0)
    reporter.node_addresses(["203.0.113.2/32"], ["02:00:00:00:00:01"])  # while in flight
    writer.release.set()
    await reporter.drain()
    reporter.node_addresses(["203.0.113.2/32"], ["02:00:00:00:00:01"])  # the next pass
    await reporter.drain()
    written = [p["status"]["addresses"] for p in writer.landed]
    assert written[-1] == ["203.0.113.2/32"]
