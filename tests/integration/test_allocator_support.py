"""Helpers for the allocator stories: run allocators on the emulator, make objects, wait.

Holds no tests (named to sit with the stories that import it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import polling
from eipctl.allocator.process import run
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, SERVICES, KubeApi, Obj
from eipctl.kube.errors import AlreadyExists, NotFound
from eipctl.runtime.config import AllocatorSettings
from eipctl.runtime.health import Health
from eipctl.runtime.values import parse_bind_address

EVENTS_NS = "default"


def settings(kubeconfig: Path, identity: str = "alloc-0", **kw: Any) -> AllocatorSettings:
    off = parse_bind_address("0")
    values: dict[str, Any] = {
        "kubeconfig": str(kubeconfig),
        "identity": identity,
        "lease_namespace": "default",
        "metrics_bind_address": off,
        "health_probe_bind_address": off,
        "leader_elect": False,
    }
    values.update(kw)
    return AllocatorSettings(**values)


@contextlib.asynccontextmanager
async def allocator(kubeconfig: Path, **kw: Any) -> AsyncIterator[asyncio.Event]:
    """Run an allocator in this loop; yields its stop event, stops it on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(run(settings(kubeconfig, **kw), health=Health(), stop=stop))
    try:
        yield stop
    finally:
        stop.set()
        async with asyncio.timeout(10):
            await task


def pool(name: str, cidr: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name}, "spec": {"cidr": cidr, **spec}}


def service(
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    type_: str = "ClusterIP",
    families: list[str] | None = None,
    external_ips: list[str] | None = None,
) -> Obj:
    spec: Obj = {"type": type_, "ports": [{"port": 80, "protocol": "TCP"}]}
    if families:
        spec["ipFamilies"] = families
        spec["ipFamilyPolicy"] = "RequireDualStack" if len(families) > 1 else "SingleStack"
    if external_ips:
        spec["externalIPs"] = external_ips
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": {"external-ip": "auto"} if annotations is None else annotations,
        },
        "spec": spec,
    }


async def create(api: KubeApi, ref: Any, obj: Obj) -> Obj:
    return await api.create(ref, obj)


async def get(api: KubeApi, ref: Any, name: str, namespace: str | None = None) -> Obj | None:
    try:
        return await api.get(ref, name, namespace)
    except NotFound:
        return None


async def update(
    api: KubeApi, ref: Any, name: str, fn: Callable[[Obj], None], namespace: str | None = None
) -> Obj:
    """Read-modify-write as a user would with kubectl edit (retrying on conflict)."""
    from eipctl.kube.errors import Conflict

    for _ in range(50):
        obj = await api.get(ref, name, namespace)
        fn(obj)
        try:
            return await api.replace(ref, obj)
        except Conflict:
            await asyncio.sleep(0.01)
    raise AssertionError(f"could not update {name}")


eventually = partial(polling.eventually, step=0.05)
"""API checks poll gently: every call is a request to the emulator."""


def service_ips(obj: Obj) -> list[str]:
    """The IPs a Service carries: spec.externalIPs, then status.loadBalancer.ingress (a
    LoadBalancer gets its IPs in ingress only)."""
    ips = [str(ip) for ip in (obj.get("spec") or {}).get("externalIPs") or []]
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return list(dict.fromkeys([*ips, *(str(e["ip"]) for e in ingress if e.get("ip"))]))


async def ips_of(api: KubeApi, name: str, namespace: str = "default") -> list[str]:
    obj = await get(api, SERVICES, name, namespace)
    return service_ips(obj or {})


async def claims(api: KubeApi) -> dict[str, Obj]:
    return {c["spec"]["ip"]: c for c in (await api.list(IPCLAIMS)).items}


async def events_for(api: KubeApi, name: str, namespace: str = EVENTS_NS) -> list[Obj]:
    from eipctl.kube.client import EVENTS

    items = (await api.list(EVENTS, namespace)).items
    return [e for e in items if e.get("involvedObject", {}).get("name") == name]


async def pool_status(api: KubeApi, name: str) -> Obj:
    obj = await get(api, IPCLAIMPOOLS, name)
    return ((obj or {}).get("status")) or {}


def ready(status: Obj) -> tuple[str, str]:
    cond = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
    return cond.get("status", ""), cond.get("reason", "")


async def check_consistent(api: KubeApi, expect_services: int | None = None) -> None:
    """Every annotated Service has exactly one IP, every IP one claim listing it, no orphans."""
    services = (await api.list(SERVICES)).items
    all_claims = (await api.list(IPCLAIMS)).items
    by_ip = {c["spec"]["ip"]: c for c in all_claims}
    seen: dict[str, str] = {}
    wanted = [s for s in services if "external-ip" in (s["metadata"].get("annotations") or {})]
    if expect_services is not None:
        assert len(wanted) == expect_services
    for svc in wanted:
        key = f"{svc['metadata']['namespace']}/{svc['metadata']['name']}"
        ips = service_ips(svc)
        assert len(ips) == 1, f"{key} has {ips}"
        ip = ips[0]
        assert ip not in seen, f"{ip} on {key} and {seen[ip]}"
        seen[ip] = key
        claim = by_ip.get(ip)
        assert claim is not None, f"{key}: {ip} has no claim"
        assert claim["spec"].get("services") == [key], f"{ip}: {claim['spec'].get('services')}"
        if svc["spec"].get("type") == "LoadBalancer":
            ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")
            assert [e["ip"] for e in ingress or ()] == [ip], f"{key}: ingress {ingress}"
            assert not svc["spec"].get("externalIPs"), f"{key}: a LoadBalancer in externalIPs"
    orphans = [ip for ip in by_ip if ip not in seen]
    assert not orphans, f"claims without a Service: {orphans}"


__all__ = ["IPCLAIMPOOLS", "IPCLAIMS", "SERVICES", "AlreadyExists"]
