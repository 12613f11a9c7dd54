"""controller/announcing/: which mode each claim uses and where its mode puts the address."""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

import pytest

from eipctl.controller.announcements import Announcements
from eipctl.controller.announcing import AnnounceModes
from eipctl.controller.announcing.bgp_routes import BgpRoutes
from eipctl.controller.announcing.layer2 import Layer2
from eipctl.core.link_plan import Address
from eipctl.core.naming import LABEL_POOL, node_claim_name_for
from eipctl.kube.client import Obj
from eipctl.net.memory import MemoryLinkBackend

NODE = "node-a"
BGP_LINK = "eipctl-bgp"


async def never_announce(*args: Any, **kwargs: Any) -> int:
    raise AssertionError("no announcement in these tests")


def layer2() -> Layer2:
    return Layer2(Announcements(never_announce, lambda: True))


def bgp(failures: list[str] | None = None) -> BgpRoutes:
    def failed(op: str, exc: Exception, *, link: str) -> None:
        if failures is not None:
            failures.append(f"{op} {link}")

    return BgpRoutes(BGP_LINK, MemoryLinkBackend(), NODE, failed)


class Pools:
    def __init__(self, modes: dict[str, str], synced: bool = True) -> None:
        self.modes = modes
        self.has_synced = synced

    def announce_of(self, pool: str) -> str:
        return self.modes.get(pool, "l2")


def claim(
    ip: str, node: str = NODE, name: str | None = None, pool: str = "", **spec: object
) -> Obj:
    meta: Obj = {"name": name or ip.replace(".", "-").replace(":", "-")}
    if pool:
        meta["labels"] = {LABEL_POOL: pool}
    return {"metadata": meta, "spec": {"ip": ip, "nodeName": node, **spec}}


def test_placed_claims_defaults_and_filters() -> None:
    objs = [
        claim("203.0.113.7"),
        claim("2001:db8::7", name="2001-db8--7", link="eth1"),
        claim("203.0.113.8", node="node-b"),
        {"metadata": {"name": "broken"}, "spec": {"ip": "not-an-ip", "nodeName": NODE}},
        claim("203.0.113.9", name=node_claim_name_for("203.0.113.9", NODE)),
    ]
    before = copy.deepcopy(objs)
    placed, parsed = AnnounceModes([layer2()]).placed_claims(objs, NODE, "eth0")
    assert objs == before
    by_name = {p.name: p for p in placed}
    assert by_name["203-0-113-7"].address == Address(
        "eth0", ipaddress.ip_address("203.0.113.7"), 32
    )
    assert by_name["2001-db8--7"].address == Address(
        "eth1", ipaddress.ip_address("2001:db8::7"), 128
    )
    assert by_name[node_claim_name_for("203.0.113.9", NODE)].shared
    assert not by_name["203-0-113-7"].shared
    assert {p.mode for p in placed} == {"l2"} and all(p.probe for p in placed)
    assert set(parsed) == set(by_name) and "broken" not in parsed


def test_a_bgp_pool_is_a_host_route_on_the_bgp_link_that_is_not_probed() -> None:
    modes = AnnounceModes([layer2(), bgp()], Pools({"routed": "bgp"}))
    objs = [
        claim("203.0.113.7", pool="routed", prefixLength=24, link="eth1"),
        claim("203.0.113.8", pool="flat", prefixLength=24),
    ]
    placed, _ = modes.placed_claims(objs, NODE, "eth0")
    routed, flat = sorted(placed, key=lambda p: p.name)
    assert (routed.mode, routed.probe) == ("bgp", False)
    assert routed.address == Address(BGP_LINK, ipaddress.ip_address("203.0.113.7"), 32)
    assert (flat.mode, flat.probe) == ("l2", True)
    assert flat.address == Address("eth0", ipaddress.ip_address("203.0.113.8"), 24)
    assert not modes.has_mac(BGP_LINK) and modes.has_mac("eth0")


def test_a_mode_not_running_here_falls_back_to_layer_2() -> None:
    # a BGP pool on a controller without --bgp-link: its IPs are layer 2, as before BGP
    modes = AnnounceModes([layer2()], Pools({"routed": "bgp"}))
    placed, _ = modes.placed_claims([claim("203.0.113.7", pool="routed")], NODE, "eth0")
    assert [(p.mode, p.address.link) for p in placed] == [("l2", "eth0")]


def test_the_modes_wait_for_the_pools() -> None:
    assert not AnnounceModes([layer2()], Pools({}, synced=False)).has_synced
    assert AnnounceModes([layer2()]).has_synced


def test_layer_2_is_required() -> None:
    with pytest.raises(ValueError, match="layer 2"):
        AnnounceModes([bgp()])


async def test_bgp_makes_its_link_before_its_first_address_and_says_bound_at_once() -> None:
    failures: list[str] = []
    mode = bgp(failures)
    await mode.prepare()
    assert await mode._backend.link_exists(BGP_LINK)
    bound: list[str] = []
    mode.added(
        Address(BGP_LINK, ipaddress.ip_address("203.0.113.7"), 32), "c", lambda: bound.append("c")
    )
    assert bound == ["c"] and failures == []
