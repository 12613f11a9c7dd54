"""Cached objects share their keys and short values, and equal what was parsed."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eipctl.kube.client import IPCLAIMS, Obj
from eipctl.kube.compact import SHORT, compact
from eipctl.kube.informer import Informer
from polling import eventually

from .kube_fakes import FakeApi

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON)
def test_compact_equals_what_it_was_given(value: Any) -> None:
    assert compact(value) == value
    assert json.dumps(compact(value)) == json.dumps(value)  # order and types kept


def _claim(name: str) -> Obj:
    text = json.dumps(
        {
            "metadata": {"name": name, "labels": {"eipctl.io/node": "node-1"}},
            "status": {"phase": "Bound", "message": "m" * (SHORT + 1)},
        }
    )
    return dict(json.loads(text))  # parsed apart, as two watch events are


def test_two_parses_share_keys_and_short_values_only() -> None:
    a, b = compact(_claim("a")), compact(_claim("b"))
    key_a = next(k for k in a["status"] if k == "phase")
    key_b = next(k for k in b["status"] if k == "phase")
    assert key_a is key_b
    assert a["status"]["phase"] is b["status"]["phase"] is sys.intern("Bound")
    assert a["metadata"]["labels"]["eipctl.io/node"] is b["metadata"]["labels"]["eipctl.io/node"]
    # a long value is kept as parsed: interning it would cost a table entry and save nothing
    assert a["status"]["message"] == b["status"]["message"]
    assert a["status"]["message"] is not b["status"]["message"]


async def test_the_informer_caches_compacted_objects() -> None:
    api = FakeApi()
    api.put(IPCLAIMS, _claim("a"))
    inf = Informer(api, IPCLAIMS)
    seen: list[Obj] = []
    inf.add_change_handler(lambda _old, new: seen.append(new) if new is not None else None)
    inf.start()
    try:
        async with asyncio.timeout(5):
            await inf.wait_synced()
        api.put(IPCLAIMS, _claim("b"))  # through the watch
        await eventually(lambda: inf.get("b") is not None, what="b cached from the watch")
        a, b = inf.get("a"), inf.get("b")
        assert a is not None and b is not None
        assert a["status"]["phase"] is b["status"]["phase"]
        assert next(iter(a["status"])) is next(iter(b["status"]))
        assert seen and all(o is inf.get(o["metadata"]["name"]) for o in seen)  # the cached copy
    finally:
        await inf.stop()
