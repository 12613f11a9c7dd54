"""The cluster liveness key: the Secret `eipctl-liveness` (data key ``key``) that the
schedulers and the controllers share (docs/liveness.md, "Deploy").

Nobody writes it by hand and none comes with the repository: a scheduler that finds its key
file missing creates the Secret with a key of its own making, and only when there is none
(a create, never an update). Here: the key and the Secret's shape. The text is what an
operator would have written (`head -c 32 /dev/urandom | base64`): one line, 44 bytes that
`Keyring.from_text` takes as the key; rotation adds lines to it (docs/operations.md).
"""

from __future__ import annotations

import base64
import secrets
from typing import Final

from eipctl.core.fields import Obj

__all__ = [
    "CLUSTER_KEY_BYTES",
    "CREATED_BY",
    "LIVENESS_SECRET",
    "MANAGED_BY",
    "SECRET_KEY",
    "cluster_key_secret",
    "new_cluster_key_text",
]

LIVENESS_SECRET: Final = "eipctl-liveness"
"""The Secret's default name, in eipctl's namespace."""
SECRET_KEY: Final = "key"
"""Its data key: the key file the workloads mount, one key per line, the first signs."""
CLUSTER_KEY_BYTES: Final = 32
MANAGED_BY: Final = "app.kubernetes.io/managed-by"
CREATED_BY: Final = "eipctl.io/created-by"


def new_cluster_key_text() -> str:
    """A fresh key file: 32 random bytes in base64, one line."""
    return base64.b64encode(secrets.token_bytes(CLUSTER_KEY_BYTES)).decode("ascii") + "\n"


def cluster_key_secret(name: str, namespace: str, text: str, *, manager: str, creator: str) -> Obj:
    """The Secret holding key file ``text``, labelled as made by ``manager`` (the process,
    e.g. ``eipctl-scheduler``) and annotated with ``creator`` (its replica)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": LIVENESS_SECRET,
                "app.kubernetes.io/part-of": "eipctl",
                MANAGED_BY: manager,
            },
            "annotations": {CREATED_BY: creator},
        },
        "type": "Opaque",
        "data": {SECRET_KEY: base64.b64encode(text.encode("ascii")).decode("ascii")},
    }
