"""A real `eipctl controller` without `--iface` finds its link in a network namespace.

Stories: it takes the link holding the Node's InternalIP (not the default route's), and
answers liveness on that link's address; a Node annotation naming a link that does not
exist keeps it not ready, saying so on /readyz and in a Warning Event, until the link
appears, and then the claims go there.

The rig (test_controller_support) makes the node namespace with eth0 (192.0.2.2/24); the
links and routes added here live in that namespace and go with it, also on failure.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from test_controller_support import (
    NODE,
    NODE_IP,
    Rig,
    eventually,
    link_addresses,
    rig_fixture,  # noqa: F401 (the `r` fixture)
)

from eipctl.core.link_choice import ANNOTATION_LINK
from eipctl.kube.client import EVENTS, IPNODES, NODES, Obj
from eipctl.kube.errors import NotFound
from eipctl.sandbox.namespaces import run_in_netns, why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

HEALTH = "127.0.0.1:9483"  # inside the node's namespace: nothing else listens there
AUTO = {"iface": "auto", "health-probe-bind-address": HEALTH}


async def make_node(r: Rig, annotations: dict[str, str] | None = None) -> None:
    """The core v1 Node, with 192.0.2.2 as its InternalIP (as the kubelet reports it)."""
    await r.api.create(NODES, {"metadata": {"name": NODE, "annotations": annotations or {}}})
    addresses = [
        {"type": "InternalIP", "address": NODE_IP},
        {"type": "Hostname", "address": NODE},
    ]
    await r.api.patch(NODES, NODE, {"status": {"addresses": addresses}}, status=True)


def _get(url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""  # not listening yet


async def readyz(r: Rig) -> tuple[int, str]:
    status, text = await run_in_netns(r.node.name, _get, f"http://{HEALTH}/readyz")
    return int(status), str(text)


async def ready(r: Rig) -> bool:
    return (await readyz(r))[0] == 200


async def ipnode_spec(r: Rig) -> Obj:
    try:
        return dict((await r.api.get(IPNODES, NODE)).get("spec") or {})
    except NotFound:
        return {}


async def test_without_the_flag_it_takes_the_link_holding_the_internal_ip(r: Rig) -> None:
    # a second link that carries the default route: the InternalIP must beat it
    r.node.ip("link add ext0 type veth peer name ext1")
    r.node.ip("link set ext1 up")
    r.node.ip("link set ext0 up")
    r.node.ip("addr add 198.51.100.2/24 dev ext0")
    r.node.ip("route add default via 198.51.100.1 dev ext0")
    await make_node(r)
    proc = r.controller(**AUTO, **{"liveness-address": ""})

    async def registered() -> bool:
        spec = await ipnode_spec(r)
        return spec.get("link") == "eth0" and spec.get("livenessAddress") == NODE_IP

    await eventually(registered, timeout=20)
    await eventually(lambda: ready(r), timeout=10)
    log = proc.log_tail(200)
    assert "link.chosen" in log and "internal-ip" in log, log

    await r.claim("203.0.113.7")
    await eventually(lambda: r.has("203.0.113.7/32"))
    assert link_addresses(r.node, "ext0") == {"198.51.100.2/24": "forever"}


async def test_an_annotated_missing_link_is_not_ready_until_it_appears(r: Rig) -> None:
    await make_node(r, {ANNOTATION_LINK: "bond0"})
    r.controller(**AUTO)
    reason = f"link bond0 (annotation {ANNOTATION_LINK}) does not exist"

    async def not_ready_naming_the_link() -> bool:
        status, text = await readyz(r)
        return status == 503 and reason in text

    await eventually(not_ready_naming_the_link, timeout=20)

    async def warned() -> list[Obj]:
        items = (await r.api.list(EVENTS, "default")).items
        return [
            e
            for e in items
            if e.get("reason") == "LinkMissing" and e["involvedObject"]["name"] == NODE
        ]

    (event,) = await eventually(warned)
    assert event["type"] == "Warning" and reason in event["message"]
    assert await ipnode_spec(r) == {}  # no link, no IpNode: the node holds nothing

    r.node.ip("link add bond0 type veth peer name bond1")
    r.node.ip("link set bond1 up")
    r.node.ip("link set bond0 up")
    await eventually(lambda: ready(r), timeout=20)
    assert (await ipnode_spec(r)).get("link") == "bond0"
    await r.claim("203.0.113.9")
    await eventually(lambda: "203.0.113.9/32" in link_addresses(r.node, "bond0"))
    assert "203.0.113.9/32" not in r.addresses()
