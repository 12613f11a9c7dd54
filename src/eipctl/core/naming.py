"""Names eipctl gives to things: IpClaim names derived from IPs, label and annotation keys.

An IpClaim is named after its IP so that creating it is an atomic reservation (AlreadyExists
means taken) and no stale cache can ever create a second claim for the same IP.

The scheme is injective and every name is a valid DNS-1123 subdomain (lowercase, starts and
ends with an alphanumeric, at most 253 characters):

- IPv4: dotted quad, ``.`` -> ``-``: ``203.0.113.7`` -> ``203-0-113-7``.
- IPv6: RFC 5952 compressed form (lowercase, longest run of zero groups as ``::``), ``:`` ->
  ``-``. Where ``::`` touches an end of the text a ``0`` is written on that side, so the name
  never starts or ends with ``-``: ``2001:db8::7`` -> ``2001-db8--7``, ``::1`` -> ``0--1``,
  ``2001:db8::`` -> ``2001-db8--0``, ``::`` -> ``0--0``. (RFC 5952 never writes a zero group
  next to ``::``, so the added ``0`` cannot be confused with a real one.)
- IPv4-mapped IPv6 (``::ffff:a.b.c.d``) is rejected: such an address never appears on a link
  (a Service should use the IPv4 address), and Python versions disagree on how to print it.
- Scoped IPv6 (``fe80::1%eth0``) is rejected: a zone is not part of an external IP.

IPv4 and IPv6 names cannot collide: an IPv4 name has exactly three ``-`` and no ``--``; an
IPv6 name has a ``--`` or seven ``-``. Parsing is strict: a name is accepted only if it is
exactly the name of the address it decodes to, so IP <-> name is a bijection between all
(non-mapped, unscoped) addresses and the set of claim names.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

GROUP: Final = "eipctl.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

LABEL_POOL: Final = "eipctl.io/pool"
"""On an IpClaim: the IpClaimPool the IP came from."""
LABEL_NODE: Final = "eipctl.io/node"
"""On an IpClaim: the IpNode it is placed on, so a controller can watch only its own claims."""
LABEL_ORIGIN: Final = "eipctl.io/origin"
"""On an IpClaim: who made it, and so who may delete it (`ORIGIN_ALLOCATOR`, `ORIGIN_MANUAL`)."""
ORIGIN_ALLOCATOR: Final = "allocator"
"""`LABEL_ORIGIN` of claims the allocator made for annotated Services; only it deletes them."""
ORIGIN_MANUAL: Final = "manual"
"""The scheduler made the claim for a hand-set ``spec.externalIPs`` entry."""
ORIGIN_ALL_NODES: Final = "all-nodes"
"""A per-node claim the scheduler keeps for placement policy ``all``."""
ORIGIN_NODE: Final = "node"
"""A Node's own IP (``eipctl nodeips``)."""
LABEL_PLACEMENT: Final = "eipctl.io/placement"
"""On an IpClaim: ``all`` when placement policy ``all`` marked it for every eligible node."""
PLACEMENT_ALL: Final = "all"
"""`LABEL_PLACEMENT` of a claim that every eligible node holds (placement policy ``all``)."""
ANNOTATION_CLAIM_SHARING_KEY: Final = "eipctl.io/sharing-key"
"""On an IpClaim: the sharing key its Services share (absent = not shareable)."""
CONDITION_IN_POOL: Final = "InPool"
"""IpClaim condition: False while an IP is kept although its pool no longer covers it."""

ANNOTATION_EXTERNAL_IP: Final = "external-ip"
"""On a Service: ``auto`` or a literal IP."""
ANNOTATION_POOL: Final = "external-ip-pool"
"""On a Service: draw only from this IpClaimPool."""
ANNOTATION_SHARING_KEY: Final = "external-ip-sharing-key"
"""On a Service: Services with the same key may share one IP."""
LOAD_BALANCER_CLASS: Final = "eipctl.io/external-ip"
"""``spec.loadBalancerClass`` of LoadBalancer Services eipctl serves without the annotation."""
AUTO: Final = "auto"
"""The ``external-ip`` value that asks for any IP from an autoAssign pool."""
ANNOTATION_ALLOCATED_IPS: Final = "eipctl.io/allocated-ips"
"""On a Service: the ``spec.externalIPs`` entries the allocator put there (comma list), so
hand-set entries are never taken for the allocator's."""
POOL_FINALIZER: Final = "eipctl.io/pool-protection"
"""On an IpClaimPool: kept by the allocator while claims still hold addresses of the pool."""

# Node IPs (``eipctl nodeips``)
LABEL_AUTO_ASSIGN: Final = "eipctl.io/external-ip-auto-assign"
"""On a Node: ``true`` asks for an IP of its own."""
LABEL_NODE_POOL: Final = "eipctl.io/external-ip-pool"
"""On a Node: the IpClaimPool its IP comes from (default: ``--default-node-pool``)."""
LABEL_EXTERNAL_IP: Final = "eipctl.io/external-ip"
"""On a Node: its IP, once live. On a Pod: the IP it wants (pins it; ranks reuse)."""
TAINT_NOT_ATTACHED: Final = "eipctl.io/external-ip-not-attached"
"""Startup taint (NoSchedule) removed once the Node's IP is live."""
ANNOTATION_SLOT: Final = "eipctl.io/external-ip-claim"
"""On a Node: name of the IpClaim that is its IP (the per-node reservation)."""
LABEL_PROVIDER: Final = "eipctl.io/provider"
"""On a node claim of a cloud pool: the provider holding the address (``aws``)."""
ANNOTATION_ALLOCATION_ID: Final = "eipctl.io/allocation-id"
"""On a cloud node claim: the provider's id of the address (EC2 ``eipalloc-...``)."""

MAX_NAME_LENGTH: Final = 253
DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_LABEL_VALUE_LENGTH: Final = 63


def is_dns1123_subdomain(name: str) -> bool:
    """True if ``name`` is valid as the name of most Kubernetes objects, IpClaims included."""
    return len(name) <= MAX_NAME_LENGTH and DNS1123_SUBDOMAIN.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """True if ``value`` may be a label value (node names longer than 63 may not)."""
    return len(value) <= MAX_LABEL_VALUE_LENGTH and LABEL_VALUE.fullmatch(value) is not None


PARSED_IPS: Final = 32768
"""How many parsed IP texts `parse_ip` keeps (5.3 MB when full of IPv4 ones, measured)."""


def parse_ip(ip: str | IPAddress) -> IPAddress:
    """Parse an external IP, rejecting the forms that have no claim name (see module doc)."""
    return _parse_text(ip) if isinstance(ip, str) else _checked(ip)


@functools.lru_cache(maxsize=PARSED_IPS)
def _parse_text(text: str) -> IPAddress:
    """Cached: a term's start parses every Service's and claim's IPs again ([scale]: at
    10,000 Services `ipaddress` was a third of the allocator's rebuild); addresses are
    immutable, and a text that is no IP raises, which is not cached."""
    return _checked(ipaddress.ip_address(text))


def _checked(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            raise ValueError(f"{address}: a scoped IPv6 address cannot be an external IP")
        if address.ipv4_mapped is not None:
            raise ValueError(
                f"{address}: IPv4-mapped IPv6 address; use {address.ipv4_mapped} instead"
            )
    return address


def claim_name_for(ip: str | IPAddress) -> str:
    """The IpClaim name for ``ip``: ``203.0.113.7`` -> ``203-0-113-7``, ``::1`` -> ``0--1``."""
    address = parse_ip(ip)
    if address.version == 4:
        return str(address).replace(".", "-")
    text = address.compressed
    if text.startswith("::"):
        text = "0" + text
    if text.endswith("::"):
        text += "0"
    return text.replace(":", "-")


def ip_for_claim_name(name: str) -> IPAddress:
    """The IP an IpClaim name stands for; ValueError unless ``name`` is exactly its name."""
    if "--" in name or name.count("-") == 7:
        candidate = name.replace("-", ":")
    else:
        candidate = name.replace("-", ".")
    try:
        address = parse_ip(candidate)
    except ValueError:
        raise ValueError(f"{name!r} is not an IpClaim name") from None
    if claim_name_for(address) != name:
        raise ValueError(
            f"{name!r} is not an IpClaim name (the name of {address} is "
            f"{claim_name_for(address)!r})"
        )
    return address


def node_claim_name_for(ip: str | IPAddress, node: str) -> str:
    """Name of the per-node claim for ``ip`` on ``node`` (placement policy ``all``).

    ``<claim name>.<node>``: claim names contain no ``.``, so the first ``.`` splits it back.
    """
    if not is_dns1123_subdomain(node):
        raise ValueError(f"{node!r} is not a valid node name")
    name = f"{claim_name_for(ip)}.{node}"
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"node name {node!r} is too long for a per-node claim name")
    return name


def parse_node_claim_name(name: str) -> tuple[IPAddress, str]:
    """The (IP, node) a per-node claim name stands for; ValueError if it is not one."""
    ip_part, dot, node = name.partition(".")
    if not dot or not is_dns1123_subdomain(node):
        raise ValueError(f"{name!r} is not a per-node IpClaim name")
    return ip_for_claim_name(ip_part), node


_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that puts ``demo-2`` before ``demo-10``: digit runs compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in _DIGIT_RUNS.split(text)
        if part
    )
