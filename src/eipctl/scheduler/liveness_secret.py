"""The Secret `eipctl-liveness`, created by a scheduler when it is missing (docs/liveness.md,
"Deploy"; docs/operations.md, "The key").

A scheduler replica whose key file is missing (the Secret does not exist, or the kubelet has
not written it yet: `runtime.liveness_key`) creates the Secret with a key of its own making
(`core.cluster_key`). Any replica may, leader or not: the name makes the create atomic, so
when both try, one gets AlreadyExists, which is as good as success (the other's key, or the
operator's). It is a create and nothing else: an existing Secret is never read or replaced,
so a key the operator wrote or rotated stays as it is. A refusal no retry mends (403: the
Role `eipctl-scheduler-liveness-key` missing) is an error in the log and a Warning Event on
the replica's Pod, once, then the create is tried every `RETRY_MAX` so a fixed Role is picked
up without a restart; the pod stays not ready (`problem`) and alive meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog

from eipctl.core.cluster_key import cluster_key_secret, new_cluster_key_text
from eipctl.core.fields import Obj
from eipctl.core.liveness_wire import Keyring
from eipctl.kube.client import SECRETS
from eipctl.kube.errors import AlreadyExists, ApiError
from eipctl.kube.events import Tells
from eipctl.kube.verbs import Creates

log = structlog.get_logger(__name__)

RETRY_FIRST: Final = 1.0
RETRY_MAX: Final = 60.0
WRITE_TIMEOUT: Final = 10.0
CREATED: Final = "LivenessKeyCreated"
NOT_CREATED: Final = "LivenessKeyNotCreated"
"""Event reasons, on the Pod of the replica that created it (or could not)."""


def pod_reference(name: str, namespace: str) -> Obj:
    """The replica's Pod as the involved object of its Events (`kubectl describe pod`)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}}


class LivenessSecret:
    """Creates Secret ``name`` in ``namespace`` if it does not exist (`ensure`)."""

    def __init__(
        self,
        api: Creates,
        events: Tells,
        *,
        name: str,
        namespace: str,
        manager: str,
        replica: str,
    ) -> None:
        self.api = api
        self.events = events
        self.name = name
        self.namespace = namespace
        self.manager = manager
        self.replica = replica
        self.problem: str | None = None
        """Why the Secret could not be created (a readiness reason), None otherwise."""

    async def ensure(self) -> bool:
        """Create the Secret until it exists; True if this replica created it."""
        text = new_cluster_key_text()
        secret = cluster_key_secret(
            self.name, self.namespace, text, manager=self.manager, creator=self.replica
        )
        where = f"{self.namespace}/{self.name}"
        delay, told = RETRY_FIRST, False
        while True:
            try:
                async with asyncio.timeout(WRITE_TIMEOUT):
                    await self.api.create(SECRETS, secret, namespace=self.namespace)
            except AlreadyExists:
                self.problem = None
                log.info(
                    "liveness.key_exists",
                    secret=where,
                    detail="made by another replica or the operator; left as it is",
                )
                return False
            except (ApiError, TimeoutError) as exc:
                lasting = isinstance(exc, ApiError) and not exc.retryable
                self.problem = f"cannot create the Secret {where}: {exc!r}"
                if lasting and not told:
                    told = True
                    log.error(
                        "liveness.key_not_created",
                        secret=where,
                        error=repr(exc),
                        retry_in=RETRY_MAX,
                        effect="no liveness key: this scheduler and the controllers wait",
                    )
                    self.events.tell(
                        pod_reference(self.replica, self.namespace),
                        "Warning",
                        NOT_CREATED,
                        f"cannot create the Secret {where} with the liveness key: {exc}; "
                        "grant the Role eipctl-scheduler-liveness-key (deploy/rbac/"
                        "scheduler.yaml) or create the Secret (docs/operations.md, 'The key')",
                    )
                elif not lasting:
                    log.warning("liveness.key_create_failed", error=repr(exc), retry_in=delay)
                await asyncio.sleep(RETRY_MAX if lasting else delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            self.problem = None
            kid = Keyring.from_text(text).key_ids[0].hex()
            log.info("liveness.key_created", secret=where, key_id=kid)
            self.events.tell(
                pod_reference(self.replica, self.namespace),
                "Normal",
                CREATED,
                f"created the Secret {where} with a new liveness key (key id {kid})",
            )
            return True
