"""controller/status.py: claims to addresses (the status mutations: test_claim_status.py)."""

from __future__ import annotations

import copy
import ipaddress

from eipctl.controller.status import placed_claims
from eipctl.core.link_plan import Address
from eipctl.core.naming import node_claim_name_for
from eipctl.kube.client import Obj

NODE = "node-a"


def claim(ip: str, node: str = NODE, name: str | None = None, **spec: object) -> Obj:
    return {
        "metadata": {"name": name or ip.replace(".", "-").replace(":", "-")},
        "spec": {"ip": ip, "nodeName": node, **spec},
    }


def test_placed_claims_defaults_and_filters() -> None:
    objs = [
        claim("203.0.113.7"),
        claim("2001:db8::7", name="2001-db8--7", link="eth1"),
        claim("203.0.113.8", node="node-b"),
        {"metadata": {"name": "broken"}, "spec": {"ip": "not-an-ip", "nodeName": NODE}},
        claim("203.0.113.9", name=node_claim_name_for("203.0.113.9", NODE)),
    ]
    before = copy.deepcopy(objs)
    placed, parsed = placed_claims(objs, NODE, "eth0")
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
    assert set(parsed) == set(by_name) and "broken" not in parsed
