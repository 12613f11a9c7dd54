"""Story: an allocator upgrade loses nothing.

The API holds what the previous allocator left (written here object by object, the way it
wrote them): LoadBalancer Services with their IP in both ``spec.externalIPs`` and
``status.loadBalancer.ingress``, two Services sharing one IP under a key, a hand-set
``externalIPs`` entry beside an allocated IP, a claim of a policy-``all`` pool with the
scheduler's per-node copies, and a LoadBalancer already in the shape the new allocator writes
(ingress only, ``ipMode: VIP`` as a real API server stores it). The new allocator starts on
it: every Service keeps every IP it held, no claim is made or lost, the old
``spec.externalIPs`` entries of LoadBalancers go (ingress keeps the IP), and what is already
right is not written at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_allocator_support import (
    IPCLAIMPOOLS,
    IPCLAIMS,
    SERVICES,
    allocator,
    claims,
    create,
    eventually,
    get,
    pool,
    service,
)

from eipctl.kube.client import KubeApi, Obj


def claim(ip: str, pool_name: str, services: list[str], key: str = "", **labels: str) -> Obj:
    meta: Obj = {
        "name": ip.replace(".", "-"),
        "labels": {"eipctl.io/pool": pool_name, "eipctl.io/origin": "allocator", **labels},
    }
    if key:
        meta["annotations"] = {"eipctl.io/sharing-key": key}
    return {"metadata": meta, "spec": {"ip": ip, "prefixLength": 32, "services": services}}


async def old_service(
    api: KubeApi,
    name: str,
    ips: list[str],
    *,
    lb: bool,
    hand_set: list[str] | None = None,
    in_spec: bool = True,
    ip_mode: bool = False,
    port: int = 80,
    **annotations: str,
) -> Obj:
    body = service(
        name,
        {"external-ip": "auto", "eipctl.io/allocated-ips": ",".join(ips), **annotations},
        type_="LoadBalancer" if lb else "ClusterIP",
        external_ips=[*(hand_set or []), *(ips if in_spec else [])],
    )
    body["spec"]["ports"] = [{"port": port, "protocol": "TCP"}]
    stored = await create(api, SERVICES, body)
    if lb:
        entries: list[dict[str, Any]] = [{"ip": ip} for ip in ips]
        for entry in entries if ip_mode else ():
            entry["ipMode"] = "VIP"
        stored["status"] = {"loadBalancer": {"ingress": entries}}
        stored = await api.replace(SERVICES, stored, status=True)
    return stored


async def test_upgrade_keeps_every_ip_and_rewrites_only_what_is_outdated(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/28"))
    await create(api, IPCLAIMPOOLS, pool("everywhere", "198.51.100.0/28", placement="all"))
    old_claims = [
        claim("192.0.2.1", "p", ["default/lb-old"]),
        claim("192.0.2.2", "p", ["default/api", "default/web"], key="shop"),
        claim("192.0.2.3", "p", ["default/mixed"]),
        claim("192.0.2.4", "p", ["default/lb-new"]),
        claim("198.51.100.1", "everywhere", ["default/anycast"], **{"eipctl.io/placement": "all"}),
    ]
    for body in old_claims:
        await create(api, IPCLAIMS, body)
    for node in ("node-1", "node-2"):  # the scheduler's copies for policy all
        copy = claim("198.51.100.1", "everywhere", [], **{"eipctl.io/origin": "all-nodes"})
        copy["metadata"]["name"] = f"198-51-100-1.{node}"
        copy["spec"] = {"ip": "198.51.100.1", "nodeName": node, "nodeBound": True}
        await create(api, IPCLAIMS, copy)
    await old_service(api, "lb-old", ["192.0.2.1"], lb=True)
    await old_service(api, "web", ["192.0.2.2"], lb=False, **{"external-ip-sharing-key": "shop"})
    await old_service(
        api, "api", ["192.0.2.2"], lb=False, port=443, **{"external-ip-sharing-key": "shop"}
    )
    await old_service(api, "mixed", ["192.0.2.3"], lb=False, hand_set=["203.0.113.9"])
    right = await old_service(api, "lb-new", ["192.0.2.4"], lb=True, in_spec=False, ip_mode=True)
    await old_service(
        api, "anycast", ["198.51.100.1"], lb=False, **{"external-ip-pool": "everywhere"}
    )
    before = {name: body for name, body in (await claims(api)).items()}
    assert len(before) == 5

    async def lb_old_upgraded() -> bool:
        svc = await get(api, SERVICES, "lb-old", "default")
        return svc is not None and not svc["spec"].get("externalIPs")

    async with allocator(kubeconfig_path):
        assert await eventually(lb_old_upgraded)
        for _ in range(2):  # a full pass more over everything: still nothing lost
            await eventually(lambda: _all_kept(api), timeout=10)

    after = await claims(api)
    assert set(after) == set(before)
    for ip, body in after.items():
        assert body["spec"].get("services") == before[ip]["spec"].get("services"), ip
    copies = [c for c in (await api.list(IPCLAIMS)).items if "." in c["metadata"]["name"]]
    assert len(copies) == 2
    lb_old = await get(api, SERVICES, "lb-old", "default")
    assert lb_old is not None
    assert [e["ip"] for e in lb_old["status"]["loadBalancer"]["ingress"]] == ["192.0.2.1"]
    mixed = await get(api, SERVICES, "mixed", "default")
    assert mixed is not None and mixed["spec"]["externalIPs"] == ["203.0.113.9", "192.0.2.3"]
    unchanged = await get(api, SERVICES, "lb-new", "default")
    assert unchanged is not None
    assert unchanged["metadata"]["resourceVersion"] == right["metadata"]["resourceVersion"]


EXPECTED = {
    "lb-old": "192.0.2.1",
    "web": "192.0.2.2",
    "api": "192.0.2.2",
    "mixed": "192.0.2.3",
    "lb-new": "192.0.2.4",
    "anycast": "198.51.100.1",
}


async def _all_kept(api: KubeApi) -> bool:
    for name, ip in EXPECTED.items():
        svc = await get(api, SERVICES, name, "default")
        assert svc is not None
        recorded = svc["metadata"]["annotations"].get("eipctl.io/allocated-ips")
        assert recorded == ip, f"{name} holds {recorded}, held {ip}"
    return True
