"""Where a Local Service's traffic could be answered: its endpoints' nodes, and which of them
are live, as the scheduler weighs them (`core.local_endpoints`). Pure."""

from __future__ import annotations

from datetime import datetime

from eipctl.core.fields import Obj, meta_of, name_of
from eipctl.core.local_endpoints import SERVICE_NAME_LABEL, endpoint_nodes
from eipctl.core.naming import natural_key
from eipctl.core.pool import IPAddress
from eipctl.plugin.nodes import node_row
from eipctl.plugin.snapshot import Snapshot


def endpoints_text(snapshot: Snapshot, service: Obj, ip: IPAddress, now: datetime) -> str:
    """One sentence: the nodes with a ready (or terminating) endpoint, and whether they live."""
    namespace, name = str(meta_of(service).get("namespace", "")), name_of(service)
    slices = [
        s
        for s in snapshot.slices
        if meta_of(s).get("namespace") == namespace
        and (meta_of(s).get("labels") or {}).get(SERVICE_NAME_LABEL) == name
    ]
    found = endpoint_nodes(slices, ip.version)
    if not found.ready and not found.terminating:
        return (
            f"No ready IPv{ip.version} endpoint on any node (EndpointSlices of {namespace}/{name}"
            f": {len(slices)}): start its pods, or check its selector"
        )
    rows = {name_of(n): node_row(snapshot, n) for n in snapshot.nodes}
    parts = []
    for node in sorted(found.ready | found.terminating, key=natural_key):
        kind = "ready" if node in found.ready else "terminating"
        row = rows.get(node)
        if row is None:
            state = "no IpNode (no eipctl controller there)"
        elif row.live != "True":
            state = "fenced" if row.fenced else f"not live ({row.live_reason or 'unknown'})"
        elif row.eligible != "yes":
            state = f"excluded ({row.eligible})"
        else:
            state = "live"
        parts.append(f"{node}: {kind} endpoint, node {state}")
    return "Endpoints: " + "; ".join(parts)
