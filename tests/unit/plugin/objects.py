"""Literal API objects for the plugin's tests: Services, pools, claims, IpNodes, Events."""

from __future__ import annotations

from typing import Any

from eipctl.core.naming import claim_name_for

T0 = "2026-01-01T00:00:00Z"


def pool(
    name: str,
    cidr: str = "198.51.100.0/28",
    *,
    created: str = T0,
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if deleting:
        meta |= {"deletionTimestamp": T0, "finalizers": ["eipctl.io/pool-protection"]}
    return {"metadata": meta, "spec": {"cidr": cidr, **spec}}


def service(
    name: str,
    namespace: str = "shop",
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    ports: tuple[int, ...] = (80,),
    ips: tuple[str, ...] = (),
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "creationTimestamp": T0,
        "annotations": dict(annotations or {}),
        "labels": dict(labels or {}),
    }
    if ips:
        meta["annotations"]["eipctl.io/allocated-ips"] = ",".join(ips)
    body = {"ports": [{"port": p, "protocol": "TCP"} for p in ports], **spec}
    if ips:
        body["externalIPs"] = list(ips)
    return {"metadata": meta, "spec": body}


def auto(name: str, namespace: str = "shop", **kw: Any) -> dict[str, Any]:
    annotations = {"external-ip": "auto", **kw.pop("annotations", {})}
    return service(name, namespace, annotations=annotations, **kw)


def claim(
    ip: str,
    pool_name: str,
    *services: str,
    node: str = "",
    phase: str = "Pending",
    bound: str = "",
    conditions: tuple[dict[str, Any], ...] = (),
    sharing_key: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": claim_name_for(ip),
        "creationTimestamp": T0,
        "labels": {"eipctl.io/pool": pool_name, "eipctl.io/origin": "allocator"},
    }
    if sharing_key:
        meta["annotations"] = {"eipctl.io/sharing-key": sharing_key}
    spec: dict[str, Any] = {"ip": ip, "services": list(services)}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": list(conditions)}
    if bound:
        status["boundNode"] = bound
    return {"metadata": meta, "spec": spec, "status": status}


def condition(
    type_: str, status: str, reason: str, message: str = "", when: str = T0
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
    }


def ipnode(
    name: str,
    *,
    live: str = "True",
    reason: str = "Replying",
    labels: dict[str, str] | None = None,
    heartbeat: str = T0,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {},
        "status": {
            "heartbeat": 3,
            "lastHeartbeatTime": heartbeat,
            "conditions": [condition("Live", live, reason)],
        },
    }


def event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    *,
    namespace: str = "",
    when: str = T0,
    type_: str = "Normal",
    source: str = "eipctl-scheduler",
    ident: str = "",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": ident or f"{name}.{reason}.{when}",
            "namespace": namespace or "default",
        },
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": source},
        "lastTimestamp": when,
        "count": 1,
    }
