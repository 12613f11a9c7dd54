"""The bed's API helper: re-applying a pool survives a write by someone else in between
(the allocator writes a pool's status whenever its usage changes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from eipctl.sandbox.testbed.bed import CRDS
from eipctl.sandbox.testbed.kube import GROUP, VERSION, Kube
from eipctl.sandbox.testbed.loop import BackgroundLoop
from kubemu.server import ApiServer

POOLS = (GROUP, VERSION, "ipclaimpools")
SPEC = {"cidr": "203.0.113.0/24", "autoAssign": True}


@pytest_asyncio.fixture
async def kube(apiserver: ApiServer, kubeconfig_path: Path) -> AsyncIterator[Kube]:
    await apiserver.load_crds_from_dir(CRDS)
    loop = BackgroundLoop("test-kube")
    helper = Kube(loop, kubeconfig_path)
    try:
        yield helper
    finally:
        helper.close()
        loop.stop()


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


async def test_applying_a_pool_again_retries_a_conflict(kube: Kube) -> None:
    first = await asyncio.to_thread(kube.apply_pool, "p", SPEC)
    real_get = kube.custom.get_cluster_custom_object
    written_between: list[int] = []

    async def get_then_someone_writes(*args: Any, **kwargs: Any) -> Any:
        obj = await real_get(*args, **kwargs)
        if not written_between:  # the allocator's status write lands after our read
            other = await kube.custom.patch_cluster_custom_object(
                *POOLS,
                "p",
                {"metadata": {"annotations": {"someone": "else"}}},
                _content_type="application/merge-patch+json",
            )
            written_between.append(rv(other))
        return obj

    kube.custom.get_cluster_custom_object = get_then_someone_writes  # type: ignore[method-assign]
    changed = {**SPEC, "autoAssign": False}
    stored = await asyncio.to_thread(kube.apply_pool, "p", changed)
    assert written_between, "the write in between happened"
    assert stored["spec"]["autoAssign"] is False
    assert rv(stored) > written_between[0] > rv(first)
