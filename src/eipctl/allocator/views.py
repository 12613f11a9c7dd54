"""Kubernetes objects <-> the allocator's decision inputs, and the edits it makes to them.

Pure functions on plain dicts: reading a Service / IpClaimPool / IpClaim into the typed
inputs of `core.allocation_inputs`, and the mutation functions the serialized writer applies
to the freshest copy of a Service or IpClaim (so a stale cache never undoes anyone's change).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo, ServiceInfo
from eipctl.core.claims import is_per_node_copy
from eipctl.core.conditions import (
    READY,
    Condition,
    put_condition,
)
from eipctl.core.fields import Mutation, Obj, ResourceError, meta_of, name_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATED_IPS,
    ANNOTATION_CLAIM_SHARING_KEY,
    CONDITION_IN_POOL,
    LABEL_ORIGIN,
    LABEL_POOL,
    ORIGIN_ALLOCATOR,
    POOL_FINALIZER,
    parse_ip,
)
from eipctl.core.pool import IPAddress, Pool, PoolError, find_overlaps
from eipctl.core.resources import MAX_COUNT, IpClaimPool
from eipctl.kube.write_ids import unstamp


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta_of(obj).get("deletionTimestamp"))


def _parse_ips(parts: Iterable[str]) -> tuple[IPAddress, ...]:
    """The parts that are IP addresses (the rest is someone else's malformed entry)."""
    out: list[IPAddress] = []
    for part in parts:
        try:
            out.append(parse_ip(part.strip()))
        except ValueError:
            continue
    return tuple(out)


def recorded_ips(obj: Mapping[str, Any]) -> tuple[IPAddress, ...]:
    """The IPs a Service's allocated-ips annotation records as the allocator's."""
    text = (meta_of(obj).get("annotations") or {}).get(ANNOTATION_ALLOCATED_IPS, "")
    return _parse_ips(text.split(","))


def used_ips(obj: Mapping[str, Any]) -> tuple[IPAddress, ...]:
    """Every IP a Service carries: ``spec.externalIPs`` and ``status.loadBalancer.ingress``."""
    spec = obj.get("spec") or {}
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()
    texts = [str(ip) for ip in spec.get("externalIPs") or ()]
    texts += [str(e.get("ip")) for e in ingress if isinstance(e, Mapping) and e.get("ip")]
    return tuple(dict.fromkeys(_parse_ips(texts)))


def _ports(spec: Mapping[str, Any]) -> frozenset[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for entry in spec.get("ports") or ():
        if isinstance(entry, Mapping):
            try:
                out.add((str(entry.get("protocol") or "TCP"), int(entry.get("port"))))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
    return frozenset(out)


def service_info(obj: Mapping[str, Any]) -> ServiceInfo:
    meta = meta_of(obj)
    spec = obj.get("spec") or {}
    families = tuple(
        {"IPv4": 4, "IPv6": 6}[f] for f in spec.get("ipFamilies") or () if f in ("IPv4", "IPv6")
    )
    recorded = recorded_ips(obj)
    selector = spec.get("selector") or {}
    return ServiceInfo(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        namespace=str(meta.get("namespace", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        ip_families=families,
        recorded=recorded,
        service_type=str(spec.get("type") or "ClusterIP"),
        load_balancer_class=str(spec.get("loadBalancerClass") or ""),
        load_balancer_ip=str(spec.get("loadBalancerIP") or ""),
        ports=_ports(spec),
        local_traffic=spec.get("externalTrafficPolicy") == "Local",
        selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        created=str(meta.get("creationTimestamp") or ""),
        hand_set=tuple(ip for ip in used_ips(obj) if ip not in recorded),
    )


def claim_info(obj: Mapping[str, Any]) -> ClaimInfo | None:
    """None for an object that is not a usable claim (no parsable spec.ip).

    Also None for the per-node copies the scheduler keeps for placement policy ``all``
    (``<claim>.<node>``, same IP): the claim they copy is the record of who holds the IP,
    and a copy coming or going must not be taken for it.
    """
    meta = meta_of(obj)
    if is_per_node_copy(obj):
        return None
    spec = obj.get("spec") or {}
    try:
        ip = parse_ip(str(spec.get("ip", "")))
    except ValueError:
        return None
    labels = meta.get("labels") or {}
    return ClaimInfo(
        ip=ip,
        pool=str(labels.get(LABEL_POOL, "")),
        services=tuple(str(s) for s in spec.get("services") or ()),
        owned=labels.get(LABEL_ORIGIN) == ORIGIN_ALLOCATOR,
        sharing_key=str((meta.get("annotations") or {}).get(ANNOTATION_CLAIM_SHARING_KEY, "")),
    )


def pool_infos(objs: Iterable[Mapping[str, Any]]) -> list[PoolInfo]:
    """Parse every pool; an invalid one, or one overlapping an older valid one, is not Ready.

    The older pool (creationTimestamp, then name) keeps serving, so adding a bad pool never
    breaks one that works. Cloud pools (`spec.provider`) are `eipctl nodeips`'s alone: their
    addresses come from the provider, so they are left out here entirely.
    """
    ordered = sorted(objs, key=lambda o: (str(meta_of(o).get("creationTimestamp", "")), name_of(o)))
    accepted: list[Pool] = []
    infos: list[PoolInfo] = []
    for obj in ordered:
        name = name_of(obj)
        if (obj.get("spec") or {}).get("provider"):
            continue
        try:
            typed = IpClaimPool.from_dict(obj)
            spec = typed.spec
            pool = typed.address_pool()
        except (ResourceError, PoolError) as exc:
            infos.append(
                PoolInfo(name=name, pool=None, deleting=is_deleting(obj), problem=str(exc))
            )
            continue
        problem = ""
        for overlap in find_overlaps([*accepted, pool]):
            if overlap.second == name:
                problem = f"overlaps pool {overlap.first!r} (e.g. at {overlap.sample})"
                break
        if not problem:
            accepted.append(pool)
        infos.append(
            PoolInfo(
                name=name,
                pool=pool,
                auto_assign=spec.auto_assign,
                service_selector=spec.service_selector,
                namespace_selector=spec.namespace_selector,
                deleting=is_deleting(obj),
                problem=problem,
                prefix_length=spec.prefix_length,
            )
        )
    return infos


class Refused(Exception):  # noqa: N818 (an outcome, like Conflict)
    """A join the fresh claim no longer allows (its holders or key changed)."""


def join_claim(service: str, key: str) -> Mutation:
    def mutate(obj: Obj) -> None:
        info = claim_info(obj)
        if info is None or not info.owned or not key or info.sharing_key != key:
            raise Refused(f"claim {name_of(obj)} is not shared with key {key!r}")
        if not info.services and not is_deleting(obj):
            raise Refused(f"claim {name_of(obj)} is being released")
        spec = obj.setdefault("spec", {})
        spec["services"] = sorted({*spec.get("services", ()), service})

    return mutate


def set_claim_sharing_key(holder: str, key: str) -> Mutation:
    """Re-key a claim its one holder keeps (the holder's key changed); refused if the claim
    gained holders meanwhile, since their key is the one the IP is shared under now."""

    def mutate(obj: Obj) -> None:
        info = claim_info(obj)
        if info is None or tuple(info.services) != (holder,):
            raise Refused(f"claim {name_of(obj)} is no longer held by {holder} alone")
        meta = obj.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        if key:
            annotations[ANNOTATION_CLAIM_SHARING_KEY] = key
        else:
            annotations.pop(ANNOTATION_CLAIM_SHARING_KEY, None)
        meta["annotations"] = annotations

    return mutate


def leave_claim(service: str) -> Mutation:
    def mutate(obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec["services"] = [s for s in spec.get("services") or () if s != service]

    return mutate


def set_service_ips(desired: Iterable[IPAddress], ours: Iterable[IPAddress]) -> Mutation:
    """spec.externalIPs keeps hand-set entries, drops ours that are not desired, adds desired.

    ``ours`` = every IP the allocator may have put there (recorded, kept, released). A
    LoadBalancer Service gets its IPs in ``status.loadBalancer.ingress`` only (`set_ingress`),
    which is all kube-proxy needs, so clusters that refuse ``spec.externalIPs``
    (DenyServiceExternalIPs, the advice after CVE-2020-8554) work; entries an older allocator
    put there are taken out. The annotation records ours either way.
    """
    want = [str(ip) for ip in desired]
    mine = {str(ip) for ip in ours} | {str(ip) for ip in want}

    def mutate(obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        annotations = dict(meta.get("annotations") or {})
        mine_now = mine | {str(ip) for ip in recorded_ips(obj)}
        spec = obj.setdefault("spec", {})
        in_spec = [] if spec.get("type") == "LoadBalancer" else want
        current = [
            ip for ip in spec.get("externalIPs") or () if ip not in mine_now or ip in in_spec
        ]
        current += [ip for ip in in_spec if ip not in current]
        if current:
            spec["externalIPs"] = current
        else:
            spec.pop("externalIPs", None)
        if want:
            annotations[ANNOTATION_ALLOCATED_IPS] = ",".join(want)
        else:
            annotations.pop(ANNOTATION_ALLOCATED_IPS, None)
        meta["annotations"] = annotations
        if not want:  # nothing of ours left: neither the writer's stamp (an unstamped write)
            unstamp(obj)

    return mutate


def set_ingress(desired: Iterable[IPAddress], ours: Iterable[IPAddress]) -> Mutation:
    """status.loadBalancer.ingress: our entries = desired (LoadBalancer only), others kept.

    Compared by meaning, not literally: an entry of ours that is already there stays as the
    API server stored it (1.30+ defaults ``ipMode: VIP``; a user may have set ``ports``), so
    a reconcile that changes nothing writes nothing.
    """
    want = [str(ip) for ip in desired]
    mine = {str(ip) for ip in ours} | set(want)

    def mutate(obj: Obj) -> None:
        lb_type = (obj.get("spec") or {}).get("type") == "LoadBalancer"
        balancer = (obj.get("status") or {}).get("loadBalancer") or {}
        old = list(balancer.get("ingress") or ())
        keep = set(want) if lb_type else set()
        ingress, seen = [], set()
        for entry in old:
            ip = entry.get("ip") if isinstance(entry, Mapping) else None
            if ip in mine and (ip not in keep or ip in seen):
                continue
            seen.add(ip)
            ingress.append(entry)
        ingress += [{"ip": ip} for ip in want if lb_type and ip not in seen]
        if ingress == old:
            return
        status = obj.setdefault("status", {})
        status["loadBalancer"] = {**balancer, "ingress": ingress} if ingress else {}

    return mutate


def _now() -> datetime:
    return datetime.now(UTC)


def condition_mutation(condition: Condition) -> Mutation:
    """Set one status condition (lastTransitionTime kept when the status did not change)."""

    def mutate(obj: Obj) -> None:
        put_condition(obj.setdefault("status", {}), condition)

    return mutate


def in_pool_condition(reason: str, message: str) -> Condition:
    ok = reason == ""
    return Condition(
        type=CONDITION_IN_POOL,
        status="True" if ok else "False",
        reason=reason or CONDITION_IN_POOL,
        message=message or "the IP lies in its pool",
        last_transition_time=_now(),
    )


def pool_status(info: PoolInfo, allocated: int, free: int, generation: int | None) -> Mutation:
    """IpClaimPool status: counts and the Ready condition (or why not)."""
    if info.deleting:
        cond = ("False", "Deleting", f"waiting for {allocated} allocation(s) to be released")
    elif info.pool is None:
        cond = ("False", "InvalidSpec", info.problem)
    elif info.problem:
        cond = ("False", "Overlap", info.problem)
    else:
        cond = ("True", "Ready", f"{info.pool.size} address(es), {free} free")
    ready = Condition(
        type=READY,
        status=cond[0],  # type: ignore[arg-type]
        reason=cond[1],
        message=cond[2],
        last_transition_time=_now(),
        observed_generation=generation,
    )
    set_ready = condition_mutation(ready)

    def mutate(obj: Obj) -> None:
        status = obj.setdefault("status", {})
        status["allocated"] = allocated
        status["free"] = min(free, MAX_COUNT)
        set_ready(obj)

    return mutate


def set_finalizer(present: bool) -> Mutation:
    def mutate(obj: Obj) -> None:
        meta = obj.setdefault("metadata", {})
        finalizers = [f for f in meta.get("finalizers") or () if f != POOL_FINALIZER]
        if present:
            finalizers.append(POOL_FINALIZER)
        if finalizers != list(meta.get("finalizers") or ()):
            meta["finalizers"] = finalizers

    return mutate
