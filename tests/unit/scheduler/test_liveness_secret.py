"""scheduler/liveness_secret.py against the API emulator: the Secret eipctl-liveness is made
when missing, with a key the keyring takes; one that exists is never touched; two replicas
racing make one; a refusal (403) is an error in the log, a Warning Event on the replica's Pod
and a readiness reason, and the replica keeps trying until the Role is there."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import structlog

from eipctl.core.cluster_key import CREATED_BY, MANAGED_BY, cluster_key_secret
from eipctl.core.liveness_wire import Keyring
from eipctl.kube.client import KubeApi, connect
from eipctl.kube.events import EventRecorder
from eipctl.scheduler import liveness_secret
from eipctl.scheduler.liveness_secret import NOT_CREATED, LivenessSecret
from kubemu import ApiServer
from polling import eventually

NS = "eipctl-system"
NAME = "eipctl-liveness"
MANAGER = "eipctl-scheduler"


def stored(srv: ApiServer) -> dict[str, object] | None:
    return srv.store.find("", "secrets", NAME, NS)


def key_text(secret: dict[str, object]) -> str:
    return base64.b64decode(secret["data"]["key"]).decode()  # type: ignore[index]


@pytest_asyncio.fixture
async def api(apiserver: ApiServer, kubeconfig_path: Path) -> AsyncIterator[KubeApi]:
    apiserver.store.create("", "namespaces", {"metadata": {"name": NS}})
    client = await connect(str(kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


def creator(api: KubeApi, replica: str = "eipctl-scheduler-0") -> LivenessSecret:
    return LivenessSecret(
        api,
        EventRecorder(api, MANAGER),
        name=NAME,
        namespace=NS,
        manager=MANAGER,
        replica=replica,
    )


async def test_a_missing_secret_is_created_once_with_a_key_the_keyring_takes(
    apiserver: ApiServer, api: KubeApi
) -> None:
    assert stored(apiserver) is None
    with structlog.testing.capture_logs() as logs:
        assert await creator(api).ensure() is True
    secret = stored(apiserver)
    assert secret is not None
    meta = secret["metadata"]
    assert meta["labels"][MANAGED_BY] == MANAGER  # type: ignore[index]
    assert meta["annotations"][CREATED_BY] == "eipctl-scheduler-0"  # type: ignore[index]
    text = key_text(secret)
    keyring = Keyring.from_text(text)
    assert len(keyring.key_ids) == 1
    (line,) = text.splitlines()
    assert len(base64.b64decode(line, validate=True)) == 32  # 32 random bytes, base64
    created = [e for e in logs if e["event"] == "liveness.key_created"]
    assert [e["key_id"] for e in created] == [keyring.key_ids[0].hex()]
    # level-based: asked again, it finds the Secret there and changes nothing
    version = meta["resourceVersion"]  # type: ignore[index]
    assert await creator(api, "eipctl-scheduler-1").ensure() is False
    assert stored(apiserver) == secret and secret["metadata"]["resourceVersion"] == version  # type: ignore[index]


async def test_an_existing_secret_is_left_as_it_is(apiserver: ApiServer, api: KubeApi) -> None:
    """The operator's (mid-rotation: two keys) is neither read nor replaced."""
    rotating = "a" * 44 + "\n" + "b" * 44 + "\n"
    apiserver.store.create(
        "", "secrets", cluster_key_secret(NAME, NS, rotating, manager="kubectl", creator="me"), NS
    )
    before = stored(apiserver)
    assert await creator(api).ensure() is False
    assert stored(apiserver) == before
    assert before is not None and key_text(before) == rotating


async def test_two_replicas_racing_make_one_secret(apiserver: ApiServer, api: KubeApi) -> None:
    results = await asyncio.gather(
        creator(api, "eipctl-scheduler-0").ensure(), creator(api, "eipctl-scheduler-1").ensure()
    )
    assert sorted(results) == [False, True]
    (secret,) = apiserver.store.list("", "secrets", NS)
    winner = "eipctl-scheduler-0" if results[0] else "eipctl-scheduler-1"
    assert secret["metadata"]["annotations"][CREATED_BY] == winner


async def test_a_403_is_an_error_an_event_and_a_reason_until_the_role_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(liveness_secret, "RETRY_MAX", 0.2)
    srv = ApiServer(history_window=200, bookmark_interval=0.5, rbac=True)
    await srv.start(host="127.0.0.1", port=0)
    assert srv.rbac is not None
    try:
        srv.store.create("", "namespaces", {"metadata": {"name": NS}})
        token = srv.rbac.service_account_token(NS, "eipctl-scheduler")
        scheduler = await connect(str(srv.write_kubeconfig(tmp_path / "kc", token=token)))
        admin = await connect(str(srv.write_kubeconfig(tmp_path / "kc-admin")))
        try:
            # the account may post Events (its ClusterRole) but has no Secret Role yet
            recorder = EventRecorder(admin, MANAGER)
            secret = LivenessSecret(
                scheduler, recorder, name=NAME, namespace=NS, manager=MANAGER, replica="pod-0"
            )
            with structlog.testing.capture_logs() as logs:
                task = asyncio.create_task(secret.ensure())
                await eventually(lambda: secret.problem, timeout=5, what="the problem")
                await asyncio.sleep(0.5)  # a few retries: still running, told once
                assert not task.done()
                assert "403" in (secret.problem or "") or "Forbidden" in (secret.problem or "")
                errors = [e for e in logs if e["event"] == "liveness.key_not_created"]
                assert len(errors) == 1 and errors[0]["log_level"] == "error"
                await recorder.flush()
                (event,) = [
                    e for e in srv.store.list("", "events", NS) if e["reason"] == NOT_CREATED
                ]
                assert event["type"] == "Warning"
                assert event["involvedObject"]["kind"] == "Pod"
                assert event["involvedObject"]["name"] == "pod-0"
                assert "eipctl-scheduler-liveness-key" in event["message"]
                # the operator adds the Role: the next try lands, no restart
                role = {
                    "metadata": {"name": "eipctl-scheduler-liveness-key", "namespace": NS},
                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}],
                }
                srv.store.create("rbac.authorization.k8s.io", "roles", role, NS)
                binding = {
                    "metadata": {"name": "eipctl-scheduler-liveness-key", "namespace": NS},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": "eipctl-scheduler-liveness-key",
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": "eipctl-scheduler", "namespace": NS}
                    ],
                }
                srv.store.create("rbac.authorization.k8s.io", "rolebindings", binding, NS)
                assert await asyncio.wait_for(task, 5) is True
            assert secret.problem is None
            assert srv.store.find("", "secrets", NAME, NS) is not None
        finally:
            await scheduler.close()
            await admin.close()
    finally:
        await srv.stop()
