"""Per-node claims for placement policy ``all``: which should exist (pure).

Under ``all`` every IpNode the pool admits holds the IP, live or not: a node that dies keeps
its per-node claim (it holds nothing while dead, and nothing has to be written when it comes
back). A node that leaves (IpNode deleted) or stops being admitted loses it. Under any other
policy no per-node claims should exist; only those the scheduler made
(``eipctl.io/origin: all-nodes``) are ever removed, and those of a claim leaving policy
``all`` only once it is placed on one node: until then they are *kept* on the nodes its pool
admits (make before break; the caller says which claims are not placed yet).

A claim serving a Service with ``externalTrafficPolicy: Local`` (``local_of``) has copies only
on the admitted nodes where kube-proxy delivers its traffic: those with a ready endpoint, or
with endpoints still serving as they terminate. kube-proxy drops it everywhere else, so a
route or an answer from there would be a black hole; as endpoints come and go, copies (and
with them the nodes' addresses and BGP routes) are created and deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from eipctl.core.claims import is_per_node_copy, per_node_claim, pool_of
from eipctl.core.fields import Obj, name_of
from eipctl.core.local_endpoints import EndpointNodes
from eipctl.core.placement import Cluster, Decision

LocalOf = Callable[[Obj], EndpointNodes | None]


@dataclass(frozen=True)
class PerNodeChanges:
    create: tuple[Obj, ...]
    delete: tuple[Obj, ...]
    kept: tuple[Obj, ...] = ()
    """Copies no policy ``all`` wants any more, kept until their claim is placed."""


def per_node_changes(
    all_nodes_claims: Iterable[Obj],
    existing: Mapping[str, Obj],
    cluster: Cluster,
    unplaced: Iterable[Obj] = (),
    local_of: LocalOf | None = None,
) -> PerNodeChanges:
    """Creates and deletes that make the per-node claims match ``all_nodes_claims``.

    ``all_nodes_claims``: the IPs' own claims whose policy is ``all`` (marked or about to
    be); ``existing``: the per-node claims by name; ``unplaced``: claims of other policies
    not placed on a node yet (or whose placement is still being written): their copies on
    nodes their pool admits stay. ``local_of``: where a claim's Local Services are answered
    (None for a claim without one).
    """
    desired: dict[str, Obj] = {}
    for claim in all_nodes_claims:
        nodes = cluster.admits(pool_of(claim) or None)
        local = local_of(claim) if local_of is not None else None
        if local is not None:
            nodes = nodes & (local.ready | local.terminating)
        for node in sorted(nodes):
            body = per_node_claim(claim, node)
            if body is not None:
                desired[body["metadata"]["name"]] = body
    create = tuple(body for name, body in sorted(desired.items()) if name not in existing)
    if not existing:  # no copies to keep or delete (the common case: no pool of policy all)
        return PerNodeChanges(create, (), ())
    waiting = {name_of(claim): pool_of(claim) or None for claim in unplaced}
    delete: list[Obj] = []
    kept: list[Obj] = []
    for name, obj in sorted(existing.items()):
        if name in desired or not is_per_node_copy(obj):
            continue
        base, _, node = name.partition(".")
        if base in waiting and node in cluster.admits(waiting[base]):
            kept.append(obj)
        else:
            delete.append(obj)
    return PerNodeChanges(create, tuple(delete), tuple(kept))


def copy_missing(d: Decision, claim: Obj, per_node: Mapping[str, Obj], cluster: Cluster) -> bool:
    """A claim to be marked for every node still lacks the per-node claim that is to hold
    its IP once it leaves the live node it is on: the one for that node if its pool admits
    it, else one for any live node the pool admits. Marking it now would take the IP off
    that node before a copy is there to keep it."""
    if not d.all_nodes or not d.from_node or d.from_node not in cluster.live:
        return False
    pool = pool_of(claim) or None
    if d.from_node in cluster.admits(pool):
        holders = [d.from_node]
    else:
        holders = sorted(cluster.candidates(pool))
    names = {name_of(c) for n in holders if (c := per_node_claim(claim, n)) is not None}
    return bool(names) and not names & per_node.keys()
