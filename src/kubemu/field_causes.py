"""apimachinery's validation vocabulary, as the built-in rules (builtin_rules.py,
service_rules.py) use it: the causes of a 422 Invalid worded as Go's field errors word them
(k8s.io/apimachinery/pkg/util/validation/field), and the string and IP checks of
k8s.io/apimachinery/pkg/util/validation, each returning its messages ([] when valid).
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

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
_V4_LL_MCAST = ipaddress.ip_network("224.0.0.0/24")
_V6_LL_MCAST = ipaddress.ip_network("ff02::/16")


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


def invalid_each(path: str, value: Any, msgs: list[str]) -> list[Cause]:
    """One Invalid cause per message of a string check."""
    return [invalid(path, value, m) for m in msgs]


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


def parse_ip(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a legacy IP field holds (no zone allowed), None when it holds none."""
    if not isinstance(value, str) or "%" in value:
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def ip_causes(path: str, value: Any) -> list[Cause]:
    """IsValidIP for the legacy IP fields: parsable, no zone."""
    return [] if parse_ip(value) is not None else [invalid(path, value, _BAD_IP)]


def non_special_ip(path: str, value: Any) -> list[Cause]:
    """ValidateNonSpecialIP (external IPs, endpoints): not unspecified, loopback, link-local
    unicast or link-local multicast."""
    ip = parse_ip(value)
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
