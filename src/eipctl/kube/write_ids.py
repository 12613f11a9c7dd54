"""Did a write land? The writer's answer after an ambiguous failure.

A 5xx, a 429 or a transport error after the request was sent leaves a write's fate unknown:
it may have been applied. Each main-object write therefore carries a fresh
``eipctl.io/write-id`` annotation, and a re-read that shows our id means it landed. Status
writes cannot carry annotations (the status subresource ignores metadata), so for them
"landed" means the server's status equals the status we sent.
"""

from __future__ import annotations

import uuid

from eipctl.kube.client import Obj

WRITE_ID = "eipctl.io/write-id"


def stamp(obj: Obj) -> str:
    """Put a fresh write id on `obj` (in place, keeping its other annotations); return it."""
    write_id = uuid.uuid4().hex
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), WRITE_ID: write_id}
    return write_id


def unstamp(obj: Obj) -> None:
    """Take the write id off `obj` (in place): the writer then sends this write unstamped,
    for an object that should be left with nothing of eipctl's on it (`wants_stamp`)."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    if annotations:
        annotations.pop(WRITE_ID, None)


def wants_stamp(base: Obj, mutated: Obj) -> bool:
    """False when the mutation took off the write id `base` had (`unstamp`): its write goes
    unstamped, and a retry after an ambiguous failure re-applies the mutation to a fresh
    read (idempotent: nothing is sent when it has landed)."""

    def has_id(obj: Obj) -> bool:
        return WRITE_ID in ((obj.get("metadata") or {}).get("annotations") or {})

    return has_id(mutated) or not has_id(base)


def landed(current: Obj, sent: Obj, write_id: str, *, status: bool = False) -> bool:
    """Whether `current` (a fresh read) shows that the write of `sent` was applied."""
    if write_id:
        annotations = (current.get("metadata") or {}).get("annotations") or {}
        return bool(annotations.get(WRITE_ID) == write_id)
    if status:
        return bool(current.get("status") == sent.get("status"))
    return False
