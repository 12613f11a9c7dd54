"""Real netlink: an administrator's /32 and /128 survive the start-up purge.

Guarantee (docs/networking.md "Marker", docs/controller.md step 3): only addresses carrying
eipctl's IFA_PROTO marker are managed. At start the controller removes the managed addresses
whose claims are not placed on its node; an address without the marker is the
administrator's, whatever its prefix length, and is never removed.

Mutant killed: classifying every host-length address (/32 or /128) on the link as managed,
marker or not (in `NetlinkLinkBackend._dump` or in the controller's reading of the link).
Every admin address in the earlier tests was a /24 or a /64, so it passed all of them.

Two stories, each in network namespaces of its own (TEST-NET addresses only, removed
afterwards even on failure): the netlink backend alone, and a real `eipctl controller`
process starting on a link that holds both kinds of host address.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_controller_support import (
    Rig,
    eventually,
    rig_fixture,  # noqa: F401 (the `r` fixture)
)

from eipctl.net.errors import ForeignAddressError
from eipctl.net.netlink import NetlinkLinkBackend
from eipctl.sandbox.namespaces import Namespace, NamespaceSet, why_unavailable

pytestmark = [pytest.mark.netns]
if (_reason := why_unavailable()) is not None:
    pytestmark.append(pytest.mark.skip(reason=_reason))

ADMIN_HOSTS = ["198.51.100.250/32", "2001:db8:ffff::250/128"]
"""The administrator's host addresses: added with `ip`, so no marker and no lifetime."""
STALE = ["203.0.113.50/32", "2001:db8::50/128"]
"""Managed host addresses an earlier controller left; no claim places them here."""


def admin_add(ns: Namespace, dev: str, address: str) -> None:
    ns.ip(f"addr add {address} dev {dev}" + (" nodad" if ":" in address else ""))


@pytest.fixture
def node() -> Iterator[Namespace]:
    with NamespaceSet() as tb:
        ns, peer = tb.namespace("node"), tb.namespace("peer")
        tb.veth(ns, "ea0", peer, "eb0")
        yield ns


async def test_netlink_never_counts_an_admin_host_address_as_managed(node: Namespace) -> None:
    """The backend reads the marker, not the prefix length: an admin /32 and /128 are not
    listed as managed, cannot be removed through eipctl, and keep `valid_lft forever`, while
    eipctl's own /32 and /128 are managed and removable."""
    for address in ADMIN_HOSTS:
        admin_add(node, "ea0", address)
    backend = NetlinkLinkBackend(netns=node.name)
    try:
        for address in STALE:
            ip, _, prefixlen = address.partition("/")
            await backend.add("ea0", ip, int(prefixlen), valid_lft=60)
        every = {f"{a.ip}/{a.prefixlen}": a.managed for a in await backend.list_all("ea0")}
        assert {a: every.get(a) for a in [*ADMIN_HOSTS, *STALE]} == {
            **dict.fromkeys(ADMIN_HOSTS, False),
            **dict.fromkeys(STALE, True),
        }
        managed = {f"{a.ip}/{a.prefixlen}" for a in await backend.list_managed("ea0")}
        assert managed == set(STALE)
        for address in ADMIN_HOSTS:
            ip, _, prefixlen = address.partition("/")
            with pytest.raises(ForeignAddressError):
                await backend.remove("ea0", ip, int(prefixlen))
        for address in STALE:
            ip, _, prefixlen = address.partition("/")
            assert await backend.remove("ea0", ip, int(prefixlen))
    finally:
        await backend.close()
    shown = node.ip("-o addr show dev ea0")
    for address in ADMIN_HOSTS:
        line = next((ln for ln in shown.splitlines() if f" {address} " in ln), "")
        assert "valid_lft forever" in line, f"{address} is still the admin's: {shown}"


async def test_startup_purge_keeps_admin_host_addresses_on_a_real_link(r: Rig) -> None:
    """The node's eth0 holds the admin's 192.0.2.2/24 (the rig's), an admin /32 and /128,
    and a stale managed /32 and /128 when the controller starts. Its first pass purges the
    stale ones; the admin's addresses are all still there, forever, and the controller never
    even tried to remove one (a refused removal is logged as `address.remove.refused`)."""
    for address in ADMIN_HOSTS:
        admin_add(r.node, "eth0", address)
    for address in STALE:
        await r.plant_managed(address)
    proc = r.controller()
    await r.wait_beating()

    await eventually(lambda: not any(r.has(a) for a in STALE))
    await r.wait_beating()  # and a few more passes' worth of time
    held = r.addresses()
    for address in [*ADMIN_HOSTS, "192.0.2.2/24"]:
        assert held.get(address) == "forever", f"{address} is gone or changed: {held}"
    assert "address.remove.refused" not in proc.log_tail(400)
