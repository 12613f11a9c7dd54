"""/openapi/v2 as the gnostic protobuf kubectl asks for (openapi_proto.py).

Hand-written bytes pin the field numbers of github.com/google/gnostic-models
openapiv2/OpenAPIv2.proto; the served document decodes to the JSON one and keeps the rules
kube-openapi's parser (``proto.NewOpenAPIData``, what kubectl runs on it) enforces."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest
import yaml
from widget_crd import GROUP, VERSION

from kubemu import ApiServer, openapi
from kubemu.openapi_proto import (
    MEDIA_JSON,
    MEDIA_PROTOBUF,
    decode_document,
    encode_document,
    negotiate,
)
from kubemu.protobuf_wire import DecodeError, iter_fields

KUBECTL_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
GVK = [{"group": "", "kind": "B", "version": "v1"}]


def ld(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag bytes as written by hand, then the length as a
    varint of one or two bytes (7 bits each, low first, high bit = more)."""
    n = len(payload)
    assert n < 2**14
    size = bytes([n]) if n < 128 else bytes([n & 0x7F | 0x80, n >> 7])
    return tag + size + payload


TINY: dict[str, Any] = {
    "swagger": "2.0",
    "info": {"title": "T", "version": "v"},
    "paths": {},
    "definitions": {
        "a.B": {
            "type": "object",
            "required": ["x"],
            "properties": {"x": {"type": "string", "description": "d"}},
            "x-kubernetes-group-version-kind": GVK,
        }
    },
}
GVK_YAML = b'[{"group": "", "kind": "B", "version": "v1"}]'
X_SCHEMA = (
    ld(b"\x22", b"d")  # Schema.description = 4
    + ld(b"\xb2\x01", ld(b"\x0a", b"string"))  # Schema.type = 22: TypeItem.value = 1
)
B_SCHEMA = (
    ld(b"\x9a\x01", b"x")  # Schema.required = 19
    + ld(b"\xb2\x01", ld(b"\x0a", b"object"))  # Schema.type = 22
    # Schema.properties = 25: Properties.additional_properties = 1: NamedSchema{name 1, value 2}
    + ld(b"\xca\x01", ld(b"\x0a", ld(b"\x0a", b"x") + ld(b"\x12", X_SCHEMA)))
    # Schema.vendor_extension = 31: NamedAny{name 1, value 2: Any{yaml 2}}
    + ld(
        b"\xfa\x01",
        ld(b"\x0a", b"x-kubernetes-group-version-kind") + ld(b"\x12", ld(b"\x12", GVK_YAML)),
    )
)
TINY_BYTES = (
    ld(b"\x0a", b"2.0")  # Document.swagger = 1
    + ld(b"\x12", ld(b"\x0a", b"T") + ld(b"\x12", b"v"))  # Document.info = 2: title 1, version 2
    + ld(b"\x42", b"")  # Document.paths = 8 (present, empty)
    # Document.definitions = 9: Definitions.additional_properties = 1: NamedSchema
    + ld(b"\x4a", ld(b"\x0a", ld(b"\x0a", b"a.B") + ld(b"\x12", B_SCHEMA)))
)


def test_tiny_document_bytes_pin_the_field_numbers() -> None:
    assert encode_document(TINY) == TINY_BYTES
    assert decode_document(TINY_BYTES) == TINY
    # the vendor extension's Any.yaml is YAML for the same value (what kubectl unmarshals)
    assert yaml.safe_load(GVK_YAML) == GVK


def test_schema_fields_round_trip() -> None:
    """Every Schema field the documents use, and paths with operations."""
    schema: dict[str, Any] = {
        "$ref": "#/definitions/a.B",
        "format": "int32",
        "title": "t",
        "description": "d",
        "default": {"a": [1, "two", None]},
        "multipleOf": 0.5,
        "maximum": 10.25,
        "exclusiveMaximum": True,
        "minimum": -3,
        "exclusiveMinimum": True,
        "maxLength": 64,
        "minLength": 1,
        "pattern": "^[a-z]+$",
        "maxItems": 2**40,
        "minItems": -1,
        "uniqueItems": True,
        "maxProperties": 5,
        "minProperties": 1,
        "required": ["a", "b"],
        "enum": ["red", 7, True, {"k": "v"}],
        "additionalProperties": {"type": "string", "items": {"type": "integer"}},
        "type": ["object", "null"],
        "items": [{"type": "integer"}, {"type": "string", "readOnly": True}],
        "allOf": [{"$ref": "#/definitions/c.D"}],
        "properties": {"é": {"additionalProperties": False}, "$ref": {"type": "string"}},
        "discriminator": "kind",
        "readOnly": True,
        "externalDocs": {"description": "more", "url": "https://example.com"},
        "example": "ex",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name", "protocol"],
    }
    doc: dict[str, Any] = {
        "swagger": "2.0",
        "info": {"title": "T", "version": "v", "description": "x", "x-info": 1},
        "host": "h",
        "basePath": "/",
        "schemes": ["https"],
        "consumes": ["application/json"],
        "produces": ["application/json", "application/yaml"],
        "paths": {
            "/api/v1/namespaces": {
                "patch": {
                    "operationId": "patchNamespace",
                    "consumes": ["application/strategic-merge-patch+json"],
                    "tags": ["core_v1"],
                    "deprecated": True,
                    "x-kubernetes-group-version-kind": GVK,
                },
                "get": {"description": "list"},
            },
            "x-paths": True,
        },
        "definitions": {"a.B": schema},
        "x-top": {"n": 1.5},
    }
    assert decode_document(encode_document(doc)) == doc


def test_zero_scalars_are_left_out_as_proto3_does() -> None:
    doc = {"definitions": {"a": {"minimum": 0, "exclusiveMaximum": False, "description": ""}}}
    assert encode_document(doc) == ld(b"\x4a", ld(b"\x0a", ld(b"\x0a", b"a") + ld(b"\x12", b"")))
    # ...except a oneof member: additionalProperties: false stays (AdditionalPropertiesItem.boolean)
    closed = {"definitions": {"a": {"additionalProperties": False}}}
    assert decode_document(encode_document(closed)) == closed


def test_malformed_bytes_are_refused() -> None:
    with pytest.raises(DecodeError):
        decode_document(b"\x0a\x05ab")  # a length past the end
    with pytest.raises(DecodeError):
        decode_document(b"\x08\x01")  # swagger (1) as a varint


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("", MEDIA_JSON),
        ("*/*", MEDIA_JSON),
        ("application/json", MEDIA_JSON),
        (KUBECTL_ACCEPT, MEDIA_PROTOBUF),
        (MEDIA_PROTOBUF, MEDIA_PROTOBUF),
        (f"application/json;q=0.5, {KUBECTL_ACCEPT}", MEDIA_PROTOBUF),
        (f"*/*, {KUBECTL_ACCEPT}", MEDIA_PROTOBUF),  # the more specific clause first
        (f"{KUBECTL_ACCEPT};q=0.1, application/*", MEDIA_JSON),
        ("text/html", None),
        ("application/yaml", None),
    ],
)
def test_accept_picks_the_media_type_as_kube_openapi_does(accept: str, media: str | None) -> None:
    assert negotiate(accept) == media


def test_v2_conversion_of_crd_schemas() -> None:
    """apiextensions-apiserver's ToStructuralOpenAPIV2, on the shapes it changes."""
    schema = {
        "type": "object",
        "required": ["a", "n"],
        "anyOf": [{"required": ["a"]}],
        "properties": {
            "a": {"type": "string", "oneOf": [{"pattern": "x"}], "not": {"enum": ["y"]}},
            "n": {"type": "object", "nullable": True, "properties": {"x": {"type": "string"}}},
            "free": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"k": {"type": "string"}},
            },
            "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": True, "items": {}},
            "m": {"type": "object", "additionalProperties": {"type": "string", "nullable": False}},
        },
    }
    assert openapi.to_v2(schema) == {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": "string"},
            "n": {},
            "free": {"x-kubernetes-preserve-unknown-fields": True},
            "list": {"x-kubernetes-preserve-unknown-fields": True},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def _kube_openapi_errors(defs: dict[str, Any]) -> list[str]:
    """What kube-openapi's proto.NewOpenAPIData refuses (pkg/util/proto/document.go), which
    would make kubectl's client-side validation fail for every List."""
    errors: list[str] = []

    def check(s: dict[str, Any], path: str) -> None:
        types = s.get("type", [])
        types = [types] if isinstance(types, str) else types
        if "$ref" in s:
            ref = s["$ref"].removeprefix("#/definitions/")
            if s.get("properties") or types or ref not in defs:
                errors.append(f"{path}: bad reference {s['$ref']}")
            return
        if len(types) > 1:
            errors.append(f"{path}: several types")
        elif types == ["array"]:
            items = s.get("items")
            if not isinstance(items, dict):
                errors.append(f"{path}: array without exactly one item schema")
            else:
                check(items, path + "[]")
        elif types and types[0] not in ("object", "string", "integer", "number", "boolean"):
            errors.append(f"{path}: unknown primitive {types[0]}")
        for name, sub in (s.get("properties") or {}).items():
            check(sub, f"{path}.{name}")
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and s.get("properties") is None:
            check(extra, path + "{}")

    for name, schema in defs.items():
        check(schema, name)
    return errors


async def _get(srv: ApiServer, accept: str) -> tuple[int, str, bytes]:
    headers = {"Accept": accept}
    async with (
        aiohttp.ClientSession(srv.url) as http,
        http.get("/openapi/v2", headers=headers) as r,
    ):
        return r.status, r.headers.get("Content-Type", ""), await r.read()


async def test_served_protobuf_is_the_json_document(widgets: ApiServer) -> None:
    code, media, raw = await _get(widgets, KUBECTL_ACCEPT)
    assert code == 200 and media == MEDIA_PROTOBUF
    doc = decode_document(raw)
    code, media, body = await _get(widgets, "application/json")
    assert code == 200 and media == MEDIA_JSON
    assert doc == yaml.safe_load(body)  # nothing of the JSON document is lost
    defs = doc["definitions"]
    assert not _kube_openapi_errors(defs)
    svc = defs["io.k8s.api.core.v1.Service"]
    assert svc["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Service", "version": "v1"}
    ]
    assert svc["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.core.v1.ServiceSpec"
    assert "externalIPs" in defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]
    name = ".".join([*reversed(GROUP.split(".")), VERSION, "Widget"])
    spec = defs[name]["properties"]["spec"]["properties"]
    assert spec["size"] == {"type": "integer", "minimum": 1.0, "maximum": 10.0}
    assert spec["note"] == {}  # nullable: untyped in v2
    assert spec["free"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert defs[name]["properties"]["metadata"]["$ref"].endswith(".ObjectMeta")


async def test_not_acceptable_is_406(apiserver: ApiServer) -> None:
    code, _, _ = await _get(apiserver, "text/html")
    assert code == 406


async def test_a_new_crd_changes_the_document(widgets: ApiServer) -> None:
    """The encoded document is cached, but not past a change of the served kinds."""
    _, _, before = await _get(widgets, KUBECTL_ACCEPT)
    gadget = copy.deepcopy(
        widgets.store.get("apiextensions.k8s.io", "customresourcedefinitions", f"widgets.{GROUP}")
    )
    gadget["metadata"] = {"name": f"gadgets.{GROUP}"}
    gadget["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}
    gadget.pop("status", None)
    widgets.store.create("apiextensions.k8s.io", "customresourcedefinitions", gadget)
    _, _, after = await _get(widgets, KUBECTL_ACCEPT)
    assert before != after
    assert any(d.endswith(".Gadget") for d in decode_document(after)["definitions"])


def test_any_yaml_reads_back_as_the_value() -> None:
    """Any.yaml is JSON text, with what YAML reads as a line break or refuses escaped."""
    value = {"enum": ["a\u2028b", "c\x85d", "é", 1.5, None], "n": {"x": [True]}}
    raw = encode_document({"x-v": value})

    def field(data: bytes, number: int) -> bytes:
        return next(v for n, _, v in iter_fields(data) if n == number and isinstance(v, bytes))

    # Document.vendor_extension (16) -> NamedAny.value (2) -> Any.yaml (2)
    yaml_text = field(field(field(raw, 16), 2), 2).decode()
    assert r"a\u2028b" in yaml_text and r"c\u0085d" in yaml_text
    assert yaml.safe_load(yaml_text) == value
    assert decode_document(raw) == {"x-v": value}
