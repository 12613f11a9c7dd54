"""The bed's routed half, for pools announced by BGP: an upstream router, a far client behind
it, and FRR in every node namespace. This module is its plan (addresses, AS numbers, BFD
timers, the programs it needs); `router.py` runs the router and the far client, `frr.py` the
FRR of each node.

    far ns [eth0]~~far0 [router ns] eth0 ~~ rt --[ br0 ]-- n0 ~~ eth0 [node-0 ns]  FRR (zebra,
    192.0.2.2         192.0.2.1      198.51.100.1         ...             bfdd, bgpd) + reload.sh
    2001:db8:2::2     2001:db8:2::1  2001:db8:1::1                        eipctl-bgp (dummy)

- **Router** (`Router`): bird 2 in its own namespace on the switch, AS 64500, one eBGP session
  per node and family (every node AS 64512), each with BFD (100 ms x 3).
- **Far client** (`FarClient`): 192.0.2.2 and 2001:db8:2::2 behind the router; it reaches an
  external IP only through the router's BGP routes.
- **FRR per node** (`FrrNode`): zebra, bfdd and bgpd in the node's namespace, and the reloader
  that applies what eipctl's controller renders.

Every namespace is the network's (`Network.tb`), so `Network.close()` removes it; `stop()`
and `close()` end the daemons first and remove the pathspace directories.
"""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path
from typing import Any

from eipctl.sandbox.namespaces import sh, why_unavailable

FRR_BIN = Path("/usr/lib/frr")
FRR_DAEMONS = ("zebra", "bfdd", "bgpd")
FRR_USER = "frr"  # the daemons drop to it (Debian's build); their vty group is frrvty
BIRD = "bird"
BIRDC = "birdc"

BGP_LINK = "eipctl-bgp"  # the dummy link whose addresses the nodes announce
ROUTER_ASN = 64500
NODE_ASN = 64512
ROUTER4 = "198.51.100.1"  # the router on the node network
ROUTER6 = "2001:db8:1::1"
FAR_NET4 = ipaddress.ip_network("192.0.2.0/24")
FAR_NET6 = ipaddress.ip_network("2001:db8:2::/64")
FAR_ROUTER4 = "192.0.2.1"
FAR_ROUTER6 = "2001:db8:2::1"
FAR_CLIENT4 = "192.0.2.2"
FAR_CLIENT6 = "2001:db8:2::2"
FAR_LINK = "far0"  # the router's link to the far client
BFD_INTERVAL_MS = 100
BFD_MULTIPLIER = 3


def routing_unavailable() -> str | None:
    """Why the routed bed cannot be built here (namespaces, FRR, bird), or None."""
    if (reason := why_unavailable()) is not None:
        return reason
    missing = [str(FRR_BIN / d) for d in FRR_DAEMONS if not (FRR_BIN / d).exists()]
    missing += [p for p in ("vtysh", BIRD, BIRDC, "sha256sum") if shutil.which(p) is None]
    if not (FRR_BIN / "frr-reload.py").exists():
        missing.append(str(FRR_BIN / "frr-reload.py"))
    if missing:
        return f"needs FRR and bird2 (apt-get install frr bird2): missing {', '.join(missing)}"
    try:
        sh("id", FRR_USER)
    except RuntimeError:
        return f"needs FRR's `{FRR_USER}` user (Debian's frr package creates it)"
    return None


def router_peer(name: str, address: str) -> dict[str, Any]:
    """The bed's router as a BGPPeer of every node (one per family: a session carries one),
    with BFD at the router's own interval, short timers and a fast reconnect."""
    return {
        "apiVersion": "eipctl.io/v1alpha1",
        "kind": "BGPPeer",
        "metadata": {"name": name},
        "spec": {
            "peerAddress": address,
            "peerASN": ROUTER_ASN,
            "myASN": NODE_ASN,
            "holdTimeSeconds": 9,
            "keepaliveTimeSeconds": 3,
            "connectTimeSeconds": 1,
            "bfd": {"receiveIntervalMs": BFD_INTERVAL_MS, "transmitIntervalMs": BFD_INTERVAL_MS},
        },
    }
