"""The semantic checks a real apiserver makes on the objects eipctl and its users write
(pkg/apis/core/validation, pkg/apis/coordination/validation and apimachinery's metadata
validation, Kubernetes 1.37), worded as Kubernetes words them. Failures are causes of a 422
Invalid. Everything here runs after decoding (builtin_schema.py) but tolerates wrong types,
since decoding is skipped when kubernetes-validate is missing.

- Names: DNS-1035 label for Services, DNS-1123 label for Namespaces, path segment for RBAC
  objects, DNS-1123 subdomain for every other kind.
- Metadata of every object (custom resources too): label keys (qualified names) and values,
  annotation keys and their total size (256 KiB), finalizer names (qualified names).
- Service: ports (1-65535, protocol TCP/UDP/SCTP, names required and DNS-1123 labels when
  there are several, unique names, unique port/protocol pairs, targetPort, nodePort only off
  ClusterIP), ports required unless headless or ExternalName, type, sessionAffinity,
  ipFamilies/ipFamilyPolicy values, externalIPs (valid and not special), loadBalancerIP,
  externalTrafficPolicy and internalTrafficPolicy values, allocateLoadBalancerNodePorts only
  on LoadBalancer; status ingress ip and hostname (service_status.py has ipMode).
- Lease: leaseDurationSeconds > 0, leaseTransitions >= 0 (MicroTime is a decoding matter).
- Event (core/v1): involvedObject.namespace must be the Event's namespace.
- ConfigMap: data keys are config keys, no key in both data and binaryData, 1 MiB in total.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]
Cause = dict[str, str]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_PORT_NAME = re.compile(r"^[-a-z0-9]+$")
_HAS_LETTER = re.compile(r"[a-z]")

ANNOTATIONS_MAX_BYTES = 256 * 1024
CONFIGMAP_MAX_BYTES = 1024 * 1024
PROTOCOLS = ("SCTP", "TCP", "UDP")
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
IP_FAMILIES = ("IPv4", "IPv6")
FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
TRAFFIC_POLICIES = ("Cluster", "Local")
_RBAC_GROUP = "rbac.authorization.k8s.io"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = "".join(f"'{e}', " if i == 0 else f" or '{e}', " for i, e in enumerate(examples))
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character",
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
    "example.com",
)
_LABEL_MSG = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
    "my-name",
    "123-abc",
)
_DNS1035_MSG = _regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character",
    "[a-z]([-a-z0-9]*[a-z0-9])?",
    "my-name",
    "abc-123",
)
_QNAME_MSG = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]",
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?",
    "MyValue",
    "my_value",
    "12345",
)
_CONFIG_KEY_MSG = _regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
    "[-._a-zA-Z0-9]+",
    "key.name",
    "KEY_NAME",
    "key-name",
)
_BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def _show(value: Any) -> str:
    """A value in a message, as Go's field errors print it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "null" if value is None else json.dumps(value)


def invalid(path: str, value: Any, msg: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "field": path,
        "message": f"Invalid value: {_show(value)}: {msg}",
    }


def required(path: str, detail: str = "") -> Cause:
    return {
        "reason": "FieldValueRequired",
        "field": path,
        "message": f"Required value: {detail}" if detail else "Required value",
    }


def not_supported(path: str, value: Any, allowed: tuple[str, ...]) -> Cause:
    shown = ", ".join(json.dumps(a) for a in allowed)
    return {
        "reason": "FieldValueNotSupported",
        "field": path,
        "message": f"Unsupported value: {_show(value)}: supported values: {shown}",
    }


def forbidden(path: str, msg: str) -> Cause:
    return {"reason": "FieldValueForbidden", "field": path, "message": f"Forbidden: {msg}"}


def duplicate(path: str, value: Any) -> Cause:
    shown = value if isinstance(value, str) and value.startswith("core.") else _show(value)
    return {"reason": "FieldValueDuplicate", "field": path, "message": f"Duplicate value: {shown}"}


# ---- apimachinery's string checks (each returns the messages, [] when valid) ----


def dns1123_label(value: str) -> list[str]:
    msgs = ["must be no more than 63 characters"] if len(value) > 63 else []
    return msgs + ([] if _DNS1123_LABEL.match(value) else [_LABEL_MSG])


def dns1123_subdomain(value: str) -> list[str]:
    msgs = ["must be no more than 253 characters"] if len(value) > 253 else []
    return msgs + ([] if _DNS1123_SUBDOMAIN.match(value) else [_SUBDOMAIN_MSG])


def dns1035_label(value: str) -> list[str]:
    msgs = ["must be no more than 63 characters"] if len(value) > 63 else []
    return msgs + ([] if _DNS1035_LABEL.match(value) else [_DNS1035_MSG])


def path_segment(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _QNAME_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.match(name):
        errs.append("name part " + _QNAME_MSG)
    return errs


def label_value(value: str) -> list[str]:
    msgs = ["must be no more than 63 characters"] if len(value) > 63 else []
    return msgs + ([] if _LABEL_VALUE.match(value) else [_LABEL_VALUE_MSG])


def config_key(value: str) -> list[str]:
    msgs = ["must be no more than 253 characters"] if len(value) > 253 else []
    if not _CONFIG_KEY.match(value):
        msgs.append(_CONFIG_KEY_MSG)
    if value in (".", ".."):
        msgs.append(f"must not be '{value}'")
    elif value.startswith(".."):
        msgs.append("must not start with '..'")
    return msgs


def port_num(value: Any) -> list[str]:
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535
    return [] if ok else ["must be between 1 and 65535, inclusive"]


def port_name(value: str) -> list[str]:
    errs = ["must be no more than 15 characters"] if len(value) > 15 else []
    if not _PORT_NAME.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif not _HAS_LETTER.search(value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _parse_ip(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not isinstance(value, str) or "%" in value:
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def ip_causes(path: str, value: Any) -> list[Cause]:
    """IsValidIP for the legacy IP fields: parsable, no zone."""
    return [] if _parse_ip(value) is not None else [invalid(path, value, _BAD_IP)]


def non_special_ip(path: str, value: Any) -> list[Cause]:
    """ValidateNonSpecialIP (external IPs, endpoints): not unspecified, loopback, link-local
    unicast or link-local multicast."""
    ip = _parse_ip(value)
    if ip is None:
        return [invalid(path, value, _BAD_IP)]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    causes = []
    if ip.is_unspecified:
        causes.append(invalid(path, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        causes.append(
            invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)")
        )
    if ip.is_link_local and not ip.is_multicast:
        causes.append(
            invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")
        )
    if ip in _V4_LL_MCAST or ip in _V6_LL_MCAST:
        causes.append(
            invalid(
                path,
                value,
                "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            )
        )
    return causes


_V4_LL_MCAST = ipaddress.ip_network("224.0.0.0/24")
_V6_LL_MCAST = ipaddress.ip_network("ff02::/16")


def _each(path: str, value: Any, msgs: list[str]) -> list[Cause]:
    return [invalid(path, value, m) for m in msgs]


# ---- names and metadata ----


def name_causes(rt: ResourceType, name: str) -> list[Cause]:
    """metadata.name as the kind's ValidateNameFunc judges it."""
    if rt.from_crd or rt.key not in (("", "services"), ("", "namespaces")):
        check = path_segment if rt.group == _RBAC_GROUP else dns1123_subdomain
    else:
        check = dns1035_label if rt.key == ("", "services") else dns1123_label
    return _each("metadata.name", name, check(name))


def metadata_causes(meta: Obj) -> list[Cause]:
    """Labels, annotations and finalizers (ValidateObjectMeta), for every kind."""
    causes: list[Cause] = []
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            causes.extend(_each("metadata.labels", k, qualified_name(k)))
            if not isinstance(v, str):
                causes.append(invalid("metadata.labels", v, "values must be strings"))
            else:
                causes.extend(_each("metadata.labels", v, label_value(v)))
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = 0
        for k, v in annotations.items():
            causes.extend(_each("metadata.annotations", k, qualified_name(k.lower())))
            size += len(k.encode()) + (len(v.encode()) if isinstance(v, str) else 0)
        if size > ANNOTATIONS_MAX_BYTES:
            causes.append(
                {
                    "reason": "FieldValueTooLong",
                    "field": "metadata.annotations",
                    "message": f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
                }
            )
    for fin in meta.get("finalizers") or ():
        if isinstance(fin, str):
            causes.extend(_each("metadata.finalizers", fin, qualified_name(fin)))
    return causes


# ---- kinds ----


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
            causes.extend(_each(f"{at}.name", name, dns1123_label(str(name))))
            if name in names:
                causes.append(duplicate(f"{at}.name", name))
            names.add(name)
        causes.extend(_each(f"{at}.port", port.get("port"), port_num(port.get("port"))))
        proto = port.get("protocol")
        if not proto:
            causes.append(required(f"{at}.protocol"))
        elif proto not in PROTOCOLS:
            causes.append(not_supported(f"{at}.protocol", proto, PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            causes.extend(_each(f"{at}.targetPort", target, port_name(target)))
        elif target is not None:
            causes.extend(_each(f"{at}.targetPort", target, port_num(target)))
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
            causes.extend(_each("spec.externalName", cname, dns1123_subdomain(cname)))
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
            causes.extend(_each(f"{at}.hostname", host, dns1123_subdomain(host)))
            if _parse_ip(host) is not None:
                causes.append(
                    invalid(f"{at}.hostname", host, "must be a DNS name, not an IP address")
                )
    return causes


def lease_causes(lease: Obj) -> list[Cause]:
    spec = lease.get("spec")
    if not isinstance(spec, dict):
        return []
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(
            invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0")
        )
    if spec.get("preferredHolder") and not spec.get("strategy"):
        causes.append(
            forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined")
        )
    return causes


def event_causes(event: Obj) -> list[Cause]:
    """legacyValidateEvent (core/v1 Events without eventTime): the involved object's namespace
    must be the Event's (an Event about a cluster-scoped object lives in default)."""
    involved = event.get("involvedObject")
    inv_ns = involved.get("namespace") if isinstance(involved, dict) else None
    ns = (event.get("metadata") or {}).get("namespace", "")
    if event.get("eventTime"):  # a "new" Event: cluster-scoped objects' in default or kube-system
        ok = ns in ("default", "kube-system") if not inv_ns else ns == inv_ns
    else:
        ok = ns in ("", "default") if not inv_ns else ns == inv_ns
    return (
        []
        if ok
        else [invalid("involvedObject.namespace", inv_ns or "", "does not match event.namespace")]
    )


def configmap_causes(cm: Obj) -> list[Cause]:
    data = cm.get("data")
    data = data if isinstance(data, dict) else {}
    binary = cm.get("binaryData")
    binary = binary if isinstance(binary, dict) else {}
    causes: list[Cause] = []
    total = 0
    for key, value in data.items():
        causes.extend(_each(f"data[{key}]", key, config_key(key)))
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(value.encode()) if isinstance(value, str) else 0
    for key, value in binary.items():
        causes.extend(_each(f"binaryData[{key}]", key, config_key(key)))
        total += len(value) * 3 // 4 if isinstance(value, str) else 0
    if total > CONFIGMAP_MAX_BYTES:
        causes.append(
            {
                "reason": "FieldValueTooLong",
                "field": "",
                "message": f"Too long: may not be more than {CONFIGMAP_MAX_BYTES} bytes",
            }
        )
    return causes


_BY_KIND = {
    ("", "services"): service_causes,
    ("coordination.k8s.io", "leases"): lease_causes,
    ("", "events"): event_causes,
    ("", "configmaps"): configmap_causes,
}


def kind_causes(rt: ResourceType, obj: Obj) -> list[Cause]:
    """The kind's own rules (none for kinds eipctl does not write)."""
    check = None if rt.from_crd else _BY_KIND.get(rt.key)
    return check(obj) if check is not None else []
