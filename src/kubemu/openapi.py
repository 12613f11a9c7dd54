"""The schemas /openapi/v3 and /openapi/v2 serve, from the same data as validation: the
Kubernetes 1.37 definitions of the built-in kinds (builtin_schema.py) and each CRD's
openAPIV3Schema. Each kind's schema carries ``x-kubernetes-group-version-kind`` and every
definition it refers to, so ``kubectl explain`` finds built-ins and custom resources.
Documents are built once per set of served types and cached.

The v2 document is written as Kubernetes writes it, because kubectl parses it strictly
(kube-openapi's ``proto.NewOpenAPIData``) to validate a ``kind: List`` client-side: a described
reference is ``$ref`` with a sibling ``description`` (v3 wraps it in ``allOf``), and a CRD's
schema goes through apiextensions-apiserver's ``ToStructuralOpenAPIV2`` (no allOf/anyOf/oneOf/
not, nullable and preserve-unknown-fields nodes lose what kubectl would reject). openapi_proto.py
encodes it as the protobuf kubectl asks for."""

from __future__ import annotations

from typing import Any

from . import builtin_schema
from .resources import ResourceType

Obj = dict[str, Any]
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SCALARS = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "type": "string",
        "format": "int-or-string",
        "x-kubernetes-int-or-string": True,
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "type": "string",
        "x-kubernetes-int-or-string": True,
    },
}


def _convert(schema: Any, prefix: str, wrap: bool = True) -> Any:
    """JSON Schema 2020-12 (kubernetes-validate's form) to OpenAPI: one type, no null,
    references to `prefix` (described references wrapped in allOf in v3, `wrap`, as Kubernetes
    does; v2 keeps the description beside the ``$ref``)."""
    if isinstance(schema, list):
        return [_convert(s, prefix, wrap) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: Obj = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            if kinds:
                out["type"] = kinds[0]
        elif key == "$ref" and isinstance(value, str):
            out["$ref"] = prefix + value.rsplit("/", 1)[-1]
        elif key in ("properties", "patternProperties"):
            out[key] = {k: _convert(v, prefix, wrap) for k, v in value.items()}
        else:
            out[key] = _convert(value, prefix, wrap)
    if wrap and "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def _refs(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            found.add(ref.rsplit("/", 1)[-1])
        for value in schema.values():
            _refs(value, found)
    elif isinstance(schema, list):
        for value in schema:
            _refs(value, found)


def _closure(names: list[str]) -> list[str]:
    defs = builtin_schema.definitions()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        more: set[str] = set()
        _refs(defs[name], more)
        todo.extend(more - seen)
    return sorted(seen)


def _definition(name: str, prefix: str, v2: bool) -> Obj:
    if name in _SCALARS:
        return dict(_SCALARS[name])
    out: Obj = _convert(builtin_schema.definitions()[name], prefix, wrap=not v2)
    return out


def crd_schema_name(rt: ResourceType) -> str:
    """Kubernetes names a CR's schema by its reversed group: com.example.v1.Widget."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _crd_schema(rt: ResourceType, prefix: str, v2: bool) -> Obj:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    schema: Obj = dict(rt.schema or {"type": "object"})
    if v2 and (schema.get(_PRESERVE) is True or not rt.schema):
        # as Kubernetes publishes it: properties would make kubectl refuse every other field
        return {"type": "object", "x-kubernetes-group-version-kind": [gvk]}
    if v2:
        schema = to_v2(schema)
    props = dict(schema.get("properties") or {})
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    if builtin_schema.definitions():
        ref = {"$ref": prefix + _OBJECT_META}
        props["metadata"] = {**ref, "description": _METADATA} if v2 else {"allOf": [ref]}
    schema["properties"] = props
    schema["x-kubernetes-group-version-kind"] = [gvk]
    return schema


_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_METADATA = (
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")


def to_v2(schema: Obj) -> Obj:
    """A structural CRD schema as Kubernetes publishes it in OpenAPI v2
    (apiextensions-apiserver's ``ToStructuralOpenAPIV2``), so that kubectl can parse it."""
    out = {k: v for k, v in schema.items() if k not in _JUNCTORS and k != "nullable"}
    if schema.get("nullable") is True:
        for key in ("type", "items", "properties"):
            out.pop(key, None)
    if schema.get(_PRESERVE) is True:
        out.pop("items", None)
        out.pop("properties", None)
        if out.get("type") == "object":
            out.pop("type")
    if out.get("type") == "array" and "items" not in out:
        out.pop("type")
    props = out.get("properties")
    if isinstance(props, dict):
        nullable = {k for k, v in props.items() if isinstance(v, dict) and v.get("nullable")}
        if nullable and isinstance(out.get("required"), list):
            out["required"] = [r for r in out["required"] if r not in nullable]
            if not out["required"]:
                del out["required"]
        out["properties"] = {k: to_v2(v) if isinstance(v, dict) else v for k, v in props.items()}
    extra = out.get("additionalProperties")
    if isinstance(extra, dict):
        if extra.get("nullable") is True:
            out.pop("required", None)
        out["additionalProperties"] = to_v2(extra)
    if isinstance(out.get("items"), dict):
        out["items"] = to_v2(out["items"])
    return out


_CACHE: dict[tuple[str, bool, tuple[int, ...]], tuple[tuple[ResourceType, ...], Obj]] = {}


def schemas(types: tuple[ResourceType, ...], prefix: str, v2: bool = False) -> Obj:
    """The named schemas of these types and everything they refer to, in OpenAPI v3 form or
    (`v2`) as Kubernetes writes them in its swagger document (cached by the types'
    identity: a re-created CRD is a new type)."""
    key = (prefix, v2, tuple(id(t) for t in types))
    hit = _CACHE.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], types, strict=True)):
        return hit[1]
    out = _schemas(types, prefix, v2)
    if len(_CACHE) >= 64:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (types, out)
    return out


def _schemas(types: tuple[ResourceType, ...], prefix: str, v2: bool) -> Obj:
    out: Obj = {}
    wanted: list[str] = []
    for t in types:
        if t.from_crd:
            out[crd_schema_name(t)] = _crd_schema(t, prefix, v2)
            wanted.append(_OBJECT_META)
            continue
        name = builtin_schema.definition_name(t.group, t.version, t.kind)
        if name is not None:
            wanted.append(name)
    for name in _closure(wanted):
        out[name] = _definition(name, prefix, v2)
    return out


def swagger(types: tuple[ResourceType, ...], version: str) -> Obj:
    """GET /openapi/v2: every definition of the served kinds (no paths: kubectl reads them
    only when /openapi/v3 fails, and then falls back to its built-in types)."""
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": {},
        "definitions": schemas(types, "#/definitions/", v2=True),
    }
