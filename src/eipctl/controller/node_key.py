"""This node's own liveness key: kept in a file on the node, handed to the schedulers through
a Secret the controllers may write but not read (`core.node_keys`, docs/liveness.md "Node
keys").

The file keeps the key across restarts: a controller that came back with a new key would
answer under a key the schedulers have not read yet, and look dead for as long. The Secret
is written once per start (create, or an update of one left by an earlier start), retried
until it lands; until the schedulers have read it the node goes on under the cluster key,
as before node keys.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Final

import structlog

from eipctl.core.liveness_wire import key_id
from eipctl.core.node_keys import (
    new_node_key,
    node_key_secret,
    node_key_text,
    parse_node_key_text,
)
from eipctl.kube.client import SECRETS, KubeApi
from eipctl.kube.errors import AlreadyExists, ApiError

log = structlog.get_logger(__name__)

RETRY_FIRST: Final = 1.0
RETRY_MAX: Final = 60.0
WRITE_TIMEOUT: Final = 10.0


def load_or_create(path: str) -> bytes | None:
    """The node key in ``path``; a new one written there (0600, directories made) if the
    file does not exist. A file that holds no key is moved aside (``<path>.unreadable``,
    for whoever wants to look) and replaced by a new key: the new Secret reaches the
    schedulers as any restart's would. None, logged as an error, if the key can be neither
    read nor written (the node then runs under the cluster key only, as before node keys)."""
    file = Path(path)
    try:
        try:
            return parse_node_key_text(file.read_text(encoding="ascii"))
        except FileNotFoundError:
            pass
        except (ValueError, UnicodeDecodeError) as exc:
            aside = file.with_name(file.name + ".unreadable")
            file.replace(aside)
            log.error("node_key.unreadable", path=path, error=str(exc), moved_to=str(aside))
        key = new_node_key()
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(node_key_text(key))
    except OSError as exc:
        log.error(
            "node_key.unusable",
            path=path,
            error=str(exc),
            effect="probes and replies stay under the cluster key",
        )
        return None
    log.info("node_key.created", path=path, key_id=key_id(key).hex())
    return key


async def publish(api: KubeApi, node: str, key: bytes, namespace: str) -> None:
    """Write this node's key Secret until it lands. A refusal no retry makes better (the
    namespace or a permission missing) is logged as an error once and then tried again
    every `RETRY_MAX`, so that the operator's fix is picked up without a restart."""
    secret = node_key_secret(node, key, namespace)
    delay, told = RETRY_FIRST, False
    while True:
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                try:
                    await api.create(SECRETS, secret, namespace=namespace)
                except AlreadyExists:  # an earlier start's: the same key, or a new one
                    await api.replace(SECRETS, secret)
        except (ApiError, TimeoutError) as exc:
            lasting = isinstance(exc, ApiError) and not exc.retryable
            if lasting and not told:
                told = True
                log.error(
                    "node_key.unpublished",
                    node=node,
                    namespace=namespace,
                    error=repr(exc),
                    effect="probes and replies stay under the cluster key",
                )
            elif not lasting:
                log.warning("node_key.publish_failed", node=node, error=repr(exc), retry_in=delay)
            await asyncio.sleep(RETRY_MAX if lasting else delay)
            delay = min(delay * 2, RETRY_MAX)
            continue
        log.info("node_key.published", node=node, namespace=namespace, key_id=key_id(key).hex())
        return
