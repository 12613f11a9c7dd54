"""core/node_keys.py: the node-key Secret's shape, both ways, and the key file's text."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eipctl.core.liveness_wire import key_id
from eipctl.core.node_keys import (
    NODE_KEY_LENGTH,
    SECRET_KEY,
    new_node_key,
    node_key_of,
    node_key_secret,
    node_key_text,
    parse_node_key_text,
)


@given(st.binary(min_size=16, max_size=64), st.sampled_from(["node-a", "n", "a.b-c"]))
def test_a_secret_gives_back_its_node_and_key(key: bytes, node: str) -> None:
    secret = node_key_secret(node, key, "eipctl-node-keys")
    assert secret["metadata"]["namespace"] == "eipctl-node-keys"
    assert node_key_of(secret) == (node, key)
    assert secret["metadata"]["annotations"]["eipctl.io/liveness-key-id"] == key_id(key).hex()


def test_a_secret_that_holds_no_usable_key_is_none() -> None:
    good = node_key_secret("node-a", bytes(32), "ns")
    bad_name = {**good, "metadata": {**good["metadata"], "name": "Node_A"}}
    assert node_key_of(bad_name) is None
    for data in (
        {},
        {SECRET_KEY: "not base64!"},
        {SECRET_KEY: base64.b64encode(b"short").decode()},
    ):
        assert node_key_of({**good, "data": data}) is None
    assert node_key_of({"metadata": {"name": "node-a"}}) is None
    assert node_key_of({**good, "data": ["a list"]}) is None
    assert node_key_of({"data": good["data"]}) is None  # no metadata at all
    assert node_key_of({**good, "metadata": {"name": 7}}) is None  # a name that is no string


def test_the_key_file_is_one_line_of_hex_and_reads_back() -> None:
    key = new_node_key()
    assert len(key) == NODE_KEY_LENGTH and new_node_key() != key
    text = node_key_text(key)
    assert text == key.hex() + "\n"
    assert parse_node_key_text(text) == key
    assert parse_node_key_text("  " + text + "\n\n") == key
    with pytest.raises(ValueError, match="hex"):
        parse_node_key_text("zz")
    with pytest.raises(ValueError, match="at least 16"):
        parse_node_key_text("00ff")
