"""Parsers for flag values: strings in, typed values out, `ValueError` with a short reason.

Kept apart from argparse so env vars and config-file values go through the same
checks as command-line flags (a bad `EIPCTL_NODE_TIMEOUT` fails like a bad `--node-timeout`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds from a Go-style duration (`500ms`, `1.5s`, `1m30s`) or a bare number of seconds."""
    raw = str(text).strip()
    if not raw:
        raise ValueError("empty duration")
    if raw.startswith("-"):
        raise ValueError(f"duration {raw!r} must not be negative")
    try:
        seconds = float(raw)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(raw):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(raw) or pos == 0:
            raise ValueError(f"invalid duration {raw!r} (expected e.g. 500ms, 2s, 1m30s)") from None
    if seconds < 0:
        raise ValueError(f"duration {raw!r} must not be negative")
    return seconds


def positive_duration(text: str) -> float:
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"duration {text!r} must be greater than zero")
    return value


def parse_bool(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"invalid boolean {text!r} (expected true or false)")


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """A parser for integers in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ValueError(f"invalid integer {text!r}") from None
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"between {low} and {high}"
            raise ValueError(f"{value} is out of range (must be {bound})")
        return value

    return parse


def one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = str(text).strip()
        if value not in choices:
            raise ValueError(f"invalid choice {value!r} (choose from {', '.join(choices)})")
        return value

    return parse


def parse_text(text: str) -> str:
    return str(text)


def readable_file(text: str) -> str:
    """A path that can be opened now: a missing kubeconfig is a usage error, not a traceback."""
    path = str(text)
    if not path:  # '' means unset, as before
        return path
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: {(exc.strerror or 'cannot read').lower()}") from None
    return path


@dataclass(frozen=True)
class BindAddress:
    """`host:port` (port 0 picks a free port); the bare value `0` switches the server off."""

    host: str
    port: int
    enabled: bool = True

    def __str__(self) -> str:
        return f"{self.host}:{self.port}" if self.enabled else "0"


def parse_bind_address(text: str) -> BindAddress:
    raw = str(text).strip()
    if raw in {"0", ""}:
        return BindAddress("", 0, enabled=False)
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        raise ValueError(f"invalid bind address {raw!r} (expected host:port, :port or 0)")
    port = int_range(0, 65535)(port_text)
    host = host.strip("[]") or "0.0.0.0"
    return BindAddress(host, port)
