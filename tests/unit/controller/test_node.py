"""The node controller against the API emulator, with in-memory links on a simulated segment.

Each test tells one story: a claim placed here ends up on the link and Bound, a restart keeps
what is there, a partition fences, a conflicting holder is not fought.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import structlog

from eipctl.controller.claim_cache import ClaimCache
from eipctl.controller.node import NodeController, NodeSettings
from eipctl.controller.settings import AddressSettings, ApiSettings, FencingSettings
from eipctl.core.liveness_wire import Flag, Keyring
from eipctl.core.naming import LABEL_NODE, claim_name_for
from eipctl.core.peer_keys import PeerIdentity
from eipctl.kube.client import EVENTS, IPCLAIMS, IPNODES, NODES, KubeApi, Obj
from eipctl.metrics import REGISTRY
from eipctl.net.frames import mac_to_str
from eipctl.net.liveness import LivenessProber
from eipctl.net.memory import MemoryLinkBackend, Segment
from kubemu import ApiServer
from polling import eventually

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
NODE = "node-a"
FAST = NodeSettings(
    node=NODE,
    link="eth0",
    api=ApiSettings(heartbeat_interval=0.05),
    fencing=FencingSettings(fence_timeout=0.4),
    addresses=AddressSettings(lifetime=2.0, resync_interval=0.5),
)


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


class Bed:
    """One emulator, one segment, and controllers started on demand."""

    def __init__(self, srv: ApiServer, api: KubeApi) -> None:
        self.srv = srv
        self.api = api
        self.segment = Segment()
        self.backend = MemoryLinkBackend()
        self.backend.create_link("eth0", segment=self.segment)
        self.announced: list[tuple[str, str]] = []
        self.probed: list[tuple[str, str]] = []
        self._runs: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def announcer(
        self, link: str, address: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        self.announced.append((link, str(address)))
        return await self.backend.announce(
            link, address, count=1, still_ours=still_ours, on_round=on_round
        )

    async def prober(self, link: str, address: Any, /) -> Any:
        self.probed.append((link, str(address)))
        return await self.backend.probe(link, address)

    def start(self, settings: NodeSettings = FAST, **kw: Any) -> NodeController:
        controller = NodeController(
            settings,
            api=self.api,
            heartbeat_api=self.api,
            backend=kw.pop("backend", self.backend),
            announcer=self.announcer,
            prober=self.prober,
            **kw,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        self._runs.append((stop, task))
        return controller

    async def stop(self, controller: NodeController | None = None) -> None:
        for stop, task in self._runs:
            stop.set()
            await asyncio.wait_for(task, 10)
        self._runs.clear()

    async def claim(self, address: str, node: str = NODE, **spec: Any) -> Obj:
        body: Obj = {
            "metadata": {"name": claim_name_for(address), "labels": {LABEL_NODE: node}},
            "spec": {"ip": address, "nodeName": node, **spec},
        }
        return await self.api.create(IPCLAIMS, body)

    async def move(self, address: str, node: str) -> None:
        patch = {"metadata": {"labels": {LABEL_NODE: node}}, "spec": {"nodeName": node}}
        await self.api.patch(IPCLAIMS, claim_name_for(address), patch)

    async def set_status(self, address: str, status: Obj) -> None:
        await self.api.patch(IPCLAIMS, claim_name_for(address), {"status": status}, status=True)

    async def claim_status(self, address: str) -> Obj:
        return (await self.api.get(IPCLAIMS, claim_name_for(address))).get("status") or {}

    def on_link(self, address: str, link: str = "eth0") -> bool:
        return self.backend.has_address(link, ip(address))

    async def managed(self, link: str = "eth0") -> set[str]:
        return {f"{a.ip}/{a.prefixlen}" for a in await self.backend.list_managed(link)}


async def events_about(bed: Bed, reason: str) -> list[Obj]:
    """The Events with this reason (cluster-scoped objects: namespace default)."""
    return [e for e in (await bed.api.list(EVENTS, "default")).items if e["reason"] == reason]


REMOVES = "eipctl_controller_address_changes_total"


def bound_count() -> float:
    return REGISTRY.get_sample_value("eipctl_time_to_bound_seconds_count") or 0.0


@pytest_asyncio.fixture
async def bed(apiserver: ApiServer, api_client: Any) -> AsyncIterator[Bed]:
    async with node_bed(apiserver, api_client) as b:
        yield b


@contextlib.asynccontextmanager
async def node_bed(apiserver: ApiServer, api_client: Any) -> AsyncIterator[Bed]:
    """The bed of these tests (test_node_bgp's too): CRDs loaded, faults and controllers
    cleared at the end."""
    await apiserver.load_crds_from_dir(CRDS)
    b = Bed(apiserver, KubeApi(api_client))
    try:
        yield b
    finally:
        apiserver.faults.reset()
        with contextlib.suppress(Exception):
            await b.stop()


async def test_registers_ipnode_with_node_labels_and_heartbeats(bed: Bed) -> None:
    await bed.api.create(NODES, {"metadata": {"name": NODE, "labels": {"zone": "a"}}})
    controller = bed.start()
    await eventually(controller.ready)
    ipnode = await bed.api.get(IPNODES, NODE)
    assert ipnode["spec"]["link"] == "eth0"
    assert ipnode["metadata"]["labels"] == {"zone": "a"}
    first = (await bed.api.get(IPNODES, NODE))["status"]["heartbeat"]
    await asyncio.sleep(0.3)
    later = (await bed.api.get(IPNODES, NODE))["status"]["heartbeat"]
    assert later >= first + 2


async def test_registers_without_a_node(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    ipnode = await bed.api.get(IPNODES, NODE)
    assert ipnode["spec"]["link"] == "eth0"


async def test_claim_is_added_announced_bound_and_removed_when_moved(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    bound_before = bound_count()
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    assert ("eth0", "203.0.113.7") in bed.probed
    # time to bound: one observation, when the address is added and Bound requested
    await eventually(lambda: bound_count() == bound_before + 1, what="time to bound observed")
    await eventually(lambda: ("eth0", "203.0.113.7") in bed.announced)

    async def bound() -> bool:
        s = await bed.claim_status("203.0.113.7")
        return s.get("phase") == "Bound" and s.get("boundNode") == NODE

    await eventually(bound)

    async def reported() -> bool:
        st = (await bed.api.get(IPNODES, NODE)).get("status") or {}
        return st.get("addresses") == ["203.0.113.7/32"]

    await eventually(reported)
    await bed.move("203.0.113.7", "node-b")
    await eventually(lambda: controller.claims.get(claim_name_for("203.0.113.7")) is None)
    seen_move = controller.passes
    await eventually(lambda: controller.passes >= seen_move + 2)  # passes that knew of the move
    assert bed.on_link("203.0.113.7")  # make before break: until node-b has it
    removes = REGISTRY.get_sample_value(REMOVES, {"action": "remove"}) or 0.0
    await bed.set_status("203.0.113.7", {"phase": "Bound", "boundNode": "node-b"})
    await eventually(lambda: not bed.on_link("203.0.113.7"), what="removed once node-b bound")
    # removed by a pass that saw node-b's binding, not left to expire with its 2 s lifetime
    # (which a real-clock bound under that lifetime told apart before)
    assert REGISTRY.get_sample_value(REMOVES, {"action": "remove"}) == removes + 1


async def test_a_moved_address_is_not_held_past_one_lifetime(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    loop = asyncio.get_running_loop()
    await bed.move("203.0.113.7", "node-b")  # node-b never binds it
    moved = loop.time()
    await eventually(lambda: not bed.on_link("203.0.113.7"), timeout=FAST.addresses.lifetime + 2)
    assert loop.time() - moved >= FAST.addresses.lifetime * 0.9


async def test_ipv6_claim_with_prefix_length(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("2001:db8::7", prefixLength=64)
    await eventually(lambda: bed.on_link("2001:db8::7"))
    assert await bed.managed() == {"2001:db8::7/64"}


async def test_restart_keeps_addresses_without_probe_and_announces_them_once(bed: Bed) -> None:
    """A restarted controller keeps the addresses it finds (no probe, no remove-then-add)
    and announces each once: while it was down the IP may have been on another node that
    announced it (the soak caught clients stuck with that node's MAC)."""
    await bed.backend.add("eth0", "203.0.113.7", 32, 30)  # left by the previous process
    await bed.backend.add("eth0", "203.0.113.8", 32, 30)  # its claim moved away meanwhile
    await bed.claim("203.0.113.7")
    await bed.set_status("203.0.113.7", {"phase": "Bound", "boundNode": NODE})
    await bed.claim("203.0.113.8", node="node-b")
    await bed.set_status("203.0.113.8", {"phase": "Bound", "boundNode": "node-b"})
    removals: list[str] = []
    original = bed.backend.remove

    async def spy(link: str, address: Any, prefixlen: int) -> bool:
        removals.append(str(address))
        return await original(link, address, prefixlen)

    bed.backend.remove = spy  # type: ignore[method-assign, assignment]
    bound_before = bound_count()
    controller = bed.start()
    await eventually(lambda: not bed.on_link("203.0.113.8"))
    await eventually(lambda: controller.passes >= 3)
    assert bed.on_link("203.0.113.7")
    assert bound_count() == bound_before  # already there: no time-to-bound observation
    assert removals == ["203.0.113.8"]  # never remove-then-add the kept one
    assert bed.probed == []
    await eventually(lambda: bed.announced == [("eth0", "203.0.113.7")])
    await eventually(lambda: controller.passes >= 5)
    assert bed.announced == [("eth0", "203.0.113.7")]  # once, not on every renewal
    # its lifetime is renewed to --address-lifetime, not left to the old 30 s
    (kept,) = await bed.backend.list_managed("eth0")
    assert kept.valid_lft is not None and kept.valid_lft <= FAST.addresses.lifetime


async def test_purge_never_touches_admin_addresses(bed: Bed) -> None:
    bed.backend.add_foreign("eth0", "192.0.2.10", 24)
    await bed.backend.add("eth0", "203.0.113.9", 32, 30)
    controller = bed.start()
    await eventually(controller.ready)
    await eventually(lambda: not bed.on_link("203.0.113.9"))
    assert bed.on_link("192.0.2.10")


async def test_claim_for_an_admin_address_is_a_conflict(bed: Bed) -> None:
    bed.backend.add_foreign("eth0", "203.0.113.7", 32)
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")

    async def conflict() -> bool:
        conds = (await bed.claim_status("203.0.113.7")).get("conditions") or []
        return any(c["type"] == "Conflict" and c["reason"] == "AdminAddress" for c in conds)

    await eventually(conflict)
    assert bed.on_link("203.0.113.7")  # still the admin's
    assert await bed.managed() == set()


async def test_drift_is_repaired(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    assert await events_about(bed, "AddressRestored") == []
    await bed.backend.remove("eth0", "203.0.113.7", 32)  # deleted by hand
    await bed.backend.add("eth0", "203.0.113.99", 32, 30)  # a stray managed address
    await eventually(lambda: bed.on_link("203.0.113.7") and not bed.on_link("203.0.113.99"))
    restored = await eventually(lambda: events_about(bed, "AddressRestored"))
    assert restored[0]["type"] == "Normal"
    assert restored[0]["involvedObject"]["kind"] == "IpClaim"
    assert restored[0]["involvedObject"]["name"] == claim_name_for("203.0.113.7")


async def test_unknown_holder_is_not_fought_until_it_lets_go(bed: Bed) -> None:
    other = MemoryLinkBackend()
    other.create_link("eth0", segment=bed.segment)
    await other.add("eth0", "203.0.113.7", 32, 60)  # someone else answers for it
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")

    async def condition(status: str) -> bool:
        conds = (await bed.claim_status("203.0.113.7")).get("conditions") or []
        return any(c["type"] == "Conflict" and c["status"] == status for c in conds)

    await eventually(lambda: condition("True"))
    assert not bed.on_link("203.0.113.7")
    events = (await bed.api.list(EVENTS, "default")).items
    assert any(e["reason"] == "AddressInUse" for e in events)
    await other.remove("eth0", "203.0.113.7", 32)
    await eventually(lambda: bed.on_link("203.0.113.7"))
    await eventually(lambda: condition("False"))


def live(value: str) -> Obj:
    """An IpNode status patch: the scheduler's verdict on that node."""
    condition = {
        "type": "Live",
        "status": value,
        "reason": "Replying" if value == "True" else "NoReply",
        "lastTransitionTime": "2026-12-01T10:00:00Z",
    }
    return {"status": {"heartbeat": 41, "conditions": [condition]}}


async def test_a_previous_holder_declared_dead_is_replaced_without_probing(bed: Bed) -> None:
    """The failover path: the scheduler declared node-old dead (Live=False) and moved the
    claim here. Its kernel still answers (a hung node); we add at once, no probe, and our
    announcements repoint the neighbours."""
    old = MemoryLinkBackend()
    old.create_link("eth0", segment=bed.segment)
    await old.add("eth0", "203.0.113.7", 32, 60)
    await bed.api.create(IPNODES, {"metadata": {"name": "node-old"}, "spec": {"link": "eth0"}})
    await bed.api.patch(IPNODES, "node-old", live("False"), status=True)
    controller = bed.start()
    await eventually(controller.ready)
    skipped = REGISTRY.get_sample_value("eipctl_controller_probes_skipped_total") or 0.0
    await bed.claim("203.0.113.7")
    await bed.set_status("203.0.113.7", {"phase": "Bound", "boundNode": "node-old"})
    await eventually(lambda: bed.on_link("203.0.113.7"))
    ours = bed.backend.mac_of("eth0")
    await eventually(
        lambda: bed.segment.announcements[-1:] and ours in bed.segment.announcements[-1]
    )
    assert REGISTRY.get_sample_value("eipctl_controller_probes_skipped_total") == skipped + 1
    assert await events_about(bed, "TakenOver") == []  # nothing was seen answering: no probe


async def test_live_previous_holder_is_waited_for(bed: Bed) -> None:
    old = MemoryLinkBackend()
    old.create_link("eth0", segment=bed.segment)
    await old.add("eth0", "203.0.113.7", 32, 60)
    await bed.api.create(IPNODES, {"metadata": {"name": "node-old"}, "spec": {"link": "eth0"}})
    await bed.api.patch(IPNODES, "node-old", live("True"), status=True)
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await bed.set_status("203.0.113.7", {"phase": "Bound", "boundNode": "node-old"})
    await asyncio.sleep(1.5)  # probes, each answered: a few conflict retries
    assert not bed.on_link("203.0.113.7")
    await bed.api.patch(IPNODES, "node-old", live("False"), status=True)
    await eventually(lambda: bed.on_link("203.0.113.7"), timeout=5)  # once declared dead


async def test_an_eipctl_node_still_answering_is_taken_over_at_once(bed: Bed) -> None:
    """The scheduler moved the claim here while the old holder's kernel still answers (its
    controller restarting, hung, or not yet aware of the move). Its MAC is on its IpNode, so
    the answer is known to be eipctl's: add at once, no waiting for its heartbeat to stop."""
    old = MemoryLinkBackend()
    old.create_link("eth0", segment=bed.segment)
    await old.add("eth0", "203.0.113.7", 32, 60)
    old_mac = mac_to_str(old.mac_of("eth0"))
    await bed.api.create(IPNODES, {"metadata": {"name": "node-old"}, "spec": {"link": "eth0"}})
    await bed.api.patch(
        IPNODES, "node-old", {"status": {"heartbeat": 1, "macs": [old_mac]}}, status=True
    )
    controller = bed.start()
    await eventually(controller.ready)
    takeovers = REGISTRY.get_sample_value("eipctl_controller_takeovers_total") or 0.0
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    # by the take-over rule, on the first probe's answer: not a wait that outlasted node-old
    # (its copy lives 60 s: eventually's 10 s would fail first), nor a real-clock bound
    assert REGISTRY.get_sample_value("eipctl_controller_takeovers_total") == takeovers + 1
    assert bed.segment.announcements[-1][1] == bed.backend.mac_of("eth0")
    own_mac = mac_to_str(bed.backend.mac_of("eth0"))

    async def published() -> bool:
        status = (await bed.api.get(IPNODES, NODE)).get("status") or {}
        return own_mac in (status.get("macs") or [])

    await eventually(published)


async def test_fences_when_the_api_is_unreachable_and_restores(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    bed.srv.faults.pause(FAST.fencing.fence_timeout * 4)
    # fenced within the pause (1.6 s; it needs at most fence_timeout + probe_silence, 0.8 s:
    # the deadline, then one check's timeout), as it can only be while the API is silent;
    # when exactly is test_reachability.py's virtual-clock test (this bed has real sockets)
    await eventually(lambda: not bed.on_link("203.0.113.7"), what="fenced during the pause")
    assert controller.fence.fenced
    await eventually(lambda: bed.on_link("203.0.113.7"), timeout=10)
    assert not controller.fence.fenced
    for reason, type_ in (("Fenced", "Warning"), ("Restored", "Normal")):
        (event,) = await eventually(lambda r=reason: events_about(bed, r), what=reason)
        assert event["type"] == type_
        assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == (
            "IpNode",
            NODE,
        )
    assert await events_about(bed, "AddressRestored") == []  # fencing removed it: not drift


async def test_fenced_from_start_when_the_api_never_answers(bed: Bed) -> None:
    await bed.backend.add("eth0", "203.0.113.7", 32, 30)
    bed.srv.faults.pause(3)
    controller = bed.start()
    # within the pause, as it can only be (the fence's timing: test_reachability.py, virtual)
    await eventually(lambda: not bed.on_link("203.0.113.7"), timeout=3, what="fenced")
    assert controller.fence.fenced


@pytest.mark.parametrize("cleanup", [False, True])
async def test_shutdown_keeps_addresses_unless_cleanup_on_exit(bed: Bed, cleanup: bool) -> None:
    from dataclasses import replace

    controller = bed.start(
        replace(FAST, addresses=replace(FAST.addresses, cleanup_on_exit=cleanup))
    )
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    await bed.stop()
    assert bed.on_link("203.0.113.7") is not cleanup


async def test_clean_stop_bridges_a_restart_with_a_grace(bed: Bed) -> None:
    """SIGTERM without cleanup: the addresses outlive the process by the grace, and the
    IpNode tells the scheduler to wait that long; the next process's heartbeat clears it."""
    from dataclasses import replace

    controller = bed.start(replace(FAST, api=replace(FAST.api, restart_grace=30.0)))
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    await bed.stop()
    (kept,) = await bed.backend.list_managed("eth0")
    assert kept.valid_lft is not None and kept.valid_lft > FAST.addresses.lifetime + 20
    status = (await bed.api.get(IPNODES, NODE)).get("status") or {}
    assert status["restartGraceSeconds"] == 30.0
    controller = bed.start()
    await eventually(controller.ready)

    async def grace_cleared() -> bool:
        status = (await bed.api.get(IPNODES, NODE)).get("status") or {}
        return "restartGraceSeconds" not in status

    await eventually(grace_cleared)
    assert bed.on_link("203.0.113.7")


@pytest.mark.parametrize(
    ("spec", "labels"),
    [
        ({"unschedulable": True}, {}),  # kubectl drain cordons first
        ({}, {"node.kubernetes.io/exclude-from-external-load-balancers": ""}),
    ],
)
async def test_a_stop_on_a_node_being_drained_hands_over_instead_of_a_grace(
    bed: Bed, spec: Obj, labels: dict[str, str]
) -> None:
    """SIGTERM on a drained or excluded node is no restart: no grace is announced (the
    scheduler moves the IPs as soon as our replies stop), and the addresses get one fresh
    lifetime, not the grace, so they answer until the new holders take over."""
    from dataclasses import replace

    await bed.api.create(NODES, {"metadata": {"name": NODE, "labels": labels}, "spec": spec})
    controller = bed.start(replace(FAST, api=replace(FAST.api, restart_grace=30.0)))
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    with structlog.testing.capture_logs() as logs:
        await bed.stop()
    (kept,) = await bed.backend.list_managed("eth0")
    assert kept.valid_lft is not None and kept.valid_lft <= FAST.addresses.lifetime + 1
    status = (await bed.api.get(IPNODES, NODE)).get("status") or {}
    assert "restartGraceSeconds" not in status
    (line,) = [e for e in logs if e["event"] == "shutdown.handing_over"]
    assert line["reason"] in ("NodeCordoned", "NodeExcluded") and line["addresses"] == 1


async def test_claim_on_a_missing_link_waits_for_the_link(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7", link="eth1")
    await asyncio.sleep(0.3)
    assert not bed.on_link("203.0.113.7")
    bed.backend.create_link("eth1", segment=bed.segment)
    await eventually(lambda: bed.on_link("203.0.113.7", "eth1"))


async def test_after_a_partition_only_claims_still_placed_here_come_back(bed: Bed) -> None:
    controller = bed.start()
    await eventually(controller.ready)
    await bed.claim("203.0.113.7")
    await bed.claim("203.0.113.8")
    await eventually(lambda: bed.on_link("203.0.113.7") and bed.on_link("203.0.113.8"))
    pause = bed.srv.faults.pause(1.5)
    bed.srv.faults.drop_watches()
    await eventually(lambda: controller.fence.fenced)
    # while this node is cut off, the scheduler moves one claim away
    moved = {"metadata": {"labels": {LABEL_NODE: "node-b"}}, "spec": {"nodeName": "node-b"}}
    bed.srv.store.patch("eipctl.io", "ipclaims", claim_name_for("203.0.113.8"), moved)
    await pause
    await eventually(lambda: bed.on_link("203.0.113.7"), timeout=10)
    for _ in range(50):  # and the moved one never returns
        assert not bed.on_link("203.0.113.8")
        await asyncio.sleep(0.02)


async def test_node_label_changes_reach_the_ipnode_at_resync(bed: Bed) -> None:
    await bed.api.create(NODES, {"metadata": {"name": NODE, "labels": {"zone": "a"}}})
    controller = bed.start()
    await eventually(controller.ready)
    await bed.api.patch(NODES, NODE, {"metadata": {"labels": {"zone": "b"}}})

    async def relabelled() -> bool:
        ipnode = await bed.api.get(IPNODES, NODE)
        return bool(ipnode["metadata"].get("labels") == {"zone": "b"})

    await eventually(relabelled, timeout=FAST.addresses.resync_interval * 4)


KEYRING = Keyring([b"a test key of 32 bytes, no more."])


async def test_the_controller_answers_liveness_probes_at_the_endpoint_it_publishes(
    bed: Bed,
) -> None:
    """Its IpNode names where it answers; a prober with the key hears it there. While the
    API hangs it says API_STALE and keeps holding (no writer runs and it is the only node:
    nothing can move), and it says nothing once it stopped."""
    settings = replace(FAST, liveness=replace(FAST.liveness, address="127.0.0.1", port=0))
    controller = bed.start(settings, keyring=KEYRING)
    await eventually(controller.ready)
    spec = (await bed.api.get(IPNODES, NODE))["spec"]
    assert spec["livenessAddress"] == "127.0.0.1"
    port = spec["livenessPort"]
    assert isinstance(port, int) and port > 0
    heard: list[Flag] = []
    prober = LivenessProber(
        KEYRING, interval=0.05, on_reply=lambda node, flags: heard.append(flags)
    )
    prober.set_targets({NODE: ("127.0.0.1", port)})
    probing = asyncio.create_task(prober.run())
    try:
        await eventually(lambda: Flag.EXTENDED in heard or None)
        bed.srv.faults.pause(FAST.fencing.fence_timeout * 4)  # the API hangs: alone, the node holds
        await eventually(lambda: heard[-1] == Flag.API_STALE | Flag.EXTENDED or None)
        assert not any(flags & Flag.FENCED for flags in heard)
        await eventually(lambda: heard[-1] == Flag.EXTENDED or None)  # the API is back
        await bed.stop()
        count = len(heard)
        await asyncio.sleep(0.3)
        assert len(heard) <= count + 1  # a reply in flight at most, then silence
    finally:
        probing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probing
        prober.close()


async def test_a_controller_with_a_node_key_publishes_its_peer_key(bed: Bed) -> None:
    """docs/liveness.md "Peer keys": the public half of the key pair its node key gives,
    on its IpNode's spec, the same after a restart (the node key is kept)."""
    settings = replace(FAST, liveness=replace(FAST.liveness, address="127.0.0.1", port=0))
    node_key = b"this node's own key, 32 bytes..."
    controller = bed.start(settings, keyring=KEYRING, node_key=node_key)
    await eventually(controller.ready)
    spec = (await bed.api.get(IPNODES, NODE))["spec"]
    assert spec["livenessPeerKey"] == PeerIdentity(NODE, node_key).public_text
    assert controller.responder is not None and controller.responder.keyring.speaks_pair_keys


async def test_without_a_node_key_no_peer_key_is_published(bed: Bed) -> None:
    settings = replace(FAST, liveness=replace(FAST.liveness, address="127.0.0.1", port=0))
    controller = bed.start(settings, keyring=KEYRING)
    await eventually(controller.ready)
    assert "livenessPeerKey" not in (await bed.api.get(IPNODES, NODE))["spec"]
    assert controller.responder is not None
    assert not controller.responder.keyring.speaks_pair_keys


async def test_without_a_liveness_address_the_links_own_address_is_used(bed: Bed) -> None:
    """Not eipctl's, not a host route: the node's address on the node network."""
    bed.backend.add_foreign("eth0", "127.0.0.1", 8)  # the node's own address
    bed.backend.add_foreign("eth0", "127.0.0.2", 32)  # an administrator's host route
    controller = bed.start(replace(FAST, liveness=replace(FAST.liveness, port=0)), keyring=KEYRING)
    await eventually(controller.ready)
    assert (await bed.api.get(IPNODES, NODE))["spec"]["livenessAddress"] == "127.0.0.1"


async def test_a_claims_refresh_holds_passes_from_the_call_on(bed: Bed) -> None:
    """After a restore the claims are relisted; a pass woken by the same restore must see
    "not synced" at once, not only once the refresh task first runs (a thawed node acting
    on its old cache re-added and announced addresses that had moved away)."""
    cache = ClaimCache(bed.api, NODE, lambda: None)
    cache.start()
    try:
        await eventually(lambda: cache.has_synced)
        first = cache.start_refresh()
        assert not cache.has_synced
        second = cache.start_refresh()  # a second restore: the first is cancelled
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        assert not cache.has_synced  # the cancelled one does not clear the second's hold
        await second
        assert cache.has_synced
    finally:
        await cache.stop()
