"""The Kubernetes CEL IP and CIDR library (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go)
as cel-python functions, so CRD rules and admission policies written for a real apiserver
mean the same here.

Semantics follow the Go library, which parses with net/netip and then refuses what
Kubernetes does not want in an API field: ``isIP``/``ip`` reject zones (``fe80::1%eth0``)
and IPv4-mapped IPv6 (``::ffff:1.2.3.4``, also spelled ``::ffff:102:304``); leading zeros
in IPv4 octets are refused by the parser. ``isCIDR``/``cidr`` reject the same, a prefix
length with a sign or a leading zero, or above 32/128; host bits are allowed
(``cidr('192.168.0.1/24')`` is valid, ``.masked()`` clears them). Method names resolve to
one function each in cel-python, so each function below dispatches on its first argument's
type (``ip(string)`` parses, ``<CIDR>.ip()`` reads the address).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_BITS = re.compile(r"0|[1-9][0-9]*")


class NetIP:
    """A CEL ``net.IP`` value."""

    __slots__ = ("address",)

    def __init__(self, address: Address) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NetIP) and other.address == self.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __repr__(self) -> str:
        return f"ip({str(self.address)!r})"


class NetCIDR:
    """A CEL ``net.CIDR`` value: an address (host bits kept) and a prefix length."""

    __slots__ = ("address", "bits")

    def __init__(self, address: Address, bits: int) -> None:
        self.address = address
        self.bits = bits

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        """The masked network."""
        return ipaddress.ip_network(f"{self.address}/{self.bits}", strict=False)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NetCIDR) and other.address == self.address and other.bits == self.bits
        )

    def __hash__(self) -> int:
        return hash((self.address, self.bits))

    def __str__(self) -> str:
        return f"{self.address}/{self.bits}"

    def __repr__(self) -> str:
        return f"cidr({str(self)!r})"


class IPNamespace:
    """The value of the identifier ``ip`` in ``ip.isCanonical(s)``: cel-python evaluates the
    receiver of a method call, so the namespace must be a variable of the activation."""


def _error(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, (message,))


def parse_ip(text: str) -> Address:
    """An address as Kubernetes' CEL ``ip()`` accepts it; ValueError with the reason."""
    if "%" in text:
        raise ValueError(f"IP address {text!r} with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as exc:
        msg = f"IP Address {text!r} parse error during conversion from string: {exc}"
        raise ValueError(msg) from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return address


def parse_cidr(text: str) -> NetCIDR:
    """A prefix as Kubernetes' CEL ``cidr()`` accepts it; ValueError with the reason."""
    head, slash, bits = text.rpartition("/")
    if not slash:
        raise ValueError(f"network address parse error during conversion from string: {text!r}")
    address = parse_ip(head)
    if not _BITS.fullmatch(bits) or int(bits) > address.max_prefixlen:
        raise ValueError(
            f"network address parse error during conversion from string: {text!r}: "
            "bad bits after slash"
        )
    return NetCIDR(address, int(bits))


def is_ip(text: str) -> bool:
    """``isIP``: whether ``ip(text)`` would succeed."""
    try:
        parse_ip(text)
    except ValueError:
        return False
    return True


def is_cidr(text: str) -> bool:
    """``isCIDR``: whether ``cidr(text)`` would succeed."""
    try:
        parse_cidr(text)
    except ValueError:
        return False
    return True


def _string_arg(value: Any, function: str) -> str:
    if not isinstance(value, celtypes.StringType):
        raise TypeError(f"no such overload: {function}({type(value).__name__})")
    return str(value)


def _ip_of(value: Any) -> Address:
    if isinstance(value, NetIP):
        return value.address
    raise TypeError(f"no such overload for {type(value).__name__}")


def _cel_is_ip(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(is_ip(_string_arg(value, "isIP")))


def _cel_is_cidr(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(is_cidr(_string_arg(value, "isCIDR")))


def _cel_ip(value: Any) -> NetIP | CELEvalError:
    """``ip(string)``, or ``<CIDR>.ip()``."""
    if isinstance(value, NetCIDR):
        return NetIP(value.address)
    try:
        return NetIP(parse_ip(_string_arg(value, "ip")))
    except ValueError as exc:
        return _error(str(exc))


def _cel_cidr(value: Any) -> NetCIDR | CELEvalError:
    try:
        return parse_cidr(_string_arg(value, "cidr"))
    except ValueError as exc:
        return _error(str(exc))


def _cel_is_canonical(namespace: Any, value: Any) -> celtypes.BoolType | CELEvalError:
    if not isinstance(namespace, IPNamespace):
        raise TypeError("no such overload: isCanonical")
    text = _string_arg(value, "ip.isCanonical")
    try:
        return celtypes.BoolType(str(parse_ip(text)) == text)
    except ValueError as exc:
        return _error(str(exc))


def _cel_family(value: Any) -> celtypes.IntType:
    return celtypes.IntType(_ip_of(value).version)


def _cel_is_unspecified(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_ip_of(value).is_unspecified)


def _cel_is_loopback(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_ip_of(value).is_loopback)


def _first16(address: Address) -> int:
    return int(address) >> 112 if address.version == 6 else 0


def _link_local_multicast(address: Address) -> bool:
    """Go netip: 224.0.0.0/24, or ffx2::/16 (any flags)."""
    if address.version == 4:
        return int(address) >> 8 == 0xE00000
    return _first16(address) & 0xFF0F == 0xFF02


def _link_local_unicast(address: Address) -> bool:
    """Go netip: 169.254.0.0/16, or fe80::/10."""
    if address.version == 4:
        return int(address) >> 16 == 0xA9FE
    return _first16(address) & 0xFFC0 == 0xFE80


def _global_unicast(address: Address) -> bool:
    """Go netip: not unspecified, loopback, multicast, link-local unicast or v4 broadcast
    (private and ULA addresses count as global unicast)."""
    if address.version == 4 and int(address) == 0xFFFFFFFF:
        return False
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or _link_local_unicast(address)
    )


def _cel_is_link_local_multicast(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_link_local_multicast(_ip_of(value)))


def _cel_is_link_local_unicast(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_link_local_unicast(_ip_of(value)))


def _cel_is_global_unicast(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_global_unicast(_ip_of(value)))


def _cidr_of(value: Any) -> NetCIDR:
    if isinstance(value, NetCIDR):
        return value
    raise TypeError(f"no such overload for {type(value).__name__}")


def _cel_prefix_length(value: Any) -> celtypes.IntType:
    return celtypes.IntType(_cidr_of(value).bits)


def _cel_masked(value: Any) -> NetCIDR:
    network = _cidr_of(value).network
    return NetCIDR(network.network_address, network.prefixlen)


def _cel_contains_ip(value: Any, other: Any) -> celtypes.BoolType | CELEvalError:
    cidr = _cidr_of(value)
    if isinstance(other, celtypes.StringType):
        parsed = _cel_ip(other)
        if isinstance(parsed, CELEvalError):
            return parsed
        other = parsed
    address = _ip_of(other)
    return celtypes.BoolType(address.version == cidr.address.version and address in cidr.network)


def _cel_contains_cidr(value: Any, other: Any) -> celtypes.BoolType | CELEvalError:
    """Documented semantics: ``other`` lies wholly inside ``value``."""
    cidr = _cidr_of(value)
    if isinstance(other, celtypes.StringType):
        parsed = _cel_cidr(other)
        if isinstance(parsed, CELEvalError):
            return parsed
        other = parsed
    inner = _cidr_of(other)
    if inner.address.version != cidr.address.version or inner.bits < cidr.bits:
        return celtypes.BoolType(False)
    return celtypes.BoolType(inner.network.subnet_of(cidr.network))  # type: ignore[arg-type]


def _cel_string(value: Any) -> celtypes.StringType:
    """``string()``, extended to IPs (canonical form) and CIDRs."""
    if isinstance(value, NetIP):
        return celtypes.StringType(str(value.address))
    if isinstance(value, NetCIDR):
        return celtypes.StringType(str(value))
    return celtypes.StringType(value)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isIP": _cel_is_ip,
    "ip": _cel_ip,
    "isCanonical": _cel_is_canonical,
    "family": _cel_family,
    "isUnspecified": _cel_is_unspecified,
    "isLoopback": _cel_is_loopback,
    "isLinkLocalMulticast": _cel_is_link_local_multicast,
    "isLinkLocalUnicast": _cel_is_link_local_unicast,
    "isGlobalUnicast": _cel_is_global_unicast,
    "isCIDR": _cel_is_cidr,
    "cidr": _cel_cidr,
    "prefixLength": _cel_prefix_length,
    "masked": _cel_masked,
    "containsIP": _cel_contains_ip,
    "containsCIDR": _cel_contains_cidr,
    "string": _cel_string,
}
"""Pass as ``functions=`` to ``celpy.Environment.program`` (they return NetIP and NetCIDR
values, which celpy's CELFunction type does not list, hence the plain Callable)."""

VARIABLES: dict[str, Any] = {"ip": IPNamespace()}
"""Add to every activation, for ``ip.isCanonical(...)``."""
