"""Rolling updates on a `LocalBed`: one step at a time, as Kubernetes replaces a pod.

A step stops a controller or a scheduler or allocator replica gracefully, starts its
replacement and waits until it is back in service, returning how long that took (the upgrade
scenarios and benchmarks measure it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from eipctl.sandbox.testbed.processes import Process
from eipctl.sandbox.testbed.state import BedState


class BedRollouts(BedState):
    """The steps of the DaemonSet's and the Deployments' rolling updates."""

    def replace_controller(self, name: str, grace: float = 15.0, timeout: float = 20.0) -> float:
        """One step of the DaemonSet's rolling update on node `name`: SIGTERM to the running
        controller (SIGKILL after `grace`, the pod's terminationGracePeriodSeconds), the new
        one started, then waited for until in service (`wait_in_service`), as the DaemonSet
        waits for the new pod to be ready before the next node. Returns the seconds from the
        SIGTERM to back in service."""
        started = time.monotonic()
        self.controllers[name].terminate(grace=grace)
        self.start_controller(name)
        self.wait_in_service([name], timeout)
        return time.monotonic() - started

    def replace_replica(
        self,
        proc: Process,
        *,
        env: dict[str, str] | None = None,
        grace: float = 10.0,
        timeout: float = 20.0,
        while_down: Callable[[], object] | None = None,
    ) -> float:
        """One step of a scheduler or allocator Deployment's rolling update (maxSurge 0,
        maxUnavailable 1): SIGTERM to the replica (SIGKILL after `grace`), its replacement
        started (with `env` added to its environment, as `kubectl set env` changes the pod
        template), then waited for until it is back as leader or warm standby
        (`wait_replica_ready`). `while_down` is called after the old one exited and before
        the new one starts. Returns the seconds from the SIGTERM to ready."""
        started = time.monotonic()
        proc.terminate(grace=grace)
        if while_down is not None:
            while_down()
        if env:
            proc.env = {**(proc.env or {}), **env}
        offset = proc.log_size()
        proc.start()
        self.wait_replica_ready(proc, offset, timeout)
        return time.monotonic() - started
