"""Node keys: the Secret through which a controller hands its own liveness key to the
schedulers, and nobody else (docs/liveness.md, "Node keys").

Every controller holds the cluster key, so with it alone any node could answer for any
other. So each controller also makes a key of its own and writes it into the Secret named
after its node, in a namespace where the controllers may create and update Secrets but not
read them, and an admission policy lets each write only its own node's name. The schedulers
read them all; probes to a node and its replies then go under its key
(`core.liveness_wire.Keyring.with_node_keys`). Here: the Secret's shape, both ways.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Final

from eipctl.core.fields import Obj
from eipctl.core.liveness_wire import MIN_KEY_LENGTH, key_id, valid_node

__all__ = [
    "NODE_KEY_LENGTH",
    "NODE_KEY_NAMESPACE",
    "SECRET_KEY",
    "new_node_key",
    "node_key_of",
    "node_key_secret",
    "node_key_text",
    "parse_node_key_text",
]

NODE_KEY_NAMESPACE: Final = "eipctl-node-keys"
"""The default namespace of the node-key Secrets (holding nothing else)."""
SECRET_KEY: Final = "key"
"""The Secret's data key: the node key, 32 random bytes."""
NODE_KEY_LENGTH: Final = 32


def new_node_key() -> bytes:
    """A fresh node key."""
    return secrets.token_bytes(NODE_KEY_LENGTH)


def node_key_text(key: bytes) -> str:
    """How a node key is kept in the controller's key file: hex, one line."""
    return key.hex() + "\n"


def parse_node_key_text(text: str) -> bytes:
    """The key in a key file's text (`node_key_text`); ValueError if it holds none."""
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError("a node key file holds one line of hex") from None
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"a node key is at least {MIN_KEY_LENGTH} bytes, not {len(key)}")
    return key


def node_key_secret(node: str, key: bytes, namespace: str) -> Obj:
    """The Secret a controller writes for its node (the key id, safe to show, as a label)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": node,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "eipctl"},
            "annotations": {"eipctl.io/liveness-key-id": key_id(key).hex()},
        },
        "type": "Opaque",
        "data": {SECRET_KEY: base64.b64encode(key).decode("ascii")},
    }


def node_key_of(secret: Obj) -> tuple[str, bytes] | None:
    """(node, key) of a node-key Secret; None for one that is not (a name that is no IpNode
    name, no usable key): the node then goes on under the cluster key."""
    meta = secret.get("metadata") or {}
    name = meta.get("name")
    data = secret.get("data") or {}
    raw = data.get(SECRET_KEY) if isinstance(data, dict) else None
    if not isinstance(name, str) or not valid_node(name) or not isinstance(raw, str):
        return None
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(key) < MIN_KEY_LENGTH:
        return None
    return name, key
