"""The nodes' own liveness keys, from the Secrets their controllers write
(`core.node_keys`), handed to the prober: probes to a node with a key go under it, and its
replies count under it only, so no other node can answer for it (docs/liveness.md, "Node
keys").

Every replica reads them, leader or not (a standby judges too). Changes are applied once per
loop turn, not once per Secret: a replica starting among 1,000 nodes rebuilds the keyring
once, not 1,000 times. A Secret that holds no usable key is logged and left out (that node
goes on under the cluster key).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

import structlog

from eipctl.core.fields import Obj
from eipctl.core.liveness_wire import key_id
from eipctl.core.node_keys import node_key_of

log = structlog.get_logger(__name__)


class SecretCache(Protocol):
    def objects(self) -> list[Obj]: ...

    def add_change_handler(self, fn: Callable[[Obj | None, Obj | None], None]) -> None: ...


class KeyedProber(Protocol):
    def set_node_keys(self, node_keys: Mapping[str, bytes]) -> None: ...


class NodeKeyCache:
    """Feeds ``prober`` the keys in ``secrets`` (None: node keys are off)."""

    def __init__(self, secrets: SecretCache | None, prober: KeyedProber | None) -> None:
        self._secrets = secrets
        self._prober = prober
        self._pending = False
        self.keys: dict[str, bytes] = {}
        if secrets is not None and prober is not None:
            secrets.add_change_handler(self._changed)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        if self._pending:
            return
        self._pending = True
        asyncio.get_running_loop().call_soon(self.apply)

    def apply(self) -> None:
        """Hand the prober the keys the cache holds now."""
        self._pending = False
        if self._secrets is None or self._prober is None:
            return
        keys: dict[str, bytes] = {}
        for secret in self._secrets.objects():
            found = node_key_of(secret)
            if found is None:
                name = (secret.get("metadata") or {}).get("name")
                log.warning("node_key.unusable", secret=name, effect="the cluster key for it")
                continue
            keys[found[0]] = found[1]
        try:
            self._prober.set_node_keys(keys)
        except ValueError as exc:  # a key id taken twice: 2**-32 per pair
            log.error("node_keys.refused", error=str(exc), effect="node keys unchanged")
            return
        for node in sorted(keys.keys() - self.keys.keys()):
            log.info("node_key.learned", node=node, key_id=key_id(keys[node]).hex())
        for node in sorted(self.keys.keys() - keys.keys()):
            log.info("node_key.forgotten", node=node)
        for node in sorted(keys.keys() & self.keys.keys()):
            if keys[node] != self.keys[node]:
                log.info("node_key.changed", node=node, key_id=key_id(keys[node]).hex())
        self.keys = keys
