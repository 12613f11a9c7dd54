"""`controller.process.LinkFinder`: the controller finds its link, or waits for one, not
ready and saying why, against the API emulator and in-memory links.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import structlog

from eipctl.controller.process import (
    LinkFinder,
    NodeFacts,
    _until_stopped,
    node_facts_of,
    node_settings,
    read_node_facts,
)
from eipctl.core.link_choice import ANNOTATION_LINK, Source
from eipctl.kube.client import EVENTS, NODES, KubeApi, Obj
from eipctl.kube.errors import ApiError
from eipctl.kube.events import EventRecorder
from eipctl.net.errors import NetlinkError
from eipctl.net.memory import MemoryLinkBackend
from eipctl.runtime.config import ControllerSettings
from kubemu import ApiServer
from polling import eventually

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
NODE = "node-a"
NODE_IP = "192.0.2.2"


class Bed:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.backend = MemoryLinkBackend()
        self.backend.create_link("lo")
        self.backend.add_foreign("lo", "127.0.0.1", 8)
        self.backend.create_link("ens5")
        self.backend.add_foreign("ens5", NODE_IP, 24)
        self.backend.create_link("eth1")
        self.backend.add_foreign("eth1", "198.51.100.7", 24)
        self.backend.default_route_links = ["eth1"]
        self.events = EventRecorder(api, "eipctl-controller", host=NODE)

    async def node(self, *, annotation: str | None = None, internal_ip: str | None = None) -> None:
        meta: Obj = {"name": NODE}
        if annotation is not None:
            meta["annotations"] = {ANNOTATION_LINK: annotation}
        await self.api.create(NODES, {"metadata": meta})
        if internal_ip is not None:
            addresses = [
                {"type": "Hostname", "address": NODE},
                {"type": "InternalIP", "address": internal_ip},
            ]
            await self.api.patch(NODES, NODE, {"status": {"addresses": addresses}}, status=True)

    def finder(self, flag: str = "auto", host_ip: str = "", **kw: Any) -> LinkFinder:
        return LinkFinder(
            node=NODE,
            flag=flag,
            host_ip=host_ip,
            api=kw.pop("api", self.api),
            inventory=self.backend,
            events=self.events,
            retry=0.05,
        )

    async def events_about(self, reason: str) -> list[Obj]:
        await self.events.flush()
        items = (await self.api.list(EVENTS, "default")).items
        return [e for e in items if e["reason"] == reason]


@pytest_asyncio.fixture
async def bed(apiserver: ApiServer, api_client: Any) -> AsyncIterator[Bed]:
    await apiserver.load_crds_from_dir(CRDS)
    yield Bed(KubeApi(api_client))


async def test_auto_takes_the_link_holding_the_internal_ip(bed: Bed) -> None:
    await bed.node(internal_ip=NODE_IP)
    finder = bed.finder()
    with structlog.testing.capture_logs() as logs:
        assert await asyncio.wait_for(finder.wait(), 5) == "ens5"
    assert finder.choice is not None and finder.choice.source is Source.INTERNAL_IP
    assert finder.not_ready() is None
    chosen = [e for e in logs if e["event"] == "link.chosen"]
    assert chosen == [
        {
            "event": "link.chosen",
            "node": NODE,
            "link": "ens5",
            "reason": "internal-ip",
            "detail": f"holds InternalIP {NODE_IP}",
            "log_level": "info",
        }
    ]


async def test_host_ip_stands_in_for_an_unreadable_node_then_the_default_route(bed: Bed) -> None:
    assert await asyncio.wait_for(bed.finder(host_ip=NODE_IP).wait(), 5) == "ens5"
    finder = bed.finder()
    assert await asyncio.wait_for(finder.wait(), 5) == "eth1"
    assert finder.choice is not None and finder.choice.source is Source.DEFAULT_ROUTE


async def test_an_explicit_flag_is_used_without_reading_the_node(bed: Bed) -> None:
    class NoApi:
        async def get(self, *_a: Any, **_kw: Any) -> Obj:
            raise AssertionError("the Node is not read when --iface names the link")

    finder = bed.finder("eth1", api=NoApi())
    assert await asyncio.wait_for(finder.wait(), 5) == "eth1"
    assert finder.choice is not None and finder.choice.source is Source.FLAG


async def test_a_missing_annotated_link_is_not_ready_until_it_appears(bed: Bed) -> None:
    await bed.node(annotation="bond0", internal_ip=NODE_IP)
    finder = bed.finder()
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(finder.wait())
        try:
            await eventually(lambda: finder.choice is not None)
            await asyncio.sleep(0.2)  # a few more looks: still one line, one Event
            reason = f"link bond0 (annotation {ANNOTATION_LINK}) does not exist"
            assert finder.not_ready() == reason
            assert not task.done()
            warnings = await bed.events_about("LinkMissing")
            assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
            assert warnings[0]["involvedObject"]["kind"] == "IpNode"
            assert warnings[0]["involvedObject"]["name"] == NODE
            assert reason in warnings[0]["message"]
            assert [e["event"] for e in logs].count("link.unusable") == 1

            bed.backend.create_link("bond0")
            bed.backend.set_link_up("bond0", False)
            await eventually(
                lambda: finder.not_ready() == reason.replace("does not exist", "is down")
            )
            assert len(await bed.events_about("LinkDown")) == 1

            bed.backend.set_link_up("bond0", True)
            assert await asyncio.wait_for(task, 5) == "bond0"
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert finder.not_ready() is None
    assert len(await bed.events_about("LinkChosen")) == 1


async def test_lookup_failures_are_retried_and_named(bed: Bed) -> None:
    class BrokenApi:
        async def get(self, *_a: Any, **_kw: Any) -> Obj:
            raise ApiError(503, "ServiceUnavailable", "etcd is down")

    finder = bed.finder(api=BrokenApi())
    task = asyncio.create_task(finder.wait())
    try:
        await eventually(lambda: (finder.not_ready() or "").startswith("cannot look for"))
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    bed.backend.fail_next = NetlinkError("dump links: boom")
    finder = bed.finder("eth1")
    assert await asyncio.wait_for(finder.wait(), 5) == "eth1"  # the next look succeeds


def test_node_facts_of_a_node_object() -> None:
    obj: Obj = {
        "metadata": {"annotations": {ANNOTATION_LINK: "bond0", "other": "x"}},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "192.0.2.2"},
                {"type": "ExternalIP", "address": "198.51.100.9"},
                {"type": "InternalIP", "address": "not-an-ip"},
                "junk",
                {"type": "InternalIP", "address": "2001:db8::2"},
            ]
        },
    }
    facts = node_facts_of(obj)
    assert facts.annotation == "bond0"
    assert [str(ip) for ip in facts.internal_ips] == ["192.0.2.2", "2001:db8::2"]
    assert node_facts_of({}) == NodeFacts()


async def test_a_missing_node_has_no_facts(bed: Bed) -> None:
    assert await read_node_facts(bed.api, "nobody") == NodeFacts()


async def test_stop_ends_the_wait() -> None:
    stop = asyncio.Event()

    async def forever() -> str:
        await asyncio.Event().wait()
        return "never"

    waiting = asyncio.create_task(_until_stopped(forever(), stop))
    await asyncio.sleep(0.01)
    stop.set()
    assert await asyncio.wait_for(waiting, 2) is None


def test_the_chosen_link_goes_into_the_node_settings() -> None:
    settings = ControllerSettings(node_name=NODE, liveness_key_file="/dev/null")
    assert settings.iface == "auto"
    assert node_settings(settings, "ens5").link == "ens5"
    assert node_settings(settings).link == "auto"  # the sandbox passes its own --iface


@pytest.mark.parametrize("host_ip", ["192.0.2.2", "2001:db8::2", ""])
def test_host_ip_must_be_an_ip(host_ip: str) -> None:
    ControllerSettings(host_ip=host_ip, liveness_key_file="/dev/null").check()


def test_a_bad_host_ip_is_refused() -> None:
    with pytest.raises(ValueError, match="--host-ip"):
        ControllerSettings(host_ip="eth0", liveness_key_file="/dev/null").check()
