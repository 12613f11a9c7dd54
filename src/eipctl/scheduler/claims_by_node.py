"""The claims placement keeps on each node, as an index of the claim cache: what lets a
node's death be planned from its own claims and the others' counts (`Placer.failover`)
instead of a walk of every claim."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from eipctl.core.claims import is_node_bound, node_of
from eipctl.core.fields import Obj

NODE_INDEX = "node"
"""The IpClaim informer's index: the node a claim of placement's is on."""


def placed_node(obj: Obj) -> Iterable[str]:
    """`NODE_INDEX`'s function. A node-bound claim (policy ``all``'s copies, node IPs) is
    not placement's: it never moves and counts for no node's load, as in `core.placement`."""
    if is_node_bound(obj):
        return ()
    node = node_of(obj)
    return (node,) if node else ()


class ClaimsByNode(Protocol):
    """The claim cache's side `Placer.failover` reads (an `Informer` with `NODE_INDEX`)."""

    def get(self, key: str) -> Obj | None: ...

    def by_index(self, index: str, value: str) -> list[Obj]: ...

    def index_count(self, index: str, value: str) -> int: ...
