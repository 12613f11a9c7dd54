"""Per-node claims for placement policy ``all``: which should exist (pure).

Under ``all`` every IpNode the pool admits holds the IP, live or not: a node that dies keeps
its per-node claim (it holds nothing while dead, and nothing has to be written when it comes
back). A node that leaves (IpNode deleted) or stops being admitted loses it. Under any other
policy no per-node claims should exist; only those the scheduler made
(``eipctl.io/origin: all-nodes``) are ever removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eipctl.core.claims import is_per_node_copy, per_node_claim, pool_of
from eipctl.core.fields import Obj
from eipctl.core.placement import Cluster


@dataclass(frozen=True)
class PerNodeChanges:
    create: tuple[Obj, ...]
    delete: tuple[Obj, ...]


def per_node_changes(
    all_nodes_claims: Iterable[Obj],
    existing: Mapping[str, Obj],
    cluster: Cluster,
) -> PerNodeChanges:
    """Creates and deletes that make the per-node claims match ``all_nodes_claims``.

    ``all_nodes_claims``: the IPs' own claims that policy ``all`` marks (empty under other
    policies); ``existing``: the per-node claims by name.
    """
    desired: dict[str, Obj] = {}
    for base in all_nodes_claims:
        for node in sorted(cluster.admits(pool_of(base) or None)):
            body = per_node_claim(base, node)
            if body is not None:
                desired[body["metadata"]["name"]] = body
    create = tuple(body for name, body in sorted(desired.items()) if name not in existing)
    delete = tuple(
        obj
        for name, obj in sorted(existing.items())
        if name not in desired and is_per_node_copy(obj)
    )
    return PerNodeChanges(create, delete)
