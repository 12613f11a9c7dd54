"""What the bed sets up in the cluster: the Lease namespace and the scenarios' pools.

Most Services draw from e2e-v4; e2e-tiny (2 IPs) and e2e-v6 only serve Services that name
them and carry their label, so the scenarios never take each other's IPs.
"""

from __future__ import annotations

from typing import Any

from eipctl.sandbox.testbed.network import POOL4, POOL6

LEASE_NAMESPACE = "eipctl-system"
SELECTOR_LABEL = "e2e-pool"
"""A Service carrying ``e2e-pool: <label>`` draws from the pool `labelled_pool` made."""
POOL_V4 = "e2e-v4"
POOL_V6 = "e2e-v6"
POOL_TINY = "e2e-tiny"
TINY_LABEL = {"e2e-pool": "tiny"}
V6_LABEL = {"external-ip-family": "ipv6"}

POOLS: dict[str, dict[str, Any]] = {
    POOL_V4: {
        "cidr": str(POOL4),
        "ranges": [["203.0.113.10", "203.0.113.200"]],
        "autoAssign": True,
        "allowManual": True,
    },
    POOL_TINY: {
        "cidr": str(POOL4),
        "ranges": [["203.0.113.240", "203.0.113.241"]],
        "autoAssign": True,
        "serviceSelector": {"matchLabels": TINY_LABEL},
    },
    POOL_V6: {
        "cidr": str(POOL6),
        "ranges": [["2001:db8:f::10", "2001:db8:f::ff"]],
        "prefixLength": 128,
        "autoAssign": True,
        "serviceSelector": {"matchLabels": V6_LABEL},
    },
}


def labelled_pool(first: str, last: str, label: str, **extra: Any) -> dict[str, Any]:
    """An IPv4 pool spec for the Services labelled ``e2e-pool: <label>`` only, from `first`
    to `last` of the bed's external network; `extra` adds fields (announce, placement)."""
    return {
        "cidr": str(POOL4),
        "ranges": [[first, last]],
        "autoAssign": True,
        "serviceSelector": {"matchLabels": {SELECTOR_LABEL: label}},
        **extra,
    }
