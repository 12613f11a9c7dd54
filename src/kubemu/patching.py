"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and strategic merge
patch approximated as merge patch plus merge-by-key for the list fields kubectl patches."""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

# list fields merged by a key under strategic merge patch (field name -> merge key)
_MERGE_KEYS = {
    "ports": "port",
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "tolerations": "key",
}
# list fields that are sets of scalars under strategic merge patch
_SET_LISTS = {"finalizers"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, val in patch.items():
        if val is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), val)
    return out


def strategic_merge_patch(target: Any, patch: Any, field: str = "") -> Any:
    """Merge patch, except keyed lists merge element-wise and `$patch: delete|replace` work."""
    if isinstance(patch, list) and isinstance(target, list):
        key = _MERGE_KEYS.get(field)
        if key and all(isinstance(x, dict) for x in patch + target):
            return _merge_keyed(target, patch, key)
        if field in _SET_LISTS:
            return target + [x for x in patch if x not in target]
        return copy.deepcopy(patch)
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for k, val in patch.items():
        if k.startswith("$setElementOrder/") or k.startswith("$deleteFromPrimitiveList/"):
            if k.startswith("$deleteFromPrimitiveList/"):
                name = k.split("/", 1)[1]
                out[name] = [x for x in out.get(name) or [] if x not in val]
            continue
        if k == "$retainKeys":
            continue
        if val is None:
            out.pop(k, None)
        else:
            out[k] = strategic_merge_patch(out.get(k), val, k)
    return out


def _merge_keyed(target: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [dict(x) for x in target]
    for item in patch:
        idx = next((i for i, x in enumerate(out) if x.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(copy.deepcopy(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise ApiError(
                422,
                f"the server rejected our request due to an error in our request: "
                f"path /{'/'.join(parts)} does not exist",
                "Invalid",
            )
    return cur


def _index(container: list[Any], p: str, adding: bool) -> int:
    if p == "-" and adding:
        return len(container)
    if not p.isdigit() or int(p) > len(container) - (0 if adding else 1):
        raise ApiError(422, f"invalid array index {p!r}", "Invalid")
    return int(p)


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test on a copy of doc."""
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise ApiError(422, f"testing value {op['path']} failed", "Invalid")
            continue
        if kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                doc = _remove(doc, src)
            doc = _add(doc, parts, value)
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            _walk(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), replace=True)
        else:
            raise bad_request(f"unknown json patch op {kind!r}")
    return doc


def _add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(parent, last, adding=not replace)
        if replace:
            parent[i] = value
        else:
            parent.insert(i, value)
    else:
        raise ApiError(422, f"cannot add at /{'/'.join(parts)}", "Invalid")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        parent.pop(_index(parent, last, adding=False))
    else:
        raise ApiError(422, f"path /{'/'.join(parts)} does not exist", "Invalid")
    return doc


def apply_patch(content_type: str, target: dict[str, Any], patch: Any, custom: bool) -> Any:
    """The patched object, by content type; CRs refuse strategic merge as the apiserver does."""
    ctype = content_type.split(";", maxsplit=1)[0].strip()
    if ctype == MERGE:
        return merge_patch(target, patch)
    if ctype == JSON_PATCH:
        return json_patch(target, patch)
    if ctype == STRATEGIC:
        if custom:
            raise ApiError(
                415,
                "strategic merge patch is not supported for custom resources",
                "UnsupportedMediaType",
            )
        return strategic_merge_patch(target, patch)
    raise ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media "
        f"types include: {JSON_PATCH}, {MERGE}, {STRATEGIC}",
        "UnsupportedMediaType",
    )
