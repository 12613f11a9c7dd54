"""Decoding built-in kinds as a real apiserver does: by their Kubernetes 1.37 schemas.

A real apiserver decodes a built-in object into its Go type before anything else, so:

- a value of the wrong JSON type is a 400 BadRequest worded as Go's decoder words it
  (`Service in version "v1" cannot be handled as a Service: json: cannot unmarshal string
  into Go struct field ServicePort.spec.ports.port of type int32`);
- a ``MicroTime`` (Lease ``renewTime``/``acquireTime``, Event ``eventTime``) must carry exactly
  six fractional digits, a ``Time`` any RFC 3339 timestamp, a ``Quantity`` a quantity;
- a field the type does not have is dropped (pruned), with a warning by default and a 400
  under ``fieldValidation=Strict``; a ``null`` field is its zero value (dropped).

The schemas are those kubernetes-validate ships (``kubernetes-json-schema/v1.37.0-local``,
generated from the apiserver's own OpenAPI). Without that package (a test extra) built-ins
are not type-checked or pruned, with one warning in the log; the hand-written rules of
``builtin_rules.py`` still run. Each kind's schema is compiled once, on first use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import structlog

from . import errors

log = structlog.get_logger(__name__)

KUBE_SCHEMA_DIR = "v1.37.0-local"
Obj = dict[str, Any]

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_SECONDS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
_MICRO_TAIL = re.compile(r"^\.\d{6}(Z|[+-]\d{2}:\d{2})$")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_RFC3339_LAYOUT = "2006-01-02T15:04:05Z07:00"
_MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
# definitions decoded by hand-written Go code rather than as plain structs
_SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "intstr",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "microtime",
}
_JSON_KIND = {str: "string", bool: "bool", list: "array", dict: "object"}
_SIMPLE: dict[str, type] = {"string": str, "bool": bool, "int": int}


class Node:
    """One compiled schema: what Go type the JSON value is decoded into."""

    __slots__ = ("go", "items", "kind", "props", "struct", "values")

    def __init__(self, kind: str, go: str) -> None:
        self.kind = kind  # struct, map, array, string, int, number, bool, any, or _SPECIAL
        self.go = go  # the Go type, for messages: int32, v1.ServicePort, []string, ...
        self.props: dict[str, Node] = {}
        self.struct = ""  # a struct's Go name without package (ServicePort)
        self.items: Node | None = None
        self.values: Node | None = None


@dataclass
class Decoded:
    """What decoding found: the first type error (Go stops there) and the unknown fields."""

    error: str = ""
    unknown: list[str] = field(default_factory=list)


class _Compiler:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.done: dict[str, Node] = {}

    def ref(self, name: str) -> Node:
        node = self.done.get(name)
        if node is not None:
            return node
        if name in _SPECIAL:
            node = Node(_SPECIAL[name], _SPECIAL[name])
            self.done[name] = node
            return node
        schema = self.defs.get(name) or {}
        short = name.rsplit(".", 2)
        go = f"{short[-2]}.{short[-1]}" if len(short) == 3 else name
        node = Node("any", go)
        self.done[name] = node  # before filling: definitions may be recursive
        self.fill(node, schema, short[-1])
        return node

    def compile(self, schema: dict[str, Any]) -> Node:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self.ref(ref.rsplit("/", 1)[-1])
        node = Node("any", "interface {}")
        self.fill(node, schema, "")
        return node

    def fill(self, node: Node, schema: dict[str, Any], struct: str) -> None:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind == "object":
            if "properties" in schema:
                node.kind, node.struct = "struct", struct or "struct"
                for key, sub in schema["properties"].items():
                    node.props[key] = self.compile(sub)
            elif isinstance(schema.get("additionalProperties"), dict):
                node.kind = "map"
                node.values = self.compile(schema["additionalProperties"])
                node.go = f"map[string]{node.values.go}"
        elif kind == "array" and isinstance(schema.get("items"), dict):
            node.kind = "array"
            node.items = self.compile(schema["items"])
            node.go = f"[]{node.items.go}"
        elif kind == "integer":
            node.kind, node.go = "int", schema.get("format") or "int64"
        elif kind == "number":
            node.kind, node.go = "number", "float64"
        elif kind == "boolean":
            node.kind, node.go = "bool", "bool"
        elif kind == "string":
            node.kind, node.go = "string", "string"
            if schema.get("format") == "byte":
                node.go = "[]uint8"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return _JSON_KIND.get(type(value), "value")


def _type_error(value: Any, owner: str, gopath: str, go: str) -> str:
    got = _json_kind(value)
    if isinstance(value, float) and go.startswith(("int", "uint")):
        got = f"number {value:g}"
    where = f"Go struct field {owner}.{gopath}" if owner and gopath else "Go value"
    return f"json: cannot unmarshal {got} into {where} of type {go}"


def _time_error(value: str, micro: bool) -> str:
    layout = _MICRO_LAYOUT if micro else _RFC3339_LAYOUT
    head = _SECONDS.match(value)
    if head is None:
        return f'parsing time "{value}" as "{layout}": cannot parse "{value}" as "2006"'
    rest = value[head.end() :]
    elem = ".000000" if micro and not rest.startswith(".") else "Z07:00"
    return f'parsing time "{value}" as "{layout}": cannot parse "{rest}" as "{elem}"'


class _Decoder:
    """Walks a value against its compiled node; with `prune`, edits it as Go would store it."""

    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self.out = Decoded()

    def fail(self, message: str) -> None:
        if not self.out.error:
            self.out.error = message

    def walk(self, n: Node, v: Any, path: str, gopath: str, owner: str) -> None:
        kind = n.kind
        if kind == "struct":
            if not isinstance(v, dict):
                self.fail(_type_error(v, owner, gopath, n.go))
                return
            for key in list(v):
                sub = n.props.get(key)
                sub_path = f"{path}.{key}" if path else key
                if sub is None:
                    self.out.unknown.append(sub_path)
                    if self.prune:
                        del v[key]
                    continue
                val = v[key]
                if val is None:
                    if self.prune:
                        del v[key]
                    continue
                simple = _SIMPLE.get(sub.kind)
                if simple is not None and type(val) is simple:
                    continue  # the common case, without a call
                self.walk(sub, val, sub_path, f"{gopath}.{key}" if gopath else key, n.struct)
        elif kind == "map":
            if not isinstance(v, dict):
                self.fail(_type_error(v, owner, gopath, n.go))
                return
            values = n.values
            simple = _SIMPLE.get(values.kind) if values is not None else None
            if simple is not None and all(type(x) is simple for x in v.values()):
                return  # labels, annotations, data: all strings
            if values is not None and values.kind != "any":
                for key, val in v.items():
                    if val is not None:
                        self.walk(values, val, f"{path}[{key}]", gopath, owner)
        elif kind == "array":
            if not isinstance(v, list):
                self.fail(_type_error(v, owner, gopath, n.go))
                return
            if n.items is not None and n.items.kind != "any":
                for i, item in enumerate(v):
                    if item is not None:
                        self.walk(n.items, item, f"{path}[{i}]", gopath, owner)
        elif kind != "any":
            self.scalar(n, v, gopath, owner)

    def scalar(self, n: Node, v: Any, gopath: str, owner: str) -> None:
        kind = n.kind
        if kind == "string":
            ok = isinstance(v, str)
        elif kind == "int":
            ok = isinstance(v, int) and not isinstance(v, bool)
            if isinstance(v, float):
                ok = False
        elif kind == "number":
            ok = isinstance(v, int | float) and not isinstance(v, bool)
        elif kind == "bool":
            ok = isinstance(v, bool)
        elif kind == "intstr":
            ok = isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))
            if not ok:
                self.fail(_type_error(v, "", "", "int32"))
            return
        elif kind == "quantity":
            text = v if isinstance(v, str) else None
            if isinstance(v, int | float) and not isinstance(v, bool):
                text = str(v)
            if text is None or not _QUANTITY.match(text):
                self.fail(
                    "quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
                )
            return
        else:  # time, microtime
            if not isinstance(v, str):
                self.fail(_type_error(v, owner, gopath, "string"))
            elif kind == "microtime":
                head = _SECONDS.match(v)
                if head is None or not _MICRO_TAIL.match(v[head.end() :]):
                    self.fail(_time_error(v, True))
            elif not _RFC3339.match(v):
                self.fail(_time_error(v, False))
            return
        if not ok:
            self.fail(_type_error(v, owner, gopath, n.go))


@lru_cache(maxsize=1)
def _definitions() -> dict[str, Any] | None:
    try:
        from importlib.resources import files

        base = files("kubernetes_validate").joinpath("kubernetes-json-schema", KUBE_SCHEMA_DIR)
        data = json.loads(base.joinpath("_definitions.json").read_text())
    except (ImportError, FileNotFoundError, OSError, ValueError):
        log.warning(
            "builtin_schema.unavailable",
            detail="kubernetes-validate is not installed: built-in objects are not "
            "type-checked or pruned, and /openapi serves only the CRDs' schemas",
        )
        return None
    defs = data.get("$defs") or data.get("definitions") or {}
    return defs if isinstance(defs, dict) else None


def definitions() -> dict[str, Any]:
    """Every Kubernetes 1.37 definition by its OpenAPI name ({} without kubernetes-validate)."""
    return _definitions() or {}


@lru_cache(maxsize=1)
def _by_gvk() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            out[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = name
    return out


def definition_name(group: str, version: str, kind: str) -> str | None:
    """The OpenAPI definition of a built-in kind (io.k8s.api.core.v1.Service)."""
    return _by_gvk().get((group, version, kind))


@lru_cache(maxsize=1)
def _compiler() -> _Compiler:
    return _Compiler(definitions())


@lru_cache(maxsize=128)
def root(group: str, version: str, kind: str) -> Node | None:
    """The compiled schema of a built-in kind, or None when there is none to check against."""
    name = definition_name(group, version, kind)
    return None if name is None else _compiler().ref(name)


def decode(node: Node, obj: Obj, *, prune: bool) -> Decoded:
    """Type-check `obj` (apiVersion and kind are the server's); with `prune`, drop unknown and
    null fields in place. Returns the first type error and the unknown field paths."""
    d = _Decoder(prune)
    for key in list(obj):
        if key in ("apiVersion", "kind"):
            continue
        sub = node.props.get(key)
        if sub is None:
            d.out.unknown.append(key)
            if prune:
                del obj[key]
        elif obj[key] is None:
            if prune:
                del obj[key]
        else:
            d.walk(sub, obj[key], key, key, node.struct)
    return d.out


def undecodable(kind: str, version: str, message: str) -> errors.ApiError:
    """The 400 a real apiserver answers for a body it cannot decode into the kind."""
    return errors.bad_request(
        f'{kind} in version "{version}" cannot be handled as a {kind}: {message}'
    )


def admit(group: str, version: str, kind: str, obj: Obj) -> None:
    """Decode a built-in object about to be stored: 400 on a type error, unknown fields
    dropped (the HTTP layer has already warned about them or refused them)."""
    node = root(group, version, kind)
    if node is None:
        return
    found = decode(node, obj, prune=True)
    if found.error:
        raise undecodable(kind, version, found.error)


def unknown_fields(group: str, version: str, kind: str, obj: Obj) -> list[str]:
    """The fields of a built-in object that decoding would drop (read-only)."""
    node = root(group, version, kind)
    return [] if node is None else decode(node, obj, prune=False).unknown
