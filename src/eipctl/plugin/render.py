"""The plugin's output: a text table or paragraph by default, JSON or YAML on request, always
written to the stream it is given (its stdout is the product, not a log)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any, Final, TextIO

import yaml

FORMATS: Final = ("text", "json", "yaml")


def table(stream: TextIO, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """kubectl-style columns: left aligned, three spaces apart, the last column unpadded."""
    widths = [max(len(str(r[i])) for r in (headers, *rows)) for i in range(len(headers))]
    for row in (headers, *rows):
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        stream.write("   ".join([*cells, str(row[-1])]).rstrip() + "\n")


def paragraph(stream: TextIO, text: str, *, indent: str = "") -> None:
    stream.write(
        textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent or "  ")
        + "\n"
    )


def structured(stream: TextIO, data: Any, fmt: str) -> None:
    """``data`` (plain dicts and lists) as JSON or YAML."""
    if fmt == "json":
        stream.write(json.dumps(data, indent=2) + "\n")
    else:
        stream.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
