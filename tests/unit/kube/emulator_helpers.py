"""Helpers for tests that run the machinery against the API emulator."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from eipctl.kube.client import KubeApi, Obj, ResourceRef, object_key
from eipctl.kube.errors import ApiError

CONFIGMAPS = ResourceRef("", "v1", "configmaps", "ConfigMap", namespaced=True)
NS = "default"


def cm(name: str, **data: str) -> Obj:
    return {"metadata": {"name": name, "namespace": NS}, "data": dict(data)}


async def persist(fn: Callable[[], Any], attempts: int = 200) -> Any:
    """Retry a raw API call through injected faults (test scaffolding, not under test)."""
    for i in range(attempts):
        try:
            return await fn()
        except ApiError as exc:
            if not exc.retryable or i == attempts - 1:
                raise
            await asyncio.sleep(0.005)
    raise AssertionError("unreachable")


async def server_state(api: KubeApi, ref: ResourceRef) -> dict[str, str]:
    lst = await persist(lambda: api.list(ref, NS))
    return {object_key(o): o["metadata"]["resourceVersion"] for o in lst.items}
