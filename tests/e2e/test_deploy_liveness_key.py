"""`kubectl apply -k deploy/` from a fresh clone, with nothing written before it, and the
liveness key made in the cluster by the process that owns it (issue #33, item 1).

The real kubectl applies deploy/ as a clone of this tree holds it (no deploy/liveness.key)
to the API emulator: the apply succeeds, the emulator's strict field validation keeps every
workload's pod spec as rendered, and the pod specs hang together (`check_pod_spec`). No
Secret eipctl-liveness exists yet. Then two real `eipctl scheduler` processes start at once,
as the Deployment's two replicas would, with the key file missing (the optional Secret
volume is empty): exactly one Secret is created, labelled as the scheduler's and annotated
with the replica that won, holding a key the keyring accepts; that replica's Pod gets a
`LivenessKeyCreated` Event. Once the key file appears (written here as the kubelet would),
both read it and go on: one takes the Lease. Applying deploy/ again leaves the Secret as it
is.
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
from pathlib import Path

import pytest
from test_deploy_apply import (
    LIVENESS_SECRET,
    NAMESPACE,
    check_pod_spec,
    kubectl,
    rendered,
    stored,
    workloads,
)

from eipctl.core.cluster_key import CREATED_BY, MANAGED_BY
from eipctl.core.liveness_wire import Keyring
from kubemu import ApiServer
from operator_deploy import OLD_KEY_FILE, deploy_checkout
from polling import eventually

pytestmark = pytest.mark.kubectl

REPLICAS = ("eipctl-scheduler-0", "eipctl-scheduler-1")


async def start_scheduler(
    kubeconfig: Path, identity: str, key_file: Path, log: Path
) -> asyncio.subprocess.Process:
    """`eipctl scheduler` as the Deployment runs it, its key file at `key_file`."""
    with log.open("w") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "eipctl",
            "scheduler",
            f"--kubeconfig={kubeconfig}",
            f"--identity={identity}",
            f"--lease-namespace={NAMESPACE}",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            f"--liveness-key-file={key_file}",
            stdout=out,
            stderr=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


async def stop(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def test_a_fresh_clone_applies_and_the_scheduler_makes_the_key(
    apiserver: ApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    clone = deploy_checkout(tmp_path / "clone")
    assert not (clone / OLD_KEY_FILE).exists()

    docs = await rendered(kubeconfig_path, home, clone)
    code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(clone))
    assert code == 0, out
    for workload in workloads(docs):
        pod = workload["spec"]["template"]["spec"]
        check_pod_spec(pod)
        assert stored(apiserver, workload)["spec"]["template"]["spec"] == pod
    assert apiserver.store.find("", "secrets", LIVENESS_SECRET, NAMESPACE) is None

    # the two replicas, each with its own (empty) volume, start together
    key_files = {r: tmp_path / r / "key" for r in REPLICAS}
    procs = []
    try:
        for replica, key_file in key_files.items():
            key_file.parent.mkdir()
            log = tmp_path / f"{replica}.log"
            procs.append(await start_scheduler(kubeconfig_path, replica, key_file, log))

        def secret() -> dict[str, object] | None:
            return apiserver.store.find("", "secrets", LIVENESS_SECRET, NAMESPACE)

        made = await eventually(secret, timeout=30, step=0.1, what="the Secret made")
        meta = made["metadata"]
        assert meta["labels"][MANAGED_BY] == "eipctl-scheduler"
        creator = meta["annotations"][CREATED_BY]
        assert creator in REPLICAS
        text = base64.b64decode(made["data"]["key"]).decode()
        assert len(Keyring.from_text(text).key_ids) == 1
        version = meta["resourceVersion"]

        def created_events() -> list[dict[str, object]]:
            return [
                e
                for e in apiserver.store.list("", "events", NAMESPACE)
                if e.get("reason") == "LivenessKeyCreated"
            ]

        (event,) = await eventually(created_events, timeout=10, step=0.1, what="the Event")
        assert event["involvedObject"]["kind"] == "Pod"  # type: ignore[index]
        assert event["involvedObject"]["name"] == creator  # type: ignore[index]
        # both are waiting for their file, alive: neither has given up
        await asyncio.sleep(1.5)
        assert all(p.returncode is None for p in procs)
        for replica in REPLICAS:
            assert "liveness.key_waiting" in (tmp_path / f"{replica}.log").read_text()

        # the kubelet writes the Secret into both pods: they read it and go on
        for key_file in key_files.values():
            key_file.write_text(text)

        def leader() -> str:
            lease = apiserver.store.find(
                "coordination.k8s.io", "leases", "eipctl-scheduler", NAMESPACE
            )
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        assert await eventually(leader, timeout=30, step=0.1, what="a leader") in REPLICAS
        for replica in REPLICAS:  # each polls its file: the standby may read it a bit later

            def read(log: Path = tmp_path / f"{replica}.log") -> bool:
                return "liveness.key_read" in log.read_text()

            await eventually(read, timeout=10, step=0.1, what=f"{replica} read the key")
        # one Secret, made once: the loser of the race found it there
        assert secret()["metadata"]["resourceVersion"] == version  # type: ignore[index]
        assert (
            sum("liveness.key_created" in (tmp_path / f"{r}.log").read_text() for r in REPLICAS)
            == 1
        )

        # applying deploy/ again leaves the key as it is
        code, out = await kubectl(kubeconfig_path, home, "apply", "-k", str(clone))
        assert code == 0, out
        assert secret()["metadata"]["resourceVersion"] == version  # type: ignore[index]
    finally:
        await stop(procs)
    for replica in REPLICAS:
        assert "Traceback" not in (tmp_path / f"{replica}.log").read_text()
