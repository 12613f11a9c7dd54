"""What a real apiserver writes into a Service's spec (SetDefaults_Service and the Service
REST storage's allocators, Kubernetes 1.37), on every create and update but /status:

- ``type: ClusterIP``, ``sessionAffinity: None`` (``ClientIP`` gets a 10800 s timeout),
  port ``protocol: TCP`` and ``targetPort`` = ``port``;
- ``externalTrafficPolicy: Cluster`` on externally accessible Services (NodePort,
  LoadBalancer, ClusterIP with externalIPs), ``internalTrafficPolicy: Cluster`` on ClusterIP,
  NodePort and LoadBalancer, ``allocateLoadBalancerNodePorts: true`` on LoadBalancer;
- ``ipFamilyPolicy`` (``SingleStack``) and ``ipFamilies`` (``IPv4``; both families for the
  dual-stack policies) and one cluster IP per family, from 10.96.0.0/12 and
  fd00:10:96::/108 (the emulated cluster is dual-stack capable, IPv4 first);
- a ``nodePort`` (30000-32767, unique per protocol across Services) for each port of a
  NodePort Service and of a LoadBalancer that allocates node ports, and a
  ``healthCheckNodePort`` for a LoadBalancer with ``externalTrafficPolicy: Local``.

On update the allocated values (cluster IPs, families, node ports) are kept when the new spec
omits them, and the type-dependent ones are dropped when the type no longer wants them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from . import errors

Obj = dict[str, Any]
SERVICE_CIDRS = {
    "IPv4": ipaddress.ip_network("10.96.0.0/12"),
    "IPv6": ipaddress.ip_network("fd00:10:96::/108"),
}
NODE_PORTS = range(30000, 32768)
_DUAL = ("PreferDualStack", "RequireDualStack")


def _ports(spec: Obj) -> list[Obj]:
    return [p for p in spec.get("ports") or [] if isinstance(p, dict)]


def _wants_node_ports(spec: Obj) -> bool:
    stype = spec.get("type")
    return stype == "NodePort" or (
        stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False
    )


def _simple_defaults(spec: Obj) -> None:
    spec.setdefault("type", "ClusterIP")
    stype = spec["type"]
    affinity = spec.setdefault("sessionAffinity", "None")
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    for port in _ports(spec):
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    accessible = stype in ("NodePort", "LoadBalancer") or (
        stype == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if accessible and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if (
        stype in ("ClusterIP", "NodePort", "LoadBalancer")
        and spec.get("internalTrafficPolicy") is None
    ):
        spec["internalTrafficPolicy"] = "Cluster"
    if stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


def _family_of(ip: str) -> str | None:
    try:
        return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"
    except ValueError:
        return None


def _families(spec: Obj) -> None:
    """ipFamilyPolicy and ipFamilies, from what the user set (families, policy, cluster IPs)."""
    policy = spec.get("ipFamilyPolicy")
    families = [f for f in spec.get("ipFamilies") or [] if f in SERVICE_CIDRS]
    if not families:
        given = [_family_of(ip) for ip in spec.get("clusterIPs") or [spec.get("clusterIP") or ""]]
        families = [f for f in given if f]
    if not families:
        families = ["IPv4"]
    if policy in _DUAL and len(families) == 1:
        families.append("IPv6" if families[0] == "IPv4" else "IPv4")
    spec.setdefault("ipFamilyPolicy", "SingleStack" if len(families) == 1 else "RequireDualStack")
    if not spec.get("ipFamilies"):
        spec["ipFamilies"] = families


def _cluster_ips(spec: Obj, used: set[str]) -> None:
    if spec.get("clusterIP") == "None" or spec.get("clusterIPs") == ["None"]:
        spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
        return
    ips = list(spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else []))
    for family in spec.get("ipFamilies") or ["IPv4"]:
        if family in SERVICE_CIDRS and not any(_family_of(ip) == family for ip in ips):
            ips.append(_free_ip(SERVICE_CIDRS[family], used))
    spec["clusterIPs"] = ips
    spec["clusterIP"] = ips[0]


def _free_ip(net: ipaddress.IPv4Network | ipaddress.IPv6Network, used: set[str]) -> str:
    for i, host in enumerate(net.hosts()):
        ip = str(host)
        if i > 0 and ip not in used:  # the first address is the kubernetes Service's
            used.add(ip)
            return ip
    raise errors.ApiError(500, "service IP range exhausted")


def _node_ports(spec: Obj, used: set[tuple[str, int]]) -> None:
    if _wants_node_ports(spec):
        for port in _ports(spec):
            if not port.get("nodePort"):
                port["nodePort"] = _free_port(str(port.get("protocol", "TCP")), used)
    if (
        spec.get("type") == "LoadBalancer"
        and spec.get("externalTrafficPolicy") == "Local"
        and not spec.get("healthCheckNodePort")
    ):
        spec["healthCheckNodePort"] = _free_port("TCP", used)


def _free_port(protocol: str, used: set[tuple[str, int]]) -> int:
    for n in NODE_PORTS:
        if (protocol, n) not in used:
            used.add((protocol, n))
            return n
    raise errors.ApiError(500, "node port range exhausted")


def _keep_allocated(spec: Obj, old: Obj) -> None:
    """An update that omits allocated values keeps them (patchAllocatedValues); values the new
    type does not allow are dropped when unchanged (dropTypeDependentFields)."""
    if spec.get("type") == "ExternalName":
        for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if spec.get(k) == old.get(k):
                spec.pop(k, None)
    else:
        for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(k) and old.get(k):
                spec[k] = old[k]
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in _ports(old)}
    for port in _ports(spec):
        before = old_ports.get((port.get("port"), port.get("protocol", "TCP")))
        if (
            _wants_node_ports(spec)
            and not port.get("nodePort")
            and before
            and before.get("nodePort")
        ):
            port["nodePort"] = before["nodePort"]
        elif (
            not _wants_node_ports(spec)
            and before
            and port.get("nodePort") == before.get("nodePort")
        ):
            port.pop("nodePort", None)
    stype = spec.get("type")
    if stype == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local":
        if not spec.get("healthCheckNodePort") and old.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old["healthCheckNodePort"]
    elif spec.get("healthCheckNodePort") == old.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if stype != "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") == old.get(
        "allocateLoadBalancerNodePorts"
    ):
        spec.pop("allocateLoadBalancerNodePorts", None)
    accessible = stype in ("NodePort", "LoadBalancer") or (
        stype == "ClusterIP" and bool(spec.get("externalIPs"))
    )
    if not accessible and spec.get("externalTrafficPolicy") == old.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


def apply_defaults(spec: Obj, old: Obj | None, others: Iterable[Obj]) -> None:
    """Default and allocate in place; `old` is the stored spec on update, `others` the specs
    of the other Services (their cluster IPs and node ports are taken)."""
    if old is not None:
        _keep_allocated(spec, old)
    _simple_defaults(spec)
    if spec["type"] == "ExternalName":
        return
    used_ips: set[str] = set()
    used_ports: set[tuple[str, int]] = set()
    for other in others:
        used_ips.update(ip for ip in other.get("clusterIPs") or () if isinstance(ip, str))
        for port in _ports(other):
            if port.get("nodePort"):
                used_ports.add((str(port.get("protocol", "TCP")), port["nodePort"]))
        if other.get("healthCheckNodePort"):
            used_ports.add(("TCP", other["healthCheckNodePort"]))
    _families(spec)
    _cluster_ips(spec, used_ips)
    _node_ports(spec, used_ports)
