"""controller/peer_list.py: the peers' endpoints and peer keys from the IpNode list, and the
early list when a peer speaks under a key we do not hold (docs/liveness.md "Peer keys")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eipctl.controller import peer_list
from eipctl.controller.peer_list import PeerList
from eipctl.core.peer_keys import PeerIdentity
from eipctl.kube.client import ObjectList

NODE = "node-a"
PEER_B = PeerIdentity("node-b", b"node-b's own key, 32 bytes long.")


def ipnode(name: str, port: int, peer_key: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"link": "eth0", "livenessAddress": "198.51.100.2", "livenessPort": port}
    if peer_key is not None:
        spec["livenessPeerKey"] = peer_key
    return {"metadata": {"name": name}, "spec": spec}


class FakeApi:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.lists = 0

    async def list(self, ref: Any, namespace: str | None = None, **_: Any) -> ObjectList:
        self.lists += 1
        return ObjectList(list(self.items), "1")


class FakeQuerier:
    """What PeerList asks of a `PeerQuerier`: the peers as listed, one greeting."""

    def __init__(self) -> None:
        self.on_unknown_peer_key: Any = None
        self.peers: dict[str, tuple[str, int]] = {}
        self.keys: dict[str, bytes] = {}
        self.greetings = 0

    def set_peers(self, peers: dict[str, tuple[str, int]], keys: dict[str, bytes]) -> None:
        self.peers, self.keys = dict(peers), dict(keys)

    async def greet(self) -> tuple[int, int]:
        self.greetings += 1
        return 0, len(self.peers)


def make(items: list[dict[str, Any]]) -> tuple[PeerList, FakeApi, FakeQuerier]:
    api, querier = FakeApi(items), FakeQuerier()
    peers = PeerList(api, NODE, querier, probe_silence=0.4)  # type: ignore[arg-type]
    return peers, api, querier


async def test_the_list_brings_the_peers_keys_and_skips_ours_and_bad_ones() -> None:
    peers, _, querier = make(
        [
            ipnode(NODE, 9473, PeerIdentity(NODE, b"x" * 32).public_text),
            ipnode("node-b", 9473, PEER_B.public_text),
            ipnode("node-c", 9473, "not a key"),  # asked under the cluster key
            ipnode("node-d", 9473),  # an older release: no key
        ]
    )
    await peers.refresh()
    assert querier.keys == {"node-b": PEER_B.public_key}
    assert set(querier.peers) == {NODE, "node-b", "node-c", "node-d"}  # the querier skips ours
    assert peers.known == 4


async def test_an_unknown_peer_key_lists_again_after_the_gap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(peer_list, "TICK", 0.01)
    monkeypatch.setattr(peer_list, "RELIST_MIN", 0.05)
    monkeypatch.setattr(peer_list, "JITTER", 0.0)
    peers, api, querier = make([ipnode("node-b", 9473)])
    peers._gap = 0.05
    running = asyncio.create_task(peers.run())
    try:
        await asyncio.sleep(0.2)
        assert api.lists == 1 and querier.greetings == 1  # listed, greeted once, then quiet
        api.items = [ipnode("node-b", 9473, PEER_B.public_text)]
        querier.on_unknown_peer_key()  # node-b asked under a key we did not hold yet
        for _ in range(100):
            if api.lists == 2:
                break
            await asyncio.sleep(0.01)
        assert api.lists == 2 and querier.keys == {"node-b": PEER_B.public_key}
        assert querier.greetings == 1  # a greeting is for the first list only
        await asyncio.sleep(0.2)
        assert api.lists == 2  # the flag was cleared by the list
    finally:
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
