"""One claim per external IP in use: hand-set IPs (CVE-2020-8554 guard) and orphans."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler_harness import GROUP, SimNodes, add_claims, make_claim, scheduler

from eipctl.scheduler.service_claims import ServiceIndex, service_ips
from kubemu import ApiServer
from polling import eventually


def service(
    name: str,
    ips: list[str],
    allocated: str = "",
    ingress: list[str] | None = None,
    *,
    load_balancer: bool = False,
) -> dict[str, Any]:
    annotations = {"eipctl.io/allocated-ips": allocated} if allocated else {}
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"ports": [{"port": 80}], "externalIPs": ips},
    }
    if load_balancer or ingress:  # only a LoadBalancer Service may have an ingress status
        obj["spec"]["type"] = "LoadBalancer"
    if ingress:
        obj["status"] = {"loadBalancer": {"ingress": [{"ip": ip} for ip in ingress]}}
    return obj


def pool(name: str, cidr: str, *, allow_manual: bool, prefix: int = 32) -> dict[str, Any]:
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "IpClaimPool",
        "metadata": {"name": name},
        "spec": {"cidr": cidr, "allowManual": allow_manual, "prefixLength": prefix},
    }


def events_for(srv: ApiServer, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in srv.store.list("", "events", "default")
        if e["involvedObject"]["name"] == name and e["reason"] == reason
    ]


def test_service_ips_split_manual_from_allocated() -> None:
    svc = service(
        "web",
        ["198.51.100.7", "198.51.100.8", "not-an-ip", "2001:DB8::7"],
        allocated="198.51.100.8",
        ingress=["203.0.113.9"],
    )
    ips = service_ips(svc)
    assert ips.manual == {"198-51-100-7", "2001-db8--7"}
    assert ips.used == {"198-51-100-7", "198-51-100-8", "2001-db8--7", "203-0-113-9"}
    assert ips.invalid == ("not-an-ip",)


def test_service_index_tracks_changes() -> None:
    index = ServiceIndex()
    assert index.update("default/a", service("a", ["198.51.100.7"])) == {"198-51-100-7"}
    assert index.update("default/b", service("b", ["198.51.100.7"])) == {"198-51-100-7"}
    assert index.manual("198-51-100-7") == {"default/a", "default/b"}
    touched = index.update("default/a", service("a", ["198.51.100.8"]))
    assert touched == {"198-51-100-7", "198-51-100-8"}
    assert index.using("198-51-100-7") == {"default/b"}
    assert index.update("default/b", None) == {"198-51-100-7"}
    assert index.names() == {"198-51-100-8"}


async def test_hand_set_ips_get_claims_only_in_allow_manual_pools(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    srv.store.create(GROUP, "ipclaimpools", pool("manual", "198.51.100.0/24", allow_manual=True))
    srv.store.create(GROUP, "ipclaimpools", pool("auto", "203.0.113.0/24", allow_manual=False))
    srv.store.create(
        "", "services", service("web", ["198.51.100.7", "203.0.113.5", "192.0.2.1"]), "default"
    )
    async with scheduler(kubeconfig):
        await eventually(
            lambda: (
                (c := srv.store.find(GROUP, "ipclaims", "198-51-100-7")) is not None
                and (c.get("spec") or {}).get("nodeName") == "node-0"
            ),
            what="claim for the allowManual IP, placed",
        )
        made = srv.store.get(GROUP, "ipclaims", "198-51-100-7")
        assert made["metadata"]["labels"]["eipctl.io/pool"] == "manual"
        assert made["metadata"]["labels"]["eipctl.io/origin"] == "manual"
        assert made["spec"]["prefixLength"] == 32
        assert made["spec"]["services"] == ["default/web"]
        await eventually(
            lambda: len(events_for(srv, "web", "ExternalIPRefused")) == 2,
            what="a refusal Event per refused IP",
        )
        assert srv.store.find(GROUP, "ipclaims", "203-0-113-5") is None
        assert srv.store.find(GROUP, "ipclaims", "192-0-2-1") is None
        # the pool starts allowing hand-set IPs: the refused one in it gets its claim
        auto = srv.store.get(GROUP, "ipclaimpools", "auto")
        auto["spec"]["allowManual"] = True
        srv.store.update(GROUP, "ipclaimpools", auto)
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "203-0-113-5") is not None)
        assert srv.store.find(GROUP, "ipclaims", "192-0-2-1") is None
        # and stops again: the hand-set claim is withdrawn, the Service told why
        auto = srv.store.get(GROUP, "ipclaimpools", "auto")
        auto["spec"]["allowManual"] = False
        srv.store.update(GROUP, "ipclaimpools", auto)
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "203-0-113-5") is None)
        await eventually(
            lambda: (
                sum(
                    e.get("count", 1)
                    for e in events_for(srv, "web", "ExternalIPRefused")
                    if "203.0.113.5" in e["message"]
                )
                == 2
            ),
            what="refused again (the Event's count bumped)",
        )
        assert srv.store.find(GROUP, "ipclaims", "198-51-100-7") is not None


async def test_unpooled_ips_with_the_flag(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    srv.store.create("", "services", service("web", ["192.0.2.1", "2001:db8::1"]), "default")
    async with scheduler(kubeconfig, claim_unpooled_external_ips=True, default_prefix_length=24):
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "2001-db8--1") is not None)
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "192-0-2-1") is not None)
        v4 = srv.store.get(GROUP, "ipclaims", "192-0-2-1")
        v6 = srv.store.get(GROUP, "ipclaims", "2001-db8--1")
        assert (v4["spec"]["prefixLength"], v6["spec"]["prefixLength"]) == (24, 128)
        assert "eipctl.io/pool" not in v4["metadata"]["labels"]


async def test_allocator_ips_are_left_to_the_allocator(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    srv.store.create(GROUP, "ipclaimpools", pool("manual", "198.51.100.0/24", allow_manual=True))
    srv.store.create(
        "",
        "services",
        service("web", ["198.51.100.7", "198.51.100.9"], allocated="198.51.100.9"),
        "default",
    )
    async with scheduler(kubeconfig):
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "198-51-100-7") is not None)
        assert srv.store.find(GROUP, "ipclaims", "198-51-100-9") is None


async def test_orphans_are_deleted_after_the_grace_period(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    srv.store.create(GROUP, "ipclaims", make_claim("198.51.100.7"))  # used by a Service
    srv.store.create(GROUP, "ipclaims", make_claim("198.51.100.8"))  # LB ingress only
    web = service("web", ["198.51.100.7"], load_balancer=True)
    created = srv.store.create("", "services", web, "default")
    created["status"] = {"loadBalancer": {"ingress": [{"ip": "198.51.100.8"}]}}
    srv.store.update("", "services", created, status=True)
    async with scheduler(kubeconfig, orphan_grace_period=0.8) as running:
        await eventually(lambda: running.leading)
        loop_time = running.scheduler.now()
        (orphan,) = add_claims(srv, 1, base=50)  # nobody uses it
        await eventually(
            lambda: srv.store.find(GROUP, "ipclaims", orphan) is None, what="orphan deleted"
        )
        assert running.scheduler.now() - loop_time >= 0.8
        assert srv.store.find(GROUP, "ipclaims", "198-51-100-7") is not None
        assert srv.store.find(GROUP, "ipclaims", "198-51-100-8") is not None
        # the Service lets go of .7: it becomes an orphan in turn
        svc = srv.store.get("", "services", "web", "default")
        svc["spec"]["externalIPs"] = []
        srv.store.update("", "services", svc)
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", "198-51-100-7") is None)
        assert srv.store.find(GROUP, "ipclaims", "198-51-100-8") is not None


async def test_claim_used_again_within_grace_survives(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    (name,) = add_claims(srv, 1)
    async with scheduler(kubeconfig, orphan_grace_period=0.6) as running:
        await eventually(lambda: running.leading)
        ip = srv.store.get(GROUP, "ipclaims", name)["spec"]["ip"]
        # the allocator patches the Service after creating the claim: within the grace period
        srv.store.create("", "services", service("late", [ip], allocated=ip), "default")
        start = running.scheduler.now()
        await eventually(lambda: running.scheduler.now() - start > 1.2, timeout=3)
        assert srv.store.find(GROUP, "ipclaims", name) is not None


async def test_claims_not_named_after_their_ip_are_never_collected(
    srv: ApiServer, kubeconfig: Path, nodes: SimNodes
) -> None:
    nodes.add("node-0")
    odd = make_claim("198.51.100.7")
    odd["metadata"]["name"] = "handmade"
    srv.store.create(GROUP, "ipclaims", odd)
    (orphan,) = add_claims(srv, 1, base=20)
    async with scheduler(kubeconfig, orphan_grace_period=0.3):
        await eventually(lambda: srv.store.find(GROUP, "ipclaims", orphan) is None)
        assert srv.store.find(GROUP, "ipclaims", "handmade") is not None
