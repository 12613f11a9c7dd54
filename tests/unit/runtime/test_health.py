import aiohttp
from prometheus_client import CollectorRegistry, Counter

from eipctl.runtime.health import Health
from eipctl.runtime.values import BindAddress


async def test_probes_and_metrics_share_one_port() -> None:
    registry = CollectorRegistry()
    Counter("eipctl_test_things", "things", registry=registry).inc(3)
    health = Health(registry=registry)
    synced = {"informers": False}
    health.add_readiness_check("informers", lambda: synced["informers"])
    health.add_liveness_check("workers", lambda: True)
    addr = BindAddress("127.0.0.1", 0)
    await health.start(metrics=addr, probes=addr)
    try:
        (port,) = health.ports()
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 503
                assert "informers" in await resp.text()
            synced["informers"] = True
            async with http.get(f"{base}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"{base}/metrics") as resp:
                assert "eipctl_test_things_total 3.0" in await resp.text()
    finally:
        await health.stop()


async def test_a_raising_check_counts_as_failing() -> None:
    health = Health(registry=CollectorRegistry())

    def broken() -> bool:
        raise RuntimeError("boom")

    health.add_liveness_check("broken", broken)
    assert health.failing("live") == ["broken"]
    assert health.failing("ready") == []
