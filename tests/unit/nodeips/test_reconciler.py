"""NodeReconciler without an API: the optional throttle (never needed for correctness), and
which cloud errors are retried."""

from __future__ import annotations

from typing import Any

import pytest

from eipctl.cloud.provider import BAD_PROVIDER_ID, CLOUD_API_ERROR, CloudError
from eipctl.kube.workqueue import DONE, Result, TerminalError
from eipctl.nodeips.reconciler import NodeReconciler


class Empty:
    def get(self, key: str) -> None:
        return None

    def objects(self) -> list[dict[str, Any]]:
        return []


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def reconciler(min_interval: float, clock: Clock) -> NodeReconciler:
    return NodeReconciler(
        api=None,  # type: ignore[arg-type]
        nodes=Empty(),
        claims=Empty(),
        pools=Empty(),
        pods=Empty(),
        writer=None,  # type: ignore[arg-type]
        recorder=None,  # type: ignore[arg-type]
        default_pool="p",
        prevent_deallocation=False,
        requeue_interval=60.0,
        min_interval=min_interval,
        clock=clock,
    )


async def test_min_interval_defers_a_second_pass() -> None:
    clock = Clock()
    r = reconciler(10.0, clock)
    assert await r.reconcile("gone") == DONE
    clock.now += 4.0
    deferred = await r.reconcile("other")  # other nodes are not held back
    assert deferred == DONE


async def test_min_interval_requeues_the_same_node_for_the_rest() -> None:
    clock = Clock()
    r = reconciler(10.0, clock)
    r._last["n1"] = clock.now  # a pass just ran
    clock.now += 4.0
    result = await r.reconcile("n1")
    assert result.requeue_after is not None and abs(result.requeue_after - 6.0) < 1e-9
    clock.now += 6.0
    assert await r.reconcile("n1") == DONE


async def test_no_throttle_by_default() -> None:
    clock = Clock()
    r = reconciler(0.0, clock)
    r._last["n1"] = clock.now
    assert await r.reconcile("n1") == DONE


async def test_an_error_only_a_user_can_fix_is_terminal_and_a_passing_one_is_retried() -> None:
    r = reconciler(0.0, Clock())
    errors = [
        CloudError(BAD_PROVIDER_ID, "Node spec.providerID 'gce://x' is not aws", retryable=False),
        CloudError(CLOUD_API_ERROR, "RequestLimitExceeded"),
    ]

    async def failing(name: str) -> Result:
        raise errors.pop(0)

    r._reconcile = failing  # type: ignore[method-assign]
    with pytest.raises(TerminalError) as terminal:
        await r.reconcile("n1")  # the worker drops the key until the Node changes
    assert terminal.value.reason == BAD_PROVIDER_ID
    result = await r.reconcile("n1")
    assert result.requeue_after is not None and result.requeue_after <= 5.0
    assert r._reported["n1"] == (CLOUD_API_ERROR, "RequestLimitExceeded")  # told, once each
