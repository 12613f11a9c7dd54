"""Stories: pools come, grow, shrink, break and go while Services hold their IPs."""

from __future__ import annotations

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
    pool_status,
    ready,
    service,
    update,
)

from eipctl.kube.client import KubeApi, Obj


async def test_pool_created_after_the_services_serves_them_at_once(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    async with allocator(kubeconfig_path):
        for i in range(3):
            await create(api, SERVICES, service(f"s{i}"))
        await eventually(lambda: _event(api, "s0", "NoPool", "default"))
        await create(api, IPCLAIMPOOLS, pool("late", "192.0.2.0/29"))
        for i in range(3):
            assert await eventually(lambda i=i: ips_of(api, f"s{i}"))
        await check_consistent(api, 3)


async def test_pool_widened_later_serves_waiting_services(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/29", ranges=[["192.0.2.1", "192.0.2.1"]]))
    async with allocator(kubeconfig_path):
        await create(api, SERVICES, service("a"))
        assert await eventually(lambda: ips_of(api, "a")) == ["192.0.2.1"]
        await create(api, SERVICES, service("b"))
        await eventually(lambda: _event(api, "b", "PoolExhausted", "default"))
        await update(api, IPCLAIMPOOLS, "p", _ranges([["192.0.2.1", "192.0.2.6"]]))
        assert await eventually(lambda: ips_of(api, "b")) == ["192.0.2.2"]
        status = await eventually(lambda: _status_with(api, "p", allocated=2))
        assert status["free"] == 4 and ready(status) == ("True", "Ready")


async def test_pool_shrunk_keeps_allocations_and_marks_them(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/29"))
    async with allocator(kubeconfig_path):
        await create(api, SERVICES, service("a"))
        assert await eventually(lambda: ips_of(api, "a")) == ["192.0.2.1"]
        await update(api, IPCLAIMPOOLS, "p", _ranges([["192.0.2.4", "192.0.2.6"]]))
        claim = await eventually(lambda: _marked(api, "192.0.2.1"))
        cond = next(c for c in claim["status"]["conditions"] if c["type"] == "InPool")
        assert cond["status"] == "False" and cond["reason"] == "OutsidePool"
        await eventually(lambda: _event(api, "a", "OutsidePool", "default"))
        assert await ips_of(api, "a") == ["192.0.2.1"]
        status = await eventually(lambda: _status_with(api, "p", allocated=1, free=3))
        assert ready(status) == ("True", "Ready")


async def test_pool_delete_waits_for_allocations_by_default(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("p", "192.0.2.0/29"))
    async with allocator(kubeconfig_path):
        await create(api, SERVICES, service("a"))
        assert await eventually(lambda: ips_of(api, "a")) == ["192.0.2.1"]
        await eventually(lambda: _has_finalizer(api, "p"))
        await api.delete(IPCLAIMPOOLS, "p")
        await eventually(lambda: _event(api, "p", "PoolInUse", "default"))
        status = await pool_status(api, "p")
        assert ready(status) == ("False", "Deleting")
        await eventually(lambda: _event(api, "a", "PoolDeleting", "default"))
        assert await ips_of(api, "a") == ["192.0.2.1"]
        assert "192.0.2.1" in await claims(api)
        # the last allocation goes: the pool goes
        await api.delete(SERVICES, "a", "default")
        await eventually(lambda: _gone(api, "p"))
        assert await claims(api) == {}


async def test_pool_delete_with_purge_releases_and_moves_services(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("a-old", "192.0.2.0/29"))
    await create(api, IPCLAIMPOOLS, pool("b-new", "198.51.100.0/29"))
    async with allocator(kubeconfig_path, purge_on_pool_delete=True):
        await create(api, SERVICES, service("a"))
        assert await eventually(lambda: ips_of(api, "a")) == ["192.0.2.1"]
        await eventually(lambda: _has_finalizer(api, "a-old"))
        await api.delete(IPCLAIMPOOLS, "a-old")
        await eventually(lambda: _gone(api, "a-old"))
        assert await eventually(lambda: _ips_are(api, "a", ["198.51.100.1"]))
        await check_consistent(api, 1)


async def test_pool_status_reports_bad_specs_and_overlaps(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("good", "192.0.2.0/28"))
    bad = pool("bad", "192.0.2.0/24", ranges=[["198.51.100.1", "198.51.100.9"]])
    await create(api, IPCLAIMPOOLS, bad)
    async with allocator(kubeconfig_path):
        status = await eventually(lambda: _status_with(api, "good", allocated=0))
        assert status["free"] == 14 and ready(status) == ("True", "Ready")
        status = await eventually(lambda: _status_reason(api, "bad", "InvalidSpec"))
        assert "outside cidr" in _ready_message(status)
        await eventually(lambda: _event(api, "bad", "InvalidPool", "default"))
        await create(api, IPCLAIMPOOLS, pool("hostbits", "203.0.113.1/24"))
        status = await eventually(lambda: _status_reason(api, "hostbits", "InvalidSpec"))
        assert "host bits" in _ready_message(status)
        await create(api, IPCLAIMPOOLS, pool("late-overlap", "192.0.2.8/29"))
        status = await eventually(lambda: _status_reason(api, "late-overlap", "Overlap"))
        assert "'good'" in _ready_message(status)
        # the older pool keeps serving
        await create(api, SERVICES, service("a"))
        assert await eventually(lambda: ips_of(api, "a")) == ["192.0.2.1"]
        assert ready(await pool_status(api, "good"))[0] == "True"


# --------------------------------------------------------------------------- helpers


def _ranges(ranges: list[list[str]]):  # type: ignore[no-untyped-def]
    def fn(obj: Obj) -> None:
        obj["spec"]["ranges"] = ranges

    return fn


async def _status_with(api: KubeApi, name: str, **expected: int) -> Obj | None:
    status = await pool_status(api, name)
    if all(status.get(k) == v for k, v in expected.items()):
        return status
    return None


async def _status_reason(api: KubeApi, name: str, reason: str) -> Obj | None:
    status = await pool_status(api, name)
    return status if ready(status)[1] == reason else None


def _ready_message(status: Obj) -> str:
    cond = next(c for c in status["conditions"] if c["type"] == "Ready")
    return str(cond.get("message", ""))


async def _marked(api: KubeApi, ip: str) -> Obj | None:
    claim = (await claims(api)).get(ip)
    conditions = ((claim or {}).get("status") or {}).get("conditions") or []
    return (
        claim if any(c["type"] == "InPool" and c["status"] == "False" for c in conditions) else None
    )


async def _event(api: KubeApi, name: str, reason: str, namespace: str) -> Obj | None:
    return next((e for e in await events_for(api, name, namespace) if e["reason"] == reason), None)


async def _has_finalizer(api: KubeApi, name: str) -> bool:
    obj = await get(api, IPCLAIMPOOLS, name)
    return "eipctl.io/pool-protection" in ((obj or {}).get("metadata") or {}).get("finalizers", [])


async def _gone(api: KubeApi, name: str) -> bool:
    return await get(api, IPCLAIMPOOLS, name) is None


async def _ips_are(api: KubeApi, name: str, expected: list[str]) -> bool:
    return await ips_of(api, name) == expected


async def test_dual_stack_service_gets_its_second_family_when_that_pool_appears(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(api, IPCLAIMPOOLS, pool("v4", "192.0.2.0/29"))
    async with allocator(kubeconfig_path):
        await create(api, SERVICES, service("dual", families=["IPv4", "IPv6"]))
        assert await eventually(lambda: ips_of(api, "dual")) == ["192.0.2.1"]
        await create(api, IPCLAIMPOOLS, pool("v6", "2001:db8::/125"))
        assert await eventually(lambda: _ips_are(api, "dual", ["192.0.2.1", "2001:db8::1"]))
