"""IpClaims as the scheduler reads and writes them: placement views and spec mutations.

The claim vocabulary (field names, constructors, predicates) is `core.claims`; the status
the scheduler writes is `core.claim_status.scheduled_status` / `no_live_node_status`. What
is the scheduler's own is here. The mutations are handed to the serialized writer, which
applies them to the freshest copy of the claim (again after every 409), so each one decides
from what it is given, not from what the scheduler believed when it queued the write:
`place` is a compare-and-set on ``spec.nodeName``: it writes only if the claim is still
where the decision found it. A stale cache, a restarted scheduler or a deposed leader can
therefore never move a claim twice on the strength of one observation.

Policy ``all``: the IP's own claim is marked (``spec.nodeName`` empty, no ``eipctl.io/node``
label, label ``eipctl.io/placement: all``, ``status.phase`` Scheduled, condition
``Scheduled`` True with reason ``AllNodes``), and for every IpNode the claim's pool admits the
scheduler keeps a *per-node claim* (`core.claims.per_node_claim`: ``<claim>.<node>``,
``spec.nodeBound: true``, ``spec.nodeName`` and label = that node, label
``eipctl.io/origin: all-nodes``, owner reference to the IP's claim). Controllers hold their
per-node claims like any claim placed on them, without probing (the IP is shared on purpose).
"""

from __future__ import annotations

from eipctl.core.claims import (
    SERVICES,
    bound_node_of,
    is_all_nodes,
    node_of,
    phase_of,
    pool_of,
    put_node,
)
from eipctl.core.fields import Mutation, Obj, labels_of, name_of
from eipctl.core.naming import LABEL_NODE, LABEL_PLACEMENT, PLACEMENT_ALL
from eipctl.core.placement import ClaimPlacement


def placement_of(obj: Obj) -> ClaimPlacement:
    """The claim as `core.placement` sees it."""
    return ClaimPlacement(
        name=name_of(obj),
        pool=pool_of(obj) or None,
        node=node_of(obj),
        all_nodes=is_all_nodes(obj),
    )


def consistent(obj: Obj) -> bool:
    """True if the node label, the all-nodes mark and the phase agree with spec.nodeName."""
    node = node_of(obj)
    phase = phase_of(obj)
    if labels_of(obj).get(LABEL_NODE, "") != node:
        return False
    if is_all_nodes(obj):
        return not node and phase != "Pending"
    if not node:
        return True
    return phase != "Pending" and not (phase == "Bound" and bound_node_of(obj) != node)


def place(expected_from: str, to_node: str, *, all_nodes: bool = False) -> Mutation:
    """Set spec.nodeName and the node label together, if the claim is still on ``expected_from``.

    ``to_node == expected_from`` repairs the labels without moving the claim.
    """

    def mutate(obj: Obj) -> None:
        if node_of(obj) != expected_from:
            return  # moved by someone else since we decided: leave it
        put_node(obj, to_node)
        labels = obj["metadata"]["labels"]
        if all_nodes:
            labels[LABEL_PLACEMENT] = PLACEMENT_ALL
        else:
            labels.pop(LABEL_PLACEMENT, None)

    return mutate


def set_services(services: list[str]) -> Mutation:
    """spec.services of a scheduler-made claim = the Services that hand-set its IP."""

    def mutate(obj: Obj) -> None:
        obj.setdefault("spec", {})[SERVICES] = sorted(services)

    return mutate
