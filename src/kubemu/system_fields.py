"""The metadata the server owns: what a create stamps and what a replacement keeps.

Clients may send uid, creationTimestamp, generation, the deletion marks and so on, but the
apiserver sets or restores them itself; here, so the engine's write path reads as its steps.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

from . import errors, strategies
from .resources import ResourceType

Obj = dict[str, Any]
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    """Timestamps as the apiserver writes them: UTC, whole seconds, Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fill_name(rt: ResourceType, meta: Obj) -> None:
    """A missing metadata.name from generateName plus five random characters; 422 without."""
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise errors.invalid(
                rt.group,
                rt.kind,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "field": "metadata.name",
                        "message": "Required value: name or generateName is required",
                    }
                ],
            )
        meta["name"] = prefix + "".join(random.choices(_NAME_CHARS, k=5))


def stamp_created(rt: ResourceType, namespace: str, obj: Obj) -> None:
    """Set what the server owns on a new object: type, namespace, uid, creationTimestamp,
    generation; drop the deletion marks, managedFields and resourceVersion a client sent."""
    meta = obj["metadata"]
    obj["apiVersion"], obj["kind"] = rt.group_version, rt.kind
    for k in (
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "resourceVersion",
    ):
        meta.pop(k, None)
    if rt.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    if strategies.has_generation(rt):
        meta["generation"] = 1


def replacement(
    rt: ResourceType,
    body: Obj,
    old: Obj,
    *,
    namespace: str,
    name: str,
    subresource: str | None,
) -> Obj:
    """The object a PUT stores before the kind's rules: through /status only the status
    changes; otherwise the body, with the stored status and the server-owned metadata."""
    meta = body["metadata"]
    old_meta = old["metadata"]
    if subresource == "status":
        new = {k: v for k, v in old.items() if k != "status"}
        if "status" in body:
            new["status"] = body["status"]
        new["metadata"] = dict(old_meta)
    else:
        new = dict(body)
        new["metadata"] = dict(meta)
        if rt.has_status:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        for k in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if k in old_meta:
                new["metadata"][k] = old_meta[k]
            else:
                new["metadata"].pop(k, None)
        new["metadata"].pop("managedFields", None)
    new["apiVersion"], new["kind"] = rt.group_version, rt.kind
    new["metadata"]["name"] = name
    if rt.namespaced:
        new["metadata"]["namespace"] = namespace
    else:
        new["metadata"].pop("namespace", None)
    new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
    return new
