"""Stories: the allocator's rules, one at a time, against the API emulator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from test_allocator_support import (
    IPCLAIMPOOLS,
    SERVICES,
    allocator,
    check_consistent,
    claims,
    create,
    events_for,
    eventually,
    get,
    ips_of,
    pool,
    service,
    update,
)

from eipctl.kube.client import NAMESPACES, KubeApi, Obj
from kubemu import ApiServer


async def test_auto_service_gets_lowest_free_ip_and_claim(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/29"))
    await create(api, SERVICES, service("web", type_="LoadBalancer"))
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "web")) == ["192.0.2.1"]
        svc = await get(api, SERVICES, "web", "default")
        assert svc is not None
        assert [e["ip"] for e in svc["status"]["loadBalancer"]["ingress"]] == ["192.0.2.1"]
        assert "externalIPs" not in svc["spec"]  # a LoadBalancer's IPs are in ingress only
        assert svc["metadata"]["annotations"]["eipctl.io/allocated-ips"] == "192.0.2.1"
        claim = (await claims(api))["192.0.2.1"]
        assert claim["metadata"]["name"] == "192-0-2-1"
        assert claim["metadata"]["labels"]["eipctl.io/pool"] == "p"
        assert claim["spec"]["services"] == ["default/web"]
        await check_consistent(api, 1)


async def test_pool_choice_named_autoassign_and_selectors(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("a-manual", "192.0.2.0/29", autoAssign=False))
    await create(
        api,
        IPCLAIMPOOLS,
        pool("b-team", "192.0.2.8/29", serviceSelector={"matchLabels": {"team": "blue"}}),
    )
    await create(
        api,
        IPCLAIMPOOLS,
        pool("c-prod", "192.0.2.16/29", namespaceSelector={"matchLabels": {"env": "prod"}}),
    )
    await create(api, IPCLAIMPOOLS, pool("d-any", "192.0.2.24/29"))
    await api.create(NAMESPACES, {"metadata": {"name": "shop", "labels": {"env": "dev"}}})
    await create(api, SERVICES, service("plain"))
    await create(api, SERVICES, service("blue", labels={"team": "blue"}))
    await create(
        api, SERVICES, service("named", {"external-ip": "auto", "external-ip-pool": "a-manual"})
    )
    await create(api, SERVICES, service("cart", namespace="shop"))
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "plain")) == ["192.0.2.25"]
        assert await eventually(lambda: ips_of(api, "blue")) == ["192.0.2.9"]
        assert await eventually(lambda: ips_of(api, "named")) == ["192.0.2.1"]
        assert await eventually(lambda: ips_of(api, "cart", "shop")) == ["192.0.2.26"]
        # namespace labels are watched: a Service arriving in a prod namespace uses c-prod
        await api.create(NAMESPACES, {"metadata": {"name": "live", "labels": {"env": "prod"}}})
        await create(api, SERVICES, service("till", namespace="live"))
        assert await eventually(lambda: ips_of(api, "till", "live")) == ["192.0.2.17"]


async def test_literal_ip_in_pool_refused_outside_and_shared_only_with_the_key(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/28", autoAssign=False))
    async with allocator(kubeconfig_path):
        shared = {"external-ip": "192.0.2.7", "external-ip-sharing-key": "web"}
        await create(api, SERVICES, service("http", shared))
        assert await eventually(lambda: ips_of(api, "http")) == ["192.0.2.7"]
        https = service("https", shared)
        https["spec"]["ports"] = [{"port": 443, "protocol": "TCP"}]
        await create(api, SERVICES, https)
        assert await eventually(lambda: ips_of(api, "https")) == ["192.0.2.7"]
        claim = await eventually(lambda: _claim_with(api, "192.0.2.7", 2))
        assert claim["spec"]["services"] == ["default/http", "default/https"]
        # the key, but http's port: kube-proxy could not serve both, so it waits
        await create(api, SERVICES, service("http-too", shared))
        event = await eventually(lambda: _event(api, "http-too", "PortClash"))
        assert "TCP/80" in event["message"] and "default/http" in event["message"]
        assert await ips_of(api, "http-too") == []
        await api.delete(SERVICES, "http-too", "default")
        # no key: refused, and the Event names the holders
        await create(api, SERVICES, service("thief", {"external-ip": "192.0.2.7"}))
        event = await eventually(lambda: _event(api, "thief", "IPInUse"))
        assert "default/http" in event["message"]
        assert await ips_of(api, "thief") == []
        # outside every pool: refused with an Event
        await create(api, SERVICES, service("far", {"external-ip": "203.0.113.5"}))
        event = await eventually(lambda: _event(api, "far", "IPNotInPool"))
        assert "203.0.113.5" in event["message"]
        # the shared IP is released only when the last holder lets go
        await api.delete(SERVICES, "http", "default")
        claim = await eventually(lambda: _claim_with(api, "192.0.2.7", 1))
        assert claim["spec"]["services"] == ["default/https"]
        await api.delete(SERVICES, "https", "default")
        # released: the key-less Service that waited gets it at once
        assert await eventually(lambda: ips_of(api, "thief")) == ["192.0.2.7"]
        claim = await eventually(lambda: _claim_with(api, "192.0.2.7", 1))
        assert claim["spec"]["services"] == ["default/thief"]


async def test_dual_stack_auto_gets_one_address_of_each_family(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("v4", "192.0.2.0/29"))
    await create(api, IPCLAIMPOOLS, pool("v6", "2001:db8::/125"))
    await create(api, SERVICES, service("dual", families=["IPv4", "IPv6"], type_="LoadBalancer"))
    await create(api, SERVICES, service("six", families=["IPv6"]))
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "dual")) == ["192.0.2.1", "2001:db8::1"]
        assert await eventually(lambda: ips_of(api, "six")) == ["2001:db8::2"]
        svc = await get(api, SERVICES, "dual", "default")
        assert svc is not None
        ingress = svc["status"]["loadBalancer"]["ingress"]
        assert [e["ip"] for e in ingress] == ["192.0.2.1", "2001:db8::1"]
        assert set(await claims(api)) == {"192.0.2.1", "2001:db8::1", "2001:db8::2"}


async def test_release_on_annotation_removed_service_deleted_or_moved(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("a", "192.0.2.0/29"))
    await create(api, IPCLAIMPOOLS, pool("b", "198.51.100.0/29", autoAssign=False))
    await create(api, SERVICES, service("x", type_="LoadBalancer", external_ips=["203.0.113.9"]))
    await create(api, SERVICES, service("y"))
    await create(api, SERVICES, service("z"))
    async with allocator(kubeconfig_path):
        await eventually(lambda: _ips_equal(api, "x", ["203.0.113.9", "192.0.2.1"]))
        await eventually(lambda: ips_of(api, "y"))
        await eventually(lambda: ips_of(api, "z"))
        # annotation removed: our IP leaves, the hand-set one stays, the claim goes
        await update(api, SERVICES, "x", _drop_annotation, "default")
        assert await eventually(lambda: _ips_equal(api, "x", ["203.0.113.9"]))
        svc = await get(api, SERVICES, "x", "default")
        assert svc is not None
        assert "eipctl.io/allocated-ips" not in svc["metadata"]["annotations"]

        async def no_ingress() -> bool:
            svc = await get(api, SERVICES, "x", "default")
            return svc is not None and not (
                (svc.get("status", {}).get("loadBalancer") or {}).get("ingress")
            )

        # the status is a second write (the status subresource), after the spec's
        assert await eventually(no_ingress)
        await eventually(lambda: _no_claim(api, "192.0.2.1"))
        # deleted: the claim goes
        y_ip = (await ips_of(api, "y"))[0]
        await api.delete(SERVICES, "y", "default")
        await eventually(lambda: _no_claim(api, y_ip))
        # moved to another pool: old released, new from b
        z_ip = (await ips_of(api, "z"))[0]
        await update(api, SERVICES, "z", _to_pool_b, "default")
        assert await eventually(lambda: _ips_equal(api, "z", ["198.51.100.1"]))
        await eventually(lambda: _no_claim(api, z_ip))
        await check_consistent(api, 1)


async def test_bad_input_gets_events_and_the_allocator_keeps_running(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("tiny", "192.0.2.0/31"))
    async with allocator(kubeconfig_path):
        await create(api, SERVICES, service("odd", {"external-ip": "please"}))
        event = await eventually(lambda: _event(api, "odd", "InvalidAnnotation"))
        assert "please" in event["message"]
        await create(api, SERVICES, service("s1"))
        await create(api, SERVICES, service("s2"))
        assert await eventually(lambda: ips_of(api, "s1")) == ["192.0.2.0"]
        assert await eventually(lambda: ips_of(api, "s2")) == ["192.0.2.1"]
        await create(api, SERVICES, service("s3"))
        await eventually(lambda: _event(api, "s3", "PoolExhausted"))
        # a bad annotation on a Service that holds an IP keeps the IP
        await update(api, SERVICES, "s1", _set_annotation("external-ip", "nonsense"), "default")
        await eventually(lambda: _event(api, "s1", "InvalidAnnotation"))
        assert await ips_of(api, "s1") == ["192.0.2.0"]
        # space frees up: the waiting Service is served without any change of its own
        await api.delete(SERVICES, "s2", "default")
        assert await eventually(lambda: ips_of(api, "s3")) == ["192.0.2.1"]


# --------------------------------------------------------------------------- helpers


def _drop_annotation(obj: Obj) -> None:
    obj["metadata"]["annotations"].pop("external-ip")


def _to_pool_b(obj: Obj) -> None:
    obj["metadata"]["annotations"]["external-ip-pool"] = "b"


def _set_annotation(key: str, value: str) -> Callable[[Obj], None]:
    def fn(obj: Obj) -> None:
        obj["metadata"]["annotations"][key] = value

    return fn


async def _ips_equal(api: KubeApi, name: str, expected: list[str]) -> bool:
    return await ips_of(api, name) == expected


async def _claim_with(api: KubeApi, ip: str, holders: int) -> Obj | None:
    claim = (await claims(api)).get(ip)
    if claim is not None and len(claim["spec"].get("services") or []) == holders:
        return claim
    return None


async def _no_claim(api: KubeApi, ip: str) -> bool:
    return ip not in await claims(api)


async def _event(api: KubeApi, name: str, reason: str) -> Obj | None:
    return next((e for e in await events_for(api, name) if e["reason"] == reason), None)


async def test_deny_service_external_ips_cluster_load_balancers_work_others_are_told(
    api: KubeApi, kubeconfig_path: Path, apiserver: ApiServer
) -> None:
    """A cluster with the DenyServiceExternalIPs admission plugin: a LoadBalancer gets its IP
    in ingress alone; a ClusterIP Service's write is refused, and its Event carries the
    API's own words, and the IP taken for it goes back to the pool."""
    apiserver.plugins.deny_service_external_ips = True
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/29"))
    await create(api, SERVICES, service("plain"))
    await create(api, SERVICES, service("lb", type_="LoadBalancer"))
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "lb")) == ["192.0.2.1"]
        event = await eventually(lambda: _event(api, "plain", "ServiceWriteRefused"))
        assert event["type"] == "Warning"
        assert "Forbidden" in event["message"] and "denied" in event["message"], event
        assert await eventually(lambda: _claims_are(api, {"192.0.2.1"}))
        assert await ips_of(api, "plain") == []


async def _claims_are(api: KubeApi, ips: set[str]) -> bool:
    return set(await claims(api)) == ips
