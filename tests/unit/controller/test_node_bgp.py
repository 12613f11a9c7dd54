"""The node controller with BGP against the API emulator: pools announced by BGP put their IPs
on the BGP link, and the node's FRR configuration follows the BGPPeers, pools and labels.

The FRR side is the reloader's file contract (docs/bgp.md): the test plays the reloader by
writing ``<config>.status``; the real reloader and FRR run in tests/e2e.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from test_node import FAST, NODE, Bed, node_bed

from eipctl.controller.bgp import sha256_of
from eipctl.controller.settings import AnnounceSettings
from eipctl.core.naming import LABEL_POOL
from eipctl.kube.client import (
    BGPPEERS,
    EVENTS,
    IPCLAIMPOOLS,
    IPCLAIMS,
    IPNODES,
    NAMESPACES,
    NODES,
    SECRETS,
)
from eipctl.kube.errors import NotFound
from kubemu import ApiServer
from polling import eventually

BGP = replace(FAST, announcing=AnnounceSettings(bgp_link="eipctl-bgp"))


@pytest_asyncio.fixture
async def bed(apiserver: ApiServer, api_client: Any) -> AsyncIterator[Bed]:
    async with node_bed(apiserver, api_client) as b:
        yield b


async def pool(b: Bed, name: str, announce: str, cidr: str = "203.0.113.0/24") -> None:
    body = {"metadata": {"name": name}, "spec": {"cidr": cidr, "announce": announce}}
    try:
        current = await b.api.get(IPCLAIMPOOLS, name)
    except NotFound:
        await b.api.create(IPCLAIMPOOLS, body)
        return
    current["spec"]["announce"] = announce
    await b.api.replace(IPCLAIMPOOLS, current)


async def pooled_claim(b: Bed, address: str, pool_name: str) -> None:
    await b.claim(address)
    await b.api.patch(
        IPCLAIMS, address.replace(".", "-"), {"metadata": {"labels": {LABEL_POOL: pool_name}}}
    )


async def test_a_pool_switched_between_l2_and_bgp_moves_the_address_without_a_gap(
    bed: Bed,
) -> None:
    await pool(bed, "p", "l2")
    controller = bed.start(BGP)
    await eventually(controller.ready)
    await pooled_claim(bed, "203.0.113.7", "p")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    gaps: list[float] = []

    async def watch() -> None:  # the IP must be held somewhere on every look
        while True:
            if not (bed.on_link("203.0.113.7") or bed.on_link("203.0.113.7", "eipctl-bgp")):
                gaps.append(asyncio.get_running_loop().time())
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    try:
        await pool(bed, "p", "bgp")
        await eventually(lambda: bed.on_link("203.0.113.7", "eipctl-bgp"))
        await eventually(lambda: not bed.on_link("203.0.113.7"))
        await pool(bed, "p", "l2")
        await eventually(lambda: bed.on_link("203.0.113.7"))
        await eventually(lambda: not bed.on_link("203.0.113.7", "eipctl-bgp"))
    finally:
        watcher.cancel()
    assert gaps == []
    status = await bed.claim_status("203.0.113.7")
    assert status["phase"] == "Bound"


async def test_frr_configuration_follows_peers_pools_labels_and_reports_reloads(
    bed: Bed, tmp_path: Path
) -> None:
    config = tmp_path / "frr" / "frr.conf"
    await bed.api.create(NODES, {"metadata": {"name": NODE, "labels": {"rack": "r1"}}})
    await pool(bed, "routed", "bgp", "198.51.100.0/24")
    await bed.api.create(NAMESPACES, {"metadata": {"name": "eipctl-bgp"}})
    await bed.api.create(
        SECRETS,
        {
            "metadata": {"name": "tor-password", "namespace": "eipctl-bgp"},
            "data": {"password": base64.b64encode(b"s3cret").decode()},
        },
        namespace="eipctl-bgp",
    )
    await bed.api.create(
        BGPPEERS,
        {
            "metadata": {"name": "tor"},
            "spec": {
                "peerAddress": "192.0.2.1",
                "peerASN": 64500,
                "myASN": 64512,
                "passwordSecret": "tor-password",
                "nodeSelector": {"matchLabels": {"rack": "r1"}},
            },
        },
    )
    controller = bed.start(replace(BGP, announcing=replace(BGP.announcing, frr_config=str(config))))
    await eventually(controller.ready)

    def text() -> str:
        return config.read_text() if config.exists() else ""

    await eventually(lambda: "neighbor 192.0.2.1 remote-as 64500" in text(), timeout=5)
    assert "router bgp 64512" in text()
    assert "password s3cret" in text()
    assert "198.51.100.0/24" in text()
    assert oct(config.stat().st_mode & 0o777) == "0o640"

    # the reloader took it: BGPConfigured=True
    config.with_name("frr.conf.status").write_text(f"{sha256_of(text())} applied\n")

    async def condition() -> dict[str, str]:
        st = (await bed.api.get(IPNODES, NODE)).get("status") or {}
        found = [c for c in st.get("conditions", []) if c["type"] == "BGPConfigured"]
        return found[0] if found else {}

    await eventually(lambda: _is(condition(), "True", "Applied"), timeout=5)

    # a second peer of another ASN is left out and told so, on the BGPPeer
    await bed.api.create(
        BGPPEERS,
        {
            "metadata": {"name": "zz-other"},
            "spec": {
                "peerAddress": "192.0.2.9",
                "peerASN": 64501,
                "myASN": 65000,
                "nodeSelector": {"matchLabels": {"rack": "r1"}},
            },
        },
    )

    async def asn_event() -> bool:
        events = (await bed.api.list(EVENTS, "default")).items
        return any(
            e["reason"] == "ASNConflict" and e["involvedObject"]["name"] == "zz-other"
            for e in events
        )

    await eventually(asn_event, timeout=5)
    assert "192.0.2.9" not in text()

    # the node leaves the rack: no peer selects it, no BGP at all
    await bed.api.patch(NODES, NODE, {"metadata": {"labels": {"rack": "r2"}}})
    await eventually(lambda: "192.0.2.1" not in text() and text() != "", timeout=5)
    assert "router bgp" not in text()

    # FRR refuses a version: BGPConfigured=False, ReloadFailed, and an Event
    config.with_name("frr.conf.status").write_text(
        f"{sha256_of(text())} failed\n% Unknown command: nonsense\n"
    )
    await eventually(lambda: _is(condition(), "False", "ReloadFailed"), timeout=5)
    cond = await condition()
    assert "Unknown command" in cond["message"]


async def _is(got: object, status: str, reason: str) -> bool:
    cond = await got  # type: ignore[misc]
    return bool(cond) and cond["status"] == status and cond["reason"] == reason


@pytest.mark.parametrize("announce", ["bgp"])
async def test_no_pool_watch_and_no_bgp_link_without_a_bgp_link_setting(
    bed: Bed, announce: str
) -> None:
    """NodeSettings without bgp_link (the sandbox's simulated nodes): every pool is l2."""
    await pool(bed, "p", announce)
    controller = bed.start(FAST)
    await eventually(controller.ready)
    assert controller.pools is None
    await pooled_claim(bed, "203.0.113.7", "p")
    await eventually(lambda: bed.on_link("203.0.113.7"))
    assert not await bed.backend.link_exists("eipctl-bgp")
