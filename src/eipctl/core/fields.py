"""Typed reads from Kubernetes-style dicts, with errors that name the offending field.

Objects come from the API (or a user's YAML) as plain JSON dicts. Every reader here checks one
field's type and raises ResourceError carrying its path (``spec.ranges[0][1]``), so a bad
object is reported once, clearly, instead of failing later with a KeyError deep in a loop.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

Obj = dict[str, Any]
"""A Kubernetes object as the API sends and takes it (decoded JSON)."""

Mutation = Callable[[Obj], Obj | None]
"""Change the object in place (return None) or return the new object. Must be pure:
it may run more than once on different copies, only one of which gets written."""


class ResourceError(ValueError):
    """A resource dict that does not fit its schema; ``field`` is the path of the bad field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def join(path: str, key: str | int) -> str:
    """Path of a child field: ``join("spec", "ip")`` -> ``spec.ip``, index -> ``spec.x[0]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def as_mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ResourceError(path, f"expected an object, got {type(value).__name__}")
    return value


def get_mapping(d: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = d.get(key)
    return None if value is None else as_mapping(value, join(path, key))


def as_str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ResourceError(path, f"expected a string, got {type(value).__name__}")
    return value


def get_str(d: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
    """The string at ``key``; "" when absent, unless ``required``."""
    value = d.get(key)
    if value is None:
        if required:
            raise ResourceError(join(path, key), "required")
        return ""
    return as_str(value, join(path, key))


def get_int(
    d: Mapping[str, Any], key: str, path: str, *, minimum: int = 0, maximum: int | None = None
) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    field = join(path, key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResourceError(field, f"expected an integer, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f"..{maximum}"
        raise ResourceError(field, f"{value} is out of range {minimum}{upper}")
    return value


def get_bool(d: Mapping[str, Any], key: str, path: str, *, default: bool) -> bool:
    value = d.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ResourceError(join(path, key), f"expected a boolean, got {type(value).__name__}")
    return value


def as_list(value: object, path: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise ResourceError(path, f"expected a list, got {type(value).__name__}")
    return value


def get_list(d: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = d.get(key)
    return () if value is None else as_list(value, join(path, key))


def get_str_list(d: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    field = join(path, key)
    return tuple(as_str(v, join(field, i)) for i, v in enumerate(get_list(d, key, path)))


def get_str_map(d: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    mapping = get_mapping(d, key, path) or {}
    field = join(path, key)
    return {as_str(k, field): as_str(v, join(field, str(k))) for k, v in mapping.items()}


_PREFIX_LENGTH = re.compile(r"0|[1-9][0-9]{0,2}")


@lru_cache(maxsize=16_384)
def _ip_problem(text: str) -> str | None:
    """Why ``text`` is not an address the CRD patterns accept, or None (cached: the scheduler
    reads every address of an IpNode on each of its writes, ~7 us each parsed)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return "is not an IP address"
    if isinstance(address, ipaddress.IPv6Address):
        if "%" in text or "." in text:
            return "is not a plain IPv6 address (no zone, no dotted quad)"
        if address.ipv4_mapped is not None:  # refused by the schema's isIP, in hex too
            return f"is an IPv4-mapped IPv6 address (write {address.ipv4_mapped})"
    return None


def check_ip(value: str, path: str) -> str:
    """``value`` if it is an IPv4 or IPv6 address, spelled as the CRD schema allows."""
    problem = _ip_problem(value)
    if problem:
        raise ResourceError(path, f"{value!r} {problem}")
    return value


def check_network(value: str, path: str, *, bare_ip: bool = False) -> str:
    """``value`` if it is ``ip/len`` (or just ``ip`` when ``bare_ip``).

    Host bits may be set: whether that is an error is the pool logic's call.
    """
    ip, slash, bits = value.partition("/")
    if not slash:
        if bare_ip:
            return check_ip(value, path)
        raise ResourceError(path, f"{value!r} is not a CIDR (ip/prefixLength)")
    problem = _ip_problem(ip)
    if problem:
        raise ResourceError(path, f"{value!r}: {ip!r} {problem}")
    max_bits = 128 if ":" in ip else 32  # a valid address: IPv6 exactly when it has a colon
    if not _PREFIX_LENGTH.fullmatch(bits) or int(bits) > max_bits:
        raise ResourceError(path, f"{value!r}: prefix length must be 0..{max_bits}")
    return value


def parse_time(value: object, path: str) -> datetime:
    """An RFC 3339 timestamp as an aware UTC datetime, to whole seconds like metav1.Time."""
    text = as_str(value, path)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ResourceError(path, f"{text!r} is not an RFC 3339 timestamp") from None
    if parsed.tzinfo is None:
        raise ResourceError(path, f"{text!r} has no time zone")
    return normalize_time(parsed)


def normalize_time(value: datetime) -> datetime:
    """UTC, whole seconds: what survives a round trip through the API."""
    if value.tzinfo is None:
        raise ValueError("naive datetime: use an aware one (datetime.now(UTC))")
    return value.astimezone(UTC).replace(microsecond=0)


def format_time(value: datetime) -> str:
    return normalize_time(value).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- lenient reads, for objects the API (or a cache) has already accepted -------------------
def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata``, or an empty mapping when absent."""
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name``, or "" when absent."""
    return str(meta_of(obj).get("name") or "")


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels``, or an empty mapping when absent."""
    labels: Mapping[str, str] = meta_of(obj).get("labels") or {}
    return labels
