"""deploy/rbac/ and deploy/policy/ are enough for eipctl, and no more than it needs.

The emulator runs in RBAC mode with admission: every request must carry a token, is
authorized against the Roles and bindings of deploy/ as Kubernetes would, and the
controllers' writes go through the own-node ValidatingAdmissionPolicy. Then the real
allocator, scheduler and two node controllers run, each with a token of its own
ServiceAccount (the controllers' tokens carry their node's name, as bound tokens do), through
a whole story: allocate, place, bind, a hand-set external IP, a node dying and its claim
moving, a release. The emulator must have refused nothing. The controllers run as the
process runs them, with the BGP link (so they watch the pools); another test adds
--frr-config: a node renders FRR's configuration from a BGPPeer whose password is in a
Secret and reports the reloader's answer as its IpNode's BGPConfigured condition (a status
update, judged by the own-node policy). A last test shows what each account is refused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import celpy  # noqa: F401  # the emulator checks CEL rules with it: the test extra ships it, no skip
import pytest
import pytest_asyncio
import yaml

from eipctl.allocator.process import run as run_allocator
from eipctl.controller.bgp import CONDITION as BGP_CONFIGURED
from eipctl.controller.bgp import mark_configured, sha256_of
from eipctl.controller.node import NodeController, NodeSettings
from eipctl.controller.settings import (
    AddressSettings,
    AnnounceSettings,
    ApiSettings,
    FencingSettings,
)
from eipctl.core.naming import (
    LABEL_AUTO_ASSIGN,
    LABEL_EXTERNAL_IP,
    LABEL_NODE,
    LABEL_POOL,
    claim_name_for,
)
from eipctl.core.node_keys import node_key_of, node_key_secret
from eipctl.kube.client import (
    BGPPEERS,
    EVENTS,
    IPCLAIMPOOLS,
    IPCLAIMS,
    IPNODES,
    LEASES,
    NODES,
    SECRETS,
    SERVICES,
    KubeApi,
    Obj,
    connect,
)
from eipctl.kube.errors import Forbidden, Invalid, NotFound
from eipctl.kube.events import EventRecorder
from eipctl.net.memory import MemoryLinkBackend, Segment
from eipctl.nodeips.process import run as run_nodeips
from eipctl.nodeips.settings import NodeIpsSettings
from eipctl.runtime.config import AllocatorSettings, ControllerSettings, SchedulerSettings
from eipctl.runtime.health import Health
from eipctl.runtime.values import parse_bind_address
from eipctl.scheduler.liveness_secret import LivenessSecret
from eipctl.scheduler.process import run as run_scheduler
from kubemu import ApiServer

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NS = "eipctl-system"
NODES_ = ("node-a", "node-b")
STORAGE = {
    "Namespace": ("", "namespaces"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
    "ServiceAccount": ("", "serviceaccounts"),
    "ConfigMap": ("", "configmaps"),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "Deployment": ("apps", "deployments"),
    "DaemonSet": ("apps", "daemonsets"),
    "Service": ("", "services"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "ValidatingAdmissionPolicy": ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    "ValidatingAdmissionPolicyBinding": (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
}
OFF = parse_bind_address("0")
# test timings: the controllers' fence-timeout stays <= the scheduler's liveness-timeout (docs/controller.md)
CONTROLLER = NodeSettings(
    node="",  # each `Node` its own
    link="eth0",
    # restart_grace: a clean stop writes status.restartGraceSeconds: judged too
    api=ApiSettings(heartbeat_interval=0.05, restart_grace=0.3),
    fencing=FencingSettings(fence_timeout=0.4),
    addresses=AddressSettings(lifetime=2.0, resync_interval=0.5),
)
SCHEDULER_LIVENESS_TIMEOUT = 0.6
# the process's default --bgp-link: every controller watches the pools (how each announces)
BGP_LINK = ControllerSettings.bgp_link  # the field's default
BGP_SECRETS = ControllerSettings.bgp_secret_namespace  # the field's default: eipctl-bgp
NODE_KEYS = ControllerSettings.node_key_namespace  # the field's default: eipctl-node-keys
KEY_A = bytes(range(32))
KEY_B = bytes(range(32, 64))


def install(srv: ApiServer) -> None:
    """What deploy/ and the nodeips add-on list, in their order, as the cluster admin would."""
    for root in (DEPLOY, DEPLOY / "workloads" / "nodeips"):
        kustomization = yaml.safe_load((root / "kustomization.yaml").read_text())
        for resource in kustomization["resources"]:
            for doc in yaml.safe_load_all((root / resource).read_text()):
                if doc:
                    group, plural = STORAGE[doc["kind"]]
                    srv.store.create(group, plural, doc, doc["metadata"].get("namespace", ""))


async def eventually(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 20.0) -> Any:
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = await check()
                if value:
                    return value
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"not within {timeout}s: {what}") from None


async def find(api: KubeApi, ref: Any, name: str, namespace: str | None = None) -> Obj | None:
    try:
        return await api.get(ref, name, namespace)
    except NotFound:
        return None


class Cluster:
    """The emulator in RBAC + admission mode with deploy/ installed, and clients per account."""

    def __init__(self, srv: ApiServer, tmp_path: Path) -> None:
        self.srv = srv
        self.tmp_path = tmp_path
        self.clients: list[KubeApi] = []
        self.admin: KubeApi | None = None

    @property
    def rbac(self) -> Any:
        assert self.srv.rbac is not None
        return self.srv.rbac

    def kubeconfig(self, account: str, node: str = "") -> Path:
        token = self.rbac.service_account_token(NS, account, node=node)
        tag = f"{account}-{node}" if node else account
        return self.srv.write_kubeconfig(self.tmp_path / f"kubeconfig-{tag}", token=token)

    async def client(self, account: str, node: str = "") -> KubeApi:
        api = await connect(str(self.kubeconfig(account, node)))
        self.clients.append(api)
        return api

    async def close(self) -> None:
        for api in self.clients:
            await api.close()


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    srv = ApiServer(history_window=5000, bookmark_interval=0.5, rbac=True, admission=True)
    await srv.start()
    c = Cluster(srv, tmp_path)
    try:
        install(srv)
        for node in NODES_:
            srv.store.create("", "nodes", {"metadata": {"name": node, "labels": {"zone": "z1"}}})
        c.admin = await connect(str(srv.write_kubeconfig(tmp_path / "kubeconfig-admin")))
        c.clients.append(c.admin)
        yield c
    finally:
        await c.close()
        await srv.stop()


@contextlib.asynccontextmanager
async def running(main: Awaitable[None], stop: asyncio.Event) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.ensure_future(main)
    try:
        yield task
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task


class Node:
    """One node's controller on its own in-memory link, all links on one segment."""

    def __init__(self, name: str, api: KubeApi, segment: Segment, frr_config: str = "") -> None:
        self.name = name
        self.backend = MemoryLinkBackend()
        self.backend.create_link("eth0", segment=segment)
        self.controller = NodeController(
            replace(
                CONTROLLER,
                node=name,
                announcing=AnnounceSettings(
                    bgp_link=BGP_LINK, frr_config=frr_config, bgp_secret_namespace=BGP_SECRETS
                ),
            ),
            api=api,
            heartbeat_api=api,
            backend=self.backend,
            announcer=self._announce,
            prober=self._probe,
        )
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def _announce(
        self, link: str, address: Any, /, *, still_ours: Any = None, on_round: Any = None
    ) -> int:
        return await self.backend.announce(
            link, address, count=1, still_ours=still_ours, on_round=on_round
        )

    async def _probe(self, link: str, address: Any, /) -> Any:
        return await self.backend.probe(link, address)

    def start(self) -> None:
        self.task = asyncio.create_task(self.controller.run(self.stop))

    async def halt(self) -> None:
        self.stop.set()
        if self.task is not None:
            async with asyncio.timeout(10):
                await self.task
            self.task = None


async def claim_phase(api: KubeApi, name: str) -> tuple[str, str] | None:
    claim = await find(api, IPCLAIMS, name)
    if claim is None:
        return None
    status = claim.get("status") or {}
    return str(status.get("phase", "")), str(status.get("boundNode", ""))


async def test_each_process_does_its_whole_job_with_its_own_service_account(
    cluster: Cluster,
) -> None:
    admin = cluster.admin
    assert admin is not None
    stop_alloc, stop_sched, stop_nodeips = asyncio.Event(), asyncio.Event(), asyncio.Event()
    health = {"allocator": Health(), "scheduler": Health(), "nodeips": Health()}
    for h in health.values():
        await h.start(OFF, OFF)  # the event-loop watchdog only: no ports
    allocator = run_allocator(
        AllocatorSettings(
            kubeconfig=str(cluster.kubeconfig("eipctl-allocator")),
            identity="allocator-0",
            lease_namespace=NS,
            metrics_bind_address=OFF,
            health_probe_bind_address=OFF,
        ),
        health=health["allocator"],
        stop=stop_alloc,
    )
    scheduler = run_scheduler(
        SchedulerSettings(
            kubeconfig=str(cluster.kubeconfig("eipctl-scheduler")),
            identity="scheduler-0",
            lease_namespace=NS,
            liveness_timeout=SCHEDULER_LIVENESS_TIMEOUT,
            orphan_grace_period=0.5,
            metrics_bind_address=OFF,
            health_probe_bind_address=OFF,
        ),
        health=health["scheduler"],
        stop=stop_sched,
    )
    nodeips = run_nodeips(
        NodeIpsSettings(
            kubeconfig=str(cluster.kubeconfig("eipctl-nodeips")),
            identity="nodeips-0",
            lease_namespace=NS,
            default_node_pool="pool-n",
            metrics_bind_address=OFF,
            health_probe_bind_address=OFF,
        ),
        health=health["nodeips"],
        stop=stop_nodeips,
    )
    segment = Segment()
    nodes = {n: Node(n, await cluster.client("eipctl-controller", node=n), segment) for n in NODES_}
    for node in nodes.values():
        node.start()
    try:
        async with (
            running(allocator, stop_alloc),
            running(scheduler, stop_sched),
            running(nodeips, stop_nodeips),
        ):
            await admin.create(
                IPCLAIMPOOLS,
                {
                    "metadata": {"name": "pool-a"},
                    "spec": {"cidr": "203.0.113.0/28", "autoAssign": True, "allowManual": True},
                },
            )
            # node IPs (nodeips): node-a asks for one from pool-n
            await admin.create(
                IPCLAIMPOOLS,
                {"metadata": {"name": "pool-n"}, "spec": {"cidr": "198.51.100.0/28"}},
            )
            node_a = await admin.get(NODES, "node-a")
            node_a["metadata"]["labels"][LABEL_AUTO_ASSIGN] = "true"
            await admin.replace(NODES, node_a)
            await admin.create(
                SERVICES,
                {
                    "metadata": {"name": "web", "annotations": {"external-ip": "auto"}},
                    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
                },
                "default",
            )
            await admin.create(
                SERVICES,
                {
                    "metadata": {"name": "manual"},
                    "spec": {"ports": [{"port": 80}], "externalIPs": ["203.0.113.9"]},
                },
                "default",
            )

            async def web_ip() -> str | None:
                svc = await admin.get(SERVICES, "web", "default")
                annotations = (svc.get("metadata") or {}).get("annotations") or {}
                ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
                recorded = annotations.get("eipctl.io/allocated-ips")
                return str(ingress[0]["ip"]) if recorded and ingress else None

            ip = await eventually(web_ip, "the allocator gives web an IP (spec and status)")
            web_claim = claim_name_for(ip)
            manual_claim = claim_name_for("203.0.113.9")

            async def bound(name: str) -> str | None:
                got = await claim_phase(admin, name)
                return got[1] if got and got[0] == "Bound" else None

            holder = await eventually(lambda: bound(web_claim), "web's claim Bound")
            await eventually(lambda: bound(manual_claim), "the hand-set IP's claim Bound")

            async def pool_ready() -> bool:
                pool = await admin.get(IPCLAIMPOOLS, "pool-a")
                return any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (pool.get("status") or {}).get("conditions") or []
                )

            await eventually(pool_ready, "the allocator writes pool status")

            async def node_ip() -> str | None:
                labels = (await admin.get(NODES, "node-a"))["metadata"].get("labels") or {}
                return labels.get(LABEL_EXTERNAL_IP)

            node_a_ip = await eventually(node_ip, "nodeips labels node-a with its bound IP")
            assert await bound(claim_name_for(node_a_ip)) == "node-a"
            for name in NODES_:
                # the Node's labels (node-a's auto-assign one too, at the next refresh)
                await eventually(
                    functools.partial(_labels_copied, admin, name),
                    f"{name}'s IpNode has its Node's labels",
                )
                ipnode = await admin.get(IPNODES, name)
                assert ipnode["metadata"]["labels"]["zone"] == "z1"
                assert int((ipnode.get("status") or {}).get("heartbeat") or 0) > 0

            # the probes pass, and check what docs/operations.md says each registers
            for process, h in health.items():
                assert h.failing("live") == [] and h.failing("ready") == []
                registered = (sorted(h._live), sorted(h._ready))  # no public listing
                assert registered == documented_checks(process)
            assert all(n.controller.live() and n.controller.ready() for n in nodes.values())
            # the process's default: each controller lists and watches the pools
            assert all(
                n.controller.pools is not None and n.controller.pools.has_synced
                for n in nodes.values()
            )

            # the pool stops covering web's IP: the allocator keeps it, marked InPool=False
            pool = await admin.get(IPCLAIMPOOLS, "pool-a")
            pool["spec"]["exclude"] = [ip]
            await admin.replace(IPCLAIMPOOLS, pool)

            async def marked() -> bool:
                claim = await admin.get(IPCLAIMS, web_claim)
                return any(
                    c.get("type") == "InPool" and c.get("status") == "False"
                    for c in (claim.get("status") or {}).get("conditions") or []
                )

            await eventually(marked, "the allocator marks the kept claim out of its pool")

            # the holder dies: the scheduler moves the claim, the other controller takes it
            await nodes[holder].halt()
            other = next(n for n in NODES_ if n != holder)
            await eventually(
                lambda: _equals(bound(web_claim), other), f"web's claim Bound on {other}"
            )

            # the node comes back, and the survivor stops being eligible for the pool: the
            # claim moves between two live nodes (the old holder keeps the address until the
            # new one reports Bound, reading the claim that left its cache)
            nodes[holder] = Node(
                holder, await cluster.client("eipctl-controller", node=holder), segment
            )
            nodes[holder].start()
            await eventually(
                lambda: _is_true(nodes[holder].controller.ready), f"{holder} registered again"
            )
            node_obj = await admin.get(NODES, other)
            node_obj["metadata"]["labels"] = {"zone": "z2"}
            await admin.replace(NODES, node_obj)
            pool = await admin.get(IPCLAIMPOOLS, "pool-a")
            pool["spec"]["nodeSelector"] = {"matchLabels": {"zone": "z1"}}
            await admin.replace(IPCLAIMPOOLS, pool)
            await eventually(
                lambda: _equals(bound(web_claim), holder), f"web's claim back on {holder}"
            )

            # the Services go: the allocator releases its claim, the scheduler the orphan
            await admin.delete(SERVICES, "web", "default")
            await admin.delete(SERVICES, "manual", "default")
            await eventually(
                lambda: _is_none(find(admin, IPCLAIMS, web_claim)), "web's claim released"
            )
            await eventually(
                lambda: _is_none(find(admin, IPCLAIMS, manual_claim)), "the orphan deleted"
            )
            leases = {
                lease["metadata"]["name"]: lease["spec"].get("holderIdentity")
                for lease in (await admin.list(LEASES, NS)).items
            }
            assert leases == {
                "eipctl-allocator": "allocator-0",
                "eipctl-scheduler": "scheduler-0",
                "eipctl-nodeips": "nodeips-0",
            }
    finally:
        for node in nodes.values():
            await node.halt()
        for h in health.values():
            await h.stop()

    events = (await admin.list(EVENTS)).items
    reasons = {(e.get("reportingComponent"), e.get("reason")) for e in events}
    assert ("eipctl-scheduler", "Placed") in reasons  # Events are posted with its token too
    assert ("eipctl-scheduler", "NodeDead") in reasons
    undocumented = {r for _, r in reasons} - documented_event_reasons()
    assert undocumented == set(), f"add to docs/operations.md, Event reasons: {undocumented}"
    assert cluster.rbac.denials == [], [d.message for d in cluster.rbac.denials]
    assert cluster.srv.admission is not None
    assert cluster.srv.admission.denials == []
    assert cluster.srv.admission.applied > 0  # the controllers' writes were judged


def documented_checks(process: str) -> tuple[list[str], list[str]]:
    """(liveness, readiness) check names in docs/operations.md's health table row."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("## Health endpoints", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in section.splitlines() if line.startswith(f"| {process} ")]
    cells = row.split("|")
    names = [sorted(re.findall(r"`([a-z][a-z-]*)`", cell)) for cell in cells[2:4]]
    return names[0], names[1]


def documented_event_reasons() -> set[str]:
    """The reasons in the first column of docs/operations.md's "Event reasons" table."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("### Event reasons", 1)[1].split("\n#", 1)[0]
    return {
        reason
        for line in section.splitlines()
        if line.startswith("| `")
        for reason in re.findall(r"`([A-Za-z]+)`", line.split("|")[1])
    }


async def _labels_copied(api: KubeApi, node: str) -> bool:
    want = (await api.get(NODES, node))["metadata"].get("labels") or {}
    return bool((await api.get(IPNODES, node))["metadata"].get("labels") == want)


async def _is_true(check: Callable[[], bool]) -> bool:
    return check()


async def _equals(value: Awaitable[Any], expected: Any) -> bool:
    return bool(await value == expected)


async def _is_none(value: Awaitable[Any]) -> bool:
    return await value is None


async def test_the_controller_renders_frr_config_with_its_own_service_account(
    cluster: Cluster, tmp_path: Path
) -> None:
    """--frr-config (deploy/workloads/frr): the controller watches the BGPPeers, reads a
    peer's password from its Secret in eipctl-bgp (deploy/namespace.yaml), writes the file, and
    reports the reloader's answer as BGPConfigured with an update of its IpNode's status
    (which the own-node policy judges). A claim of a pool announced by BGP goes on the BGP
    link. The test plays the reloader: it writes `<file>.status`."""
    admin = cluster.admin
    assert admin is not None
    await admin.create(
        SECRETS,
        {
            "metadata": {"name": "tor-password", "namespace": BGP_SECRETS},
            "data": {"password": base64.b64encode(b"s3cret").decode()},
        },
        BGP_SECRETS,
    )
    await admin.create(
        BGPPEERS,
        {
            "metadata": {"name": "tor"},
            "spec": {
                "peerAddress": "192.0.2.1",
                "peerASN": 64500,
                "myASN": 64512,
                "passwordSecret": "tor-password",
                "nodeSelector": {"matchLabels": {"zone": "z1"}},
            },
        },
    )
    await admin.create(
        IPCLAIMPOOLS,
        {"metadata": {"name": "routed"}, "spec": {"cidr": "198.51.100.0/28", "announce": "bgp"}},
    )
    await admin.create(
        IPCLAIMS,
        {
            # as the scheduler places it
            "metadata": {
                "name": "198-51-100-5",
                "labels": {LABEL_POOL: "routed", LABEL_NODE: "node-a"},
            },
            "spec": {"ip": "198.51.100.5", "nodeName": "node-a"},
        },
    )
    config = tmp_path / "eipctl-frr" / "frr.conf"
    node = Node(
        "node-a",
        await cluster.client("eipctl-controller", node="node-a"),
        Segment(),
        frr_config=str(config),
    )
    node.start()
    try:

        async def rendered() -> str:
            text = config.read_text() if config.exists() else ""
            return text if "password s3cret" in text else ""

        text = await eventually(rendered, "the controller renders the peer, with its password")
        assert "neighbor 192.0.2.1 remote-as 64500" in text
        assert "198.51.100.0/28" in text
        await eventually(
            lambda: _equals(claim_phase(admin, "198-51-100-5"), ("Bound", "node-a")),
            "the routed claim Bound on node-a",
        )
        assert node.backend.has_address(BGP_LINK, ip_address("198.51.100.5"))

        # the reloader took it
        config.with_name(f"{config.name}.status").write_text(f"{sha256_of(text)} applied\n")

        async def configured() -> dict[str, Any]:
            status = (await admin.get(IPNODES, "node-a")).get("status") or {}
            found = [c for c in status.get("conditions") or [] if c["type"] == BGP_CONFIGURED]
            return found[0] if found else {}

        condition = await eventually(configured, "node-a's IpNode says BGPConfigured")
        assert (condition["status"], condition["reason"]) == ("True", "Applied")
    finally:
        await node.halt()
    assert cluster.rbac.denials == [], [d.message for d in cluster.rbac.denials]
    assert cluster.srv.admission is not None
    assert cluster.srv.admission.denials == [], cluster.srv.admission.denials
    assert cluster.srv.admission.applied > 0


async def test_what_each_account_is_refused(cluster: Cluster) -> None:
    admin = cluster.admin
    assert admin is not None
    await admin.create(
        SERVICES, {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}, "default"
    )
    for node in NODES_:
        await admin.create(IPNODES, {"metadata": {"name": node}, "spec": {"link": "eth0"}})
    await admin.create(
        IPCLAIMS,
        {"metadata": {"name": "203-0-113-2"}, "spec": {"ip": "203.0.113.2", "nodeName": "node-b"}},
    )
    ctl = await cluster.client("eipctl-controller", node="node-a")
    svc = await admin.get(SERVICES, "web", "default")

    with pytest.raises(Forbidden) as refused:
        await ctl.replace(SERVICES, svc)
    assert refused.value.status == 403
    assert 'cannot update resource "services"' in refused.value.message
    with pytest.raises(Forbidden) as refused:
        await ctl.create(
            IPCLAIMS, {"metadata": {"name": "203-0-113-3"}, "spec": {"ip": "203.0.113.3"}}
        )
    assert refused.value.status == 403
    with pytest.raises(Forbidden) as refused:
        await ctl.delete(IPCLAIMS, "203-0-113-2")
    assert refused.value.status == 403
    with pytest.raises(Forbidden):  # not even the main resource of a claim on its own node
        await ctl.patch(IPCLAIMS, "203-0-113-2", {"spec": {"nodeName": "node-a"}})
    # allowed by RBAC, refused by the own-node policy
    with pytest.raises(Invalid) as invalid:
        await ctl.patch(IPNODES, "node-b", {"status": {"heartbeat": 99}}, status=True)
    assert "a controller may only write its own IpNode" in invalid.value.message
    claim = await ctl.get(IPCLAIMS, "203-0-113-2")  # as the controller writes status: PUT
    claim["status"] = {"phase": "Bound", "boundNode": "node-a"}
    with pytest.raises(Invalid) as invalid:
        await ctl.replace(IPCLAIMS, claim, status=True)
    assert "claims placed on its own node" in invalid.value.message
    with pytest.raises(Forbidden):  # and only that way
        await ctl.patch(IPCLAIMS, "203-0-113-2", {"status": {"phase": "Bound"}}, status=True)
    # the BGPConfigured condition is written by update (a PUT): of its own IpNode only
    other = await ctl.get(IPNODES, "node-b")
    mark_configured(True, "Applied", "as the controller writes it")(other)
    with pytest.raises(Invalid) as invalid:
        await ctl.replace(IPNODES, other, status=True)
    assert "a controller may only write its own IpNode" in invalid.value.message
    # a BGPPeer's password: get, in eipctl-bgp only; no list, and none of eipctl-system's
    # Secrets (the liveness key, a cloud credential of nodeips)
    with pytest.raises(Forbidden):
        await ctl.list(SECRETS, BGP_SECRETS)
    with pytest.raises(Forbidden):
        await ctl.get(SECRETS, "tor-password", "default")
    with pytest.raises(Forbidden):
        await ctl.get(SECRETS, "eipctl-liveness", NS)
    with pytest.raises(NotFound):  # allowed: there is no such Secret
        await ctl.get(SECRETS, "tor-password", BGP_SECRETS)
    await ctl.patch(IPNODES, "node-a", {"status": {"heartbeat": 1}}, status=True)  # its own
    # node keys (docs/liveness.md "Node keys"): its own node's Secret, written, never read
    await ctl.create(SECRETS, node_key_secret("node-a", KEY_A, NODE_KEYS), NODE_KEYS)
    await ctl.replace(SECRETS, node_key_secret("node-a", KEY_A, NODE_KEYS))  # a restart's
    with pytest.raises(Invalid) as invalid:  # allowed by RBAC, refused by the policy
        await ctl.create(SECRETS, node_key_secret("node-b", KEY_A, NODE_KEYS), NODE_KEYS)
    assert "a controller may only write its own node's key" in invalid.value.message
    await admin.create(SECRETS, node_key_secret("node-b", KEY_B, NODE_KEYS), NODE_KEYS)
    with pytest.raises(Invalid):  # nor replace another node's key
        await ctl.replace(SECRETS, node_key_secret("node-b", KEY_A, NODE_KEYS))
    for read in (
        ctl.get(SECRETS, "node-a", NODE_KEYS),  # not even its own
        ctl.list(SECRETS, NODE_KEYS),
        ctl.patch(SECRETS, "node-a", {"metadata": {"labels": {"x": "y"}}}, NODE_KEYS),
    ):
        with pytest.raises(Forbidden):
            await read
    with pytest.raises(Forbidden):  # and no Secret of that kind anywhere else
        await ctl.create(SECRETS, node_key_secret("node-a", KEY_A, "default"), "default")

    sched = await cluster.client("eipctl-scheduler")
    found = await sched.get(SECRETS, "node-a", NODE_KEYS)  # the schedulers read them all
    assert node_key_of(found) == ("node-a", KEY_A)
    listed = await sched.list(SECRETS, NODE_KEYS)  # as their informer does
    assert sorted(filter(None, map(node_key_of, listed.items))) == [
        ("node-a", KEY_A),
        ("node-b", KEY_B),
    ]
    with pytest.raises(Forbidden):
        await sched.create(SECRETS, node_key_secret("node-b", KEY_A, NODE_KEYS), NODE_KEYS)
    with pytest.raises(Forbidden):
        await sched.replace(SERVICES, svc)
    with pytest.raises(Forbidden):
        await sched.patch(IPNODES, "node-a", {"status": {"heartbeat": 2}}, status=True)
    with pytest.raises(Forbidden):  # the allocator's Lease is not the scheduler's
        await sched.get(LEASES, "eipctl-allocator", NS)
    # the liveness key (docs/operations.md, "The key"): a scheduler creates the Secret when
    # it is missing (a second create: AlreadyExists, not a refusal), and never reads,
    # replaces or lists a Secret of eipctl-system
    made = LivenessSecret(
        sched,
        EventRecorder(sched, "eipctl-scheduler"),
        name="eipctl-liveness",
        namespace=NS,
        manager="eipctl-scheduler",
        replica="scheduler-0",
    )
    assert await made.ensure() is True
    assert await made.ensure() is False
    secret = await admin.get(SECRETS, "eipctl-liveness", NS)
    for refused in (
        sched.get(SECRETS, "eipctl-liveness", NS),
        sched.list(SECRETS, NS),
        sched.replace(SECRETS, secret),
        sched.delete(SECRETS, "eipctl-liveness", NS),
        ctl.create(SECRETS, {**secret, "metadata": {"name": "other"}}, NS),
    ):
        with pytest.raises(Forbidden):
            await refused

    alloc = await cluster.client("eipctl-allocator")
    with pytest.raises(Forbidden):
        await alloc.patch(IPNODES, "node-a", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(Forbidden):
        await alloc.get(NODES, "node-a")
    with pytest.raises(Forbidden):
        await alloc.get(LEASES, "eipctl-scheduler", NS)
    nodeips = await cluster.client("eipctl-nodeips")
    with pytest.raises(Forbidden):
        await nodeips.replace(SERVICES, svc)
    with pytest.raises(Forbidden):
        await nodeips.patch(IPNODES, "node-a", {"metadata": {"labels": {"a": "b"}}})
    assert (await admin.get(IPNODES, "node-b")).get("status") is None
