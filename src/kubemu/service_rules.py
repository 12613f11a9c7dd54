"""The semantic checks a real apiserver makes on a Service (ValidateService and
ValidateLoadBalancerStatus in pkg/apis/core/validation, Kubernetes 1.37), for the fields
eipctl and its users write: ports (1-65535, protocol TCP/UDP/SCTP, names required and
DNS-1123 labels when there are several, unique names, unique port/protocol pairs,
targetPort, nodePort only off ClusterIP), ports required unless headless or ExternalName,
type, sessionAffinity, ipFamilies/ipFamilyPolicy values, externalIPs (valid and not
special), loadBalancerIP, externalTrafficPolicy and internalTrafficPolicy values,
allocateLoadBalancerNodePorts only on LoadBalancer; status ingress ip and hostname
(service_status.py has ipMode). Like every built-in rule (builtin_rules.py), these tolerate
wrong types, since decoding is skipped when kubernetes-validate is missing.
"""

from __future__ import annotations

import json
from typing import Any

from .field_causes import (
    Cause,
    dns1123_label,
    dns1123_subdomain,
    duplicate,
    forbidden,
    invalid,
    invalid_each,
    ip_causes,
    non_special_ip,
    not_supported,
    parse_ip,
    port_name,
    port_num,
    required,
)

Obj = dict[str, Any]

PROTOCOLS = ("SCTP", "TCP", "UDP")
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
IP_FAMILIES = ("IPv4", "IPv6")
FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
TRAFFIC_POLICIES = ("Cluster", "Local")


def _service_port_key(port: Obj) -> str:
    """A duplicate port is shown as Go prints the core.ServicePort key."""
    return (
        f'core.ServicePort{{Name:"", Protocol:{json.dumps(port.get("protocol", ""))}, '
        f"AppProtocol:(*string)(nil), Port:{port.get('port', 0)}, "
        'TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}'
    )


def _service_ports(spec: Obj, stype: Any, headless: bool) -> list[Cause]:
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    causes: list[Cause] = []
    if not ports and not headless and stype != "ExternalName":
        causes.append(required("spec.ports"))
    names: set[str] = set()
    pairs: set[tuple[Any, Any]] = set()
    node_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        at = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append(required(f"{at}.name"))
        elif name:
            causes.extend(invalid_each(f"{at}.name", name, dns1123_label(str(name))))
            if name in names:
                causes.append(duplicate(f"{at}.name", name))
            names.add(name)
        causes.extend(invalid_each(f"{at}.port", port.get("port"), port_num(port.get("port"))))
        proto = port.get("protocol")
        if not proto:
            causes.append(required(f"{at}.protocol"))
        elif proto not in PROTOCOLS:
            causes.append(not_supported(f"{at}.protocol", proto, PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            causes.extend(invalid_each(f"{at}.targetPort", target, port_name(target)))
        elif target is not None:
            causes.extend(invalid_each(f"{at}.targetPort", target, port_num(target)))
        node_port = port.get("nodePort")
        if node_port:
            if stype == "ClusterIP":
                causes.append(
                    forbidden(f"{at}.nodePort", "may not be used when `type` is 'ClusterIP'")
                )
            if (proto, node_port) in node_ports:
                causes.append(duplicate(f"{at}.nodePort", node_port))
            node_ports.add((proto, node_port))
        if (proto, port.get("port")) in pairs:
            causes.append(duplicate(at, _service_port_key(port)))
        pairs.add((proto, port.get("port")))
    return causes


def _externally_accessible(spec: Obj) -> bool:
    stype = spec.get("type")
    return stype in ("LoadBalancer", "NodePort") or (
        stype == "ClusterIP" and bool(spec.get("externalIPs"))
    )


def _service_policies(spec: Obj, stype: Any) -> list[Cause]:
    causes: list[Cause] = []
    affinity = spec.get("sessionAffinity")
    if not affinity:
        causes.append(required("spec.sessionAffinity"))
    elif affinity not in AFFINITIES:
        causes.append(not_supported("spec.sessionAffinity", affinity, AFFINITIES))
    for i, fam in enumerate(spec.get("ipFamilies") or ()):
        if fam not in IP_FAMILIES:
            causes.append(not_supported(f"spec.ipFamilies[{i}]", fam, IP_FAMILIES))
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in FAMILY_POLICIES:
        causes.append(not_supported("spec.ipFamilyPolicy", policy, FAMILY_POLICIES))
    etp = spec.get("externalTrafficPolicy")
    if not _externally_accessible(spec):
        if etp:
            causes.append(
                invalid(
                    "spec.externalTrafficPolicy",
                    etp,
                    "may only be set for externally-accessible services",
                )
            )
    elif not etp:
        causes.append(required("spec.externalTrafficPolicy"))
    elif etp not in TRAFFIC_POLICIES:
        causes.append(not_supported("spec.externalTrafficPolicy", etp, TRAFFIC_POLICIES))
    itp = spec.get("internalTrafficPolicy")
    if itp is None and stype in ("ClusterIP", "LoadBalancer", "NodePort"):
        causes.append(required("spec.internalTrafficPolicy"))
    elif itp is not None and itp not in TRAFFIC_POLICIES:
        causes.append(not_supported("spec.internalTrafficPolicy", itp, TRAFFIC_POLICIES))
    alloc = spec.get("allocateLoadBalancerNodePorts")
    if alloc is not None and stype != "LoadBalancer":
        causes.append(
            forbidden(
                "spec.allocateLoadBalancerNodePorts",
                "may only be used when `type` is 'LoadBalancer'",
            )
        )
    return causes


def service_causes(svc: Obj) -> list[Cause]:
    """ValidateService, for the fields eipctl and its users write."""
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return [required("spec.type")]
    stype = spec.get("type")
    cluster_ips = spec.get("clusterIPs") or []
    headless = cluster_ips == ["None"] or spec.get("clusterIP") == "None"
    causes = _service_ports(spec, stype, headless)
    if not stype:
        causes.append(required("spec.type"))
    elif stype not in SERVICE_TYPES:
        causes.append(not_supported("spec.type", stype, SERVICE_TYPES))
    elif stype == "ExternalName":
        cname = str(spec.get("externalName") or "").removesuffix(".")
        if not cname:
            causes.append(required("spec.externalName"))
        else:
            causes.extend(invalid_each("spec.externalName", cname, dns1123_subdomain(cname)))
    elif stype in ("LoadBalancer", "NodePort") and headless:
        causes.append(
            invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {stype} services")
        )
    causes.extend(_service_policies(spec, stype))
    for i, ip in enumerate(spec.get("externalIPs") or ()):
        causes.extend(non_special_ip(f"spec.externalIPs[{i}]", ip))
    lb_ip = spec.get("loadBalancerIP")
    if lb_ip:
        causes.extend(ip_causes("spec.loadBalancerIP", lb_ip))
    for i, ip in enumerate(cluster_ips):
        if not (i == 0 and ip == "None"):
            causes.extend(ip_causes(f"spec.clusterIPs[{i}]", ip))
    causes.extend(ingress_causes(svc))
    return causes


def ingress_causes(svc: Obj) -> list[Cause]:
    """The ip and hostname of each status.loadBalancer.ingress entry (ValidateLoadBalancerStatus;
    ipMode and the type rule are service_status.py's)."""
    status = svc.get("status")
    balancer = status.get("loadBalancer") if isinstance(status, dict) else None
    ingress = balancer.get("ingress") if isinstance(balancer, dict) else None
    causes: list[Cause] = []
    for i, entry in enumerate(ingress if isinstance(ingress, list) else ()):
        if not isinstance(entry, dict):
            continue
        at = f"status.loadBalancer.ingress[{i}]"
        if entry.get("ip"):
            causes.extend(ip_causes(f"{at}.ip", entry["ip"]))
        host = entry.get("hostname")
        if host and isinstance(host, str):
            causes.extend(invalid_each(f"{at}.hostname", host, dns1123_subdomain(host)))
            if parse_ip(host) is not None:
                causes.append(
                    invalid(f"{at}.hostname", host, "must be a DNS name, not an IP address")
                )
    return causes
