"""What a user checks from outside, as reusable waits and assertions for the scenarios."""

from __future__ import annotations

import collections
import ipaddress
from collections.abc import Iterable
from typing import Any

from eipctl.sandbox.testbed.processes import wait_for

Obj = dict[str, Any]


def placement(claims: Iterable[Obj]) -> dict[str, str]:
    """{ip: node} of the claims placed on a node."""
    return {c["spec"]["ip"]: c["spec"]["nodeName"] for c in claims if c["spec"].get("nodeName")}


def bound(claim: Obj | None) -> str | None:
    """The node a claim is Bound on (placed there and confirmed by that node's controller)."""
    if claim is None:
        return None
    status = claim.get("status") or {}
    node = claim["spec"].get("nodeName")
    if node and status.get("phase") == "Bound" and status.get("boundNode") == node:
        return str(node)
    return None


def create_services(bed: Any, names: Iterable[str], **kwargs: Any) -> None:
    for name in names:
        bed.kube.create_service(name, **kwargs)


def wait_for_ips(bed: Any, names: Iterable[str], timeout: float = 30.0) -> dict[str, str]:
    """{service: its first external IP}, once every Service has one."""
    names = list(names)

    def all_have() -> dict[str, str] | None:
        got = {}
        for svc in bed.kube.services():
            ips = (svc.get("spec") or {}).get("externalIPs") or []
            if svc["metadata"]["name"] in names and ips:
                got[svc["metadata"]["name"]] = ips[0]
        return got if len(got) == len(names) else None

    return dict(
        wait_for(all_have, timeout, interval=0.1, what=f"external IPs on {len(names)} Services")
    )


def spread_services(bed: Any, prefix: str, count: int = 6) -> dict[str, str]:
    """Services ``<prefix>-0`` .. ``<prefix>-<count-1>``, once each is Bound and answered by
    its node; returns {ip: node}."""
    names = [f"{prefix}-{i}" for i in range(count)]
    create_services(bed, names)
    placed = wait_bound(bed, wait_for_ips(bed, names).values())
    wait_answered_by(bed, placed)
    return placed


def wait_bound(bed: Any, ips: Iterable[str], timeout: float = 30.0) -> dict[str, str]:
    """{ip: node} once every IP's claim is Bound."""
    ips = set(ips)

    def all_bound() -> dict[str, str] | None:
        got = {}
        for claim in bed.kube.claims():
            node = bound(claim)
            if claim["spec"]["ip"] in ips and node:
                got[claim["spec"]["ip"]] = node
        return got if set(got) == ips else None

    return dict(wait_for(all_bound, timeout, interval=0.1, what=f"{len(ips)} claims Bound"))


def wait_answered_by(bed: Any, expected: dict[str, str], timeout: float = 15.0) -> None:
    """Until the client reaches every IP and each is answered by the node expected for it."""
    wrong: dict[str, str | None] = {}

    def all_right() -> bool:
        answers = bed.client.ask_all(expected, timeout=0.5)
        wrong.clear()
        wrong.update({ip: who for ip, who in answers.items() if who != expected[ip]})
        return not wrong

    try:
        wait_for(all_right, timeout, interval=0.1, what="every IP answered by its node")
    except TimeoutError as exc:
        raise AssertionError(f"answered by the wrong node or not at all: {wrong}") from exc


def per_node(placed: dict[str, str]) -> dict[str, int]:
    return dict(collections.Counter(placed.values()))


def ips_held_twice(claims: Iterable[Obj]) -> list[str]:
    """IPs that more than one claim records (must never happen: names derive from IPs)."""
    counts = collections.Counter(str(ipaddress.ip_address(c["spec"]["ip"])) for c in claims)
    return [ip for ip, n in counts.items() if n > 1]


def wait_moved_off(
    bed: Any, ips: Iterable[str], node: str, timeout: float = 15.0
) -> dict[str, str]:
    """{ip: node} of all Bound claims, once each of `ips` is Bound on a node other than `node`."""
    ips = list(ips)

    def moved() -> dict[str, str] | None:
        placed = placement(c for c in bed.kube.claims() if bound(c))
        return placed if all(placed.get(ip) not in (None, node) for ip in ips) else None

    return dict(wait_for(moved, timeout, interval=0.05, what=f"{ips} bound off {node}"))


def wait_node_keys(bed: Any, event: str, offsets: dict[str, int], timeout: float) -> None:
    """Until every scheduler replica has logged ``event`` (``node_key.learned`` or
    ``node_key.forgotten``) for every node since its log ``offsets``."""
    wait_for(
        lambda: all(
            f"event='{event}' node='{n}'" in s.log_since(offsets.get(s.name, 0))
            for s in bed.schedulers
            for n in bed.node_names
        ),
        timeout,
        what=f"every scheduler replica's {event} for every node",
    )


def forget_node_keys(bed: Any, namespace: str) -> dict[str, int]:
    """Delete the node-key Secrets (the schedulers go back to the cluster key: what an
    operator does before rolling controllers back, docs/operations.md "Upgrade") and wait
    until every replica has dropped every key. Returns the schedulers' log offsets from
    before, for a later `wait_node_keys(..., "node_key.learned", ...)`."""
    offsets = {s.name: s.log_size() for s in bed.schedulers}
    bed.kube.delete_node_key_secrets(namespace)
    wait_node_keys(bed, "node_key.forgotten", offsets, 10)
    return offsets
