"""Readiness checks that say why they fail: /readyz names the cause (e.g. the missing link)."""

import aiohttp
from prometheus_client import CollectorRegistry

from eipctl.runtime.health import Health
from eipctl.runtime.values import BindAddress


async def test_readyz_names_the_reason_until_it_passes() -> None:
    health = Health(registry=CollectorRegistry())
    why: dict[str, str | None] = {"link": "link bond0 (annotation eipctl.io/link) does not exist"}
    health.add_readiness_reason("link", lambda: why["link"])
    health.add_readiness_check("informers", lambda: True)
    await health.start(
        metrics=BindAddress("", 0, enabled=False), probes=BindAddress("127.0.0.1", 0)
    )
    try:
        (port,) = health.ports()
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 503
                assert await resp.text() == (
                    "failing: link (link bond0 (annotation eipctl.io/link) does not exist)\n"
                )
            why["link"] = None
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 200
    finally:
        await health.stop()


def test_a_raising_reason_fails_by_its_name_and_never_touches_liveness() -> None:
    health = Health(registry=CollectorRegistry())

    def broken() -> str | None:
        raise RuntimeError("boom")

    health.add_readiness_reason("link", broken)
    assert health.failing("ready") == ["link"]
    assert health.failing("live") == []
