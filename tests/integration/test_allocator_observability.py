"""Story: what an operator sees of the allocator's work - metrics and Normal Events.

The allocator runs in this process, so its metrics are read back from `eipctl.metrics.REGISTRY`.
Counters are process-wide and other tests move them too: every check is a difference.
"""

from __future__ import annotations

from pathlib import Path

from test_allocator_support import (
    IPCLAIMPOOLS,
    SERVICES,
    allocator,
    create,
    events_for,
    eventually,
    ips_of,
    pool,
    service,
    update,
)

from eipctl.kube.client import KubeApi, Obj
from eipctl.metrics import REGISTRY


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Deltas:
    """Counter values relative to when the story started."""

    def __init__(self, *series: tuple[str, dict[str, str]]) -> None:
        self.start = {(name, tuple(sorted(lb.items()))): sample(name, **lb) for name, lb in series}

    def __call__(self, name: str, **labels: str) -> float:
        return sample(name, **labels) - self.start[(name, tuple(sorted(labels.items())))]


async def _event(api: KubeApi, name: str, reason: str) -> Obj | None:
    return next((e for e in await events_for(api, name) if e["reason"] == reason), None)


def _drop_annotation(obj: Obj) -> None:
    del obj["metadata"]["annotations"]["external-ip"]


async def test_allocations_releases_failures_and_pool_counts_are_visible(
    api: KubeApi, kubeconfig_path: Path
) -> None:
    await create(
        api, IPCLAIMPOOLS, pool("obs", "192.0.2.0/30", ranges=[["192.0.2.1", "192.0.2.2"]])
    )
    await create(api, SERVICES, service("web", type_="LoadBalancer"))
    delta = Deltas(
        ("eipctl_allocations_total", {"pool": "obs", "family": "ipv4"}),
        ("eipctl_releases_total", {"pool": "obs", "reason": "service_deleted"}),
        ("eipctl_releases_total", {"pool": "obs", "reason": "annotation_removed"}),
        ("eipctl_allocation_failures_total", {"reason": "exhausted"}),
        ("eipctl_allocation_duration_seconds_count", {}),
    )
    async with allocator(kubeconfig_path):
        assert await eventually(lambda: ips_of(api, "web")) == ["192.0.2.1"]
        assert await eventually(lambda: sample("eipctl_leader", component="allocator") == 1)
        allocated = await eventually(lambda: _event(api, "web", "Allocated"))
        assert allocated["type"] == "Normal"
        assert allocated["message"] == "allocated 192.0.2.1 from pool obs"
        assert delta("eipctl_allocations_total", pool="obs", family="ipv4") == 1
        assert delta("eipctl_allocation_duration_seconds_count") == 1

        await create(api, SERVICES, service("api"))
        assert await eventually(lambda: ips_of(api, "api")) == ["192.0.2.2"]
        await create(api, SERVICES, service("late"))
        await eventually(lambda: _event(api, "late", "PoolExhausted"))
        assert delta("eipctl_allocation_failures_total", reason="exhausted") == 1
        await eventually(lambda: sample("eipctl_pool_addresses", pool="obs", state="free") == 0)
        assert sample("eipctl_pool_addresses", pool="obs", state="size") == 2
        assert sample("eipctl_pool_addresses", pool="obs", state="used") == 2

        await api.delete(SERVICES, "web", "default")
        released = await eventually(lambda: _event(api, "web", "Released"))
        assert released["type"] == "Normal"
        assert released["message"] == "released 192.0.2.1 (pool obs): service deleted"
        # the waiting Service gets the freed IP; its wait counts in its allocation duration
        assert await eventually(lambda: ips_of(api, "late")) == ["192.0.2.1"]
        assert delta("eipctl_releases_total", pool="obs", reason="service_deleted") == 1
        assert delta("eipctl_allocations_total", pool="obs", family="ipv4") == 3
        # observed just after the write that the check above may already see
        await eventually(lambda: delta("eipctl_allocation_duration_seconds_count") == 3)

        await update(api, SERVICES, "api", _drop_annotation, "default")
        await eventually(lambda: _event(api, "api", "Released"))
        assert delta("eipctl_releases_total", pool="obs", reason="annotation_removed") == 1
        await eventually(lambda: sample("eipctl_pool_addresses", pool="obs", state="free") == 1)
        assert delta("eipctl_allocation_failures_total", reason="exhausted") == 1  # told once
    # the term is over: this replica no longer leads nor publishes pool counts
    assert sample("eipctl_leader", component="allocator") == 0
    assert (
        REGISTRY.get_sample_value("eipctl_pool_addresses", {"pool": "obs", "state": "size"}) is None
    )
