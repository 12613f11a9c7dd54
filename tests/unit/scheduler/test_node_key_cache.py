"""scheduler/node_keys.py: the Secrets' keys reach the prober, once per loop turn, and a
Secret without a usable key leaves only its own node under the cluster key."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from eipctl.core.node_keys import node_key_secret
from eipctl.scheduler.node_keys import NodeKeyCache


class Secrets:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.handlers: list[Callable[[Any, Any], None]] = []

    def objects(self) -> list[dict[str, Any]]:
        return list(self.items.values())

    def add_change_handler(self, fn: Callable[[Any, Any], None]) -> None:
        self.handlers.append(fn)

    def put(self, secret: dict[str, Any]) -> None:
        old = self.items.get(secret["metadata"]["name"])
        self.items[secret["metadata"]["name"]] = secret
        for fn in self.handlers:
            fn(old, secret)


class Prober:
    def __init__(self) -> None:
        self.calls: list[dict[str, bytes]] = []

    def set_node_keys(self, node_keys: Mapping[str, bytes]) -> None:
        self.calls.append(dict(node_keys))


async def test_many_secrets_at_once_are_one_keyring_rebuild() -> None:
    secrets, prober = Secrets(), Prober()
    NodeKeyCache(secrets, prober)
    for n in range(100):
        secrets.put(node_key_secret(f"node-{n}", bytes([n]) * 32, "ns"))
    await asyncio.sleep(0)
    assert len(prober.calls) == 1
    assert prober.calls[0]["node-7"] == bytes([7]) * 32 and len(prober.calls[0]) == 100


async def test_an_unusable_secret_leaves_its_node_out_and_the_others_in() -> None:
    secrets, prober = Secrets(), Prober()
    cache = NodeKeyCache(secrets, prober)
    secrets.put(node_key_secret("node-a", bytes(32), "ns"))
    secrets.put({"metadata": {"name": "node-b"}, "data": {"key": "??"}})
    await asyncio.sleep(0)
    assert prober.calls == [{"node-a": bytes(32)}]
    assert cache.keys == {"node-a": bytes(32)}
    secrets.put(node_key_secret("node-a", bytes([1]) * 32, "ns"))  # a new key for node-a
    await asyncio.sleep(0)
    assert prober.calls[-1] == {"node-a": bytes([1]) * 32}


def test_without_secrets_nothing_is_read() -> None:
    prober = Prober()
    cache = NodeKeyCache(None, prober)
    cache.apply()
    assert prober.calls == [] and cache.keys == {}
