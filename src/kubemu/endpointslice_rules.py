"""The semantic checks a real apiserver makes on an EndpointSlice (pkg/apis/discovery/
validation, Kubernetes 1.37), worded as Kubernetes words them; causes of a 422 Invalid.
Types are decoding's (builtin_schema.py); these tolerate wrong ones.

- addressType: required; IPv4, IPv6 or FQDN (its immutability on update is not checked).
- endpoints: at most 1,000; each with 1 to 100 addresses, each an address of the slice's
  type (FQDN: a DNS-1123 subdomain); nodeName a DNS-1123 subdomain.
- ports: at most 100.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from .field_causes import Cause, dns1123_subdomain, invalid, invalid_each, not_supported, required

Obj = dict[str, Any]

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 100


def _too_many(path: str, have: int, most: int) -> Cause:
    return {
        "reason": "FieldValueTooMany",
        "field": path,
        "message": f"Too many: {have}: must have at most {most} items",
    }


def _address_causes(path: str, address: Any, address_type: str) -> list[Cause]:
    if address_type == "FQDN":
        return invalid_each(path, address, dns1123_subdomain(str(address)))
    want = ipaddress.IPv4Address if address_type == "IPv4" else ipaddress.IPv6Address
    try:
        ok = isinstance(ipaddress.ip_address(str(address)), want)
    except ValueError:
        ok = False
    return [] if ok else [invalid(path, address, f"must be a valid {address_type} address")]


def _endpoint_causes(path: str, endpoint: Obj, address_type: str) -> list[Cause]:
    causes: list[Cause] = []
    addresses = endpoint.get("addresses")
    addresses = addresses if isinstance(addresses, list) else []
    if not addresses:
        causes.append(required(f"{path}.addresses", "must contain at least 1 address"))
    elif len(addresses) > MAX_ADDRESSES:
        causes.append(_too_many(f"{path}.addresses", len(addresses), MAX_ADDRESSES))
    elif address_type in ADDRESS_TYPES:
        for i, address in enumerate(addresses):
            causes += _address_causes(f"{path}.addresses[{i}]", address, address_type)
    node = endpoint.get("nodeName")
    if isinstance(node, str) and node:
        causes += invalid_each(f"{path}.nodeName", node, dns1123_subdomain(node))
    return causes


def endpointslice_causes(obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    address_type = obj.get("addressType")
    if not address_type:
        causes.append(required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        causes.append(not_supported("addressType", address_type, ADDRESS_TYPES))
    endpoints = obj.get("endpoints")
    endpoints = endpoints if isinstance(endpoints, list) else []
    if len(endpoints) > MAX_ENDPOINTS:
        causes.append(_too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
    else:
        for i, endpoint in enumerate(endpoints):
            if isinstance(endpoint, dict):
                causes += _endpoint_causes(f"endpoints[{i}]", endpoint, str(address_type))
    ports = obj.get("ports")
    if isinstance(ports, list) and len(ports) > MAX_PORTS:
        causes.append(_too_many("ports", len(ports), MAX_PORTS))
    return causes
