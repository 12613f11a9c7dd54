"""Cached objects with their strings shared: `compact`.

Every watch event is parsed on its own, so each cached object carries its own copy of every
key ("metadata", "resourceVersion", "lastTransitionTime", ...) and of every repeated value
("True", "Bound", a node's name, a pool's). At 10,000 claims and 10,000 Services that is
most of what the informers hold (`bench_scale.py --heap`: ~4.8 KB per cached object).
Interned, each distinct key and short value is stored once per process.
"""

from __future__ import annotations

import sys
from typing import Any, Final

SHORT: Final = 64
"""Values up to this length are interned: names, phases, reasons, timestamps. Longer ones
(messages, certificates, last-applied annotations) are seldom repeated."""


def compact(value: Any) -> Any:
    """``value`` (parsed JSON) with its dict keys and short strings interned; equal to it."""
    if isinstance(value, dict):
        return {sys.intern(k): compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= SHORT:
        return sys.intern(value)
    return value
