"""GET /openapi/v2 as protobuf: the gnostic ``openapi_v2.Document`` kubectl asks for.

kubectl (client-go's ``OpenAPISchema``) asks for /openapi/v2 with only
``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and parses the answer as
the message of github.com/google/gnostic-models ``openapiv2/OpenAPIv2.proto``. It needs it to
validate a ``kind: List`` client-side (its items are checked against the definitions before
anything is sent) and for ``kubectl explain -o plaintext-openapiv2``. As kube-openapi's handler
does, the Accept header picks JSON or protobuf (either protobuf name; the answer is labelled
``...spec.v2.v1.0+protobuf``), and 406 answers anything else.

The encoder is written from the JSON document (openapi.py), as kube-openapi writes its
protobuf from its JSON (``ToProtoBinary``), and covers what that document holds: Document,
Info, Paths/PathItem/Operation (without parameters and responses), Definitions, Schema with
TypeItem, ItemsItem, AdditionalPropertiesItem, Properties, ExternalDocs, and vendor extensions
(``x-...``) and other free values (``default``, ``enum``, ``example``) as ``Any{yaml}``, the
YAML being the value's JSON text (the field table: openapi_proto_messages.py). Zero scalars
are left out, as proto3 does (so a ``minimum`` of 0 is lost, as it is from a real server). The
decoder is the inverse, for tests.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .errors import ApiError
from .openapi_proto_messages import BY_NUMBER, EXT, MESSAGES, Field
from .protobuf_wire import (
    I64,
    LEN,
    VARINT,
    DecodeError,
    iter_fields,
    len_field,
    signed,
    tag,
    utf8,
    varint_field,
)

Obj = dict[str, Any]
MEDIA_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
MEDIA_JSON = "application/json"
# (type, subtype, answered as) in kube-openapi's order (handler.go)
_ACCEPTED = (
    ("application", "json", MEDIA_JSON),
    ("application", "com.github.proto-openapi.spec.v2@v1.0+protobuf", MEDIA_PROTOBUF),
    ("application", "com.github.proto-openapi.spec.v2.v1.0+protobuf", MEDIA_PROTOBUF),
)


# --- encoding ---------------------------------------------------------------------------------


def _yaml(value: Any) -> str:
    """An Any's YAML: the JSON text, which YAML parsers read as the same value (characters
    YAML does not allow raw, or reads as line breaks, escaped)."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return _NOT_YAML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_NOT_YAML = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _any(value: Any) -> bytes:
    return len_field(2, _yaml(value).encode())


def _named(name: str, value: bytes) -> bytes:
    return len_field(1, name.encode()) + len_field(2, value)


def _scalar(number: int, kind: str, value: Any) -> bytes:
    """A proto3 scalar, left out when it is the zero value or not of the field's type."""
    if kind == "str":
        return len_field(number, value.encode()) if isinstance(value, str) and value else b""
    if kind == "strs":
        if not isinstance(value, list):
            return b""
        return b"".join(len_field(number, v.encode()) for v in value if isinstance(v, str))
    if kind == "bool":
        return varint_field(number, 1) if value is True else b""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value:
        return b""
    if kind == "int":
        return varint_field(number, int(value)) if float(value).is_integer() else b""
    return tag(number, I64) + struct.pack("<d", float(value))  # double


def encode(message: str, obj: Obj) -> bytes:
    """The message `message` for the JSON object `obj`, fields in number order as Go writes
    them; keys the message does not have are left out."""
    fields = MESSAGES[message]
    parts: list[tuple[int, bytes]] = []
    exts = [(k, v) for k, v in obj.items() if k.startswith(EXT)]
    for key, (number, kind, sub) in fields.items():
        if key == EXT:
            data = b"".join(len_field(number, _named(k, _any(v))) for k, v in exts)
        elif kind == "paths":  # every key of a Paths object that is not an extension
            data = b"".join(
                len_field(number, _named(k, encode(sub, v)))
                for k, v in obj.items()
                if not k.startswith(EXT) and isinstance(v, dict)
            )
        elif key not in obj:
            continue
        else:
            data = _field(number, kind, sub, obj[key])
        parts.append((number, data))
    return b"".join(data for _, data in sorted(parts, key=lambda p: p[0]))


def _field(number: int, kind: str, sub: str, value: Any) -> bytes:
    if kind == "msg":
        return len_field(number, encode(sub, value)) if isinstance(value, dict) else b""
    if kind == "msgs":
        if not isinstance(value, list):
            return b""
        return b"".join(len_field(number, encode(sub, v)) for v in value if isinstance(v, dict))
    if kind == "named":  # Definitions / Properties: {1: repeated NamedSchema}
        if not isinstance(value, dict):
            return b""
        body = b"".join(
            len_field(1, _named(k, encode(sub, v))) for k, v in value.items() if isinstance(v, dict)
        )
        return len_field(number, body)
    if kind == "any":
        return len_field(number, _any(value))
    if kind == "anys":
        if not isinstance(value, list):
            return b""
        return b"".join(len_field(number, _any(v)) for v in value)
    if kind == "types":  # TypeItem {1: repeated string}
        types = [value] if isinstance(value, str) else value
        return len_field(number, _scalar(1, "strs", types))
    if kind == "items":  # ItemsItem {1: repeated Schema}
        schemas = value if isinstance(value, list) else [value]
        return len_field(number, _field(1, "msgs", "Schema", schemas))
    if kind == "extra":  # AdditionalPropertiesItem: oneof {1: Schema, 2: bool}
        if isinstance(value, bool):
            return len_field(number, varint_field(2, int(value)))  # a oneof keeps false
        return len_field(number, len_field(1, encode("Schema", value))) if value else b""
    return _scalar(number, kind, value)


def encode_document(doc: Obj) -> bytes:
    """The gnostic ``openapi_v2.Document`` for a swagger 2.0 JSON document."""
    return encode("Document", doc)


_LAST: list[tuple[Obj, Obj, bytes]] = []


def document_bytes(doc: Obj) -> bytes:
    """`encode_document`, cached on the identity of the (cached) definitions."""
    defs = doc.get("definitions")
    key = {k: v for k, v in doc.items() if k != "definitions"}
    for cached_defs, cached_key, data in _LAST:
        if cached_defs is defs and cached_key == key:
            return data
    data = encode_document(doc)
    _LAST[:] = [(defs if isinstance(defs, dict) else {}, key, data)]
    return data


# --- decoding (the inverse: tests read what kubectl reads) ----------------------------------


def decode(message: str, data: bytes) -> Obj:
    """The JSON object of a `message`; unknown fields are skipped, wrong wire types refused."""
    by_number = BY_NUMBER[message]
    out: Obj = {}
    for number, wire_type, value in iter_fields(data):
        hit = by_number.get(number)
        if hit is None:
            continue
        key, field = hit
        kind = field[1]
        want = VARINT if kind in ("bool", "int") else I64 if kind == "double" else LEN
        if wire_type != want:
            raise DecodeError(f"{message} field {number}: wrong wire type {wire_type}")
        if isinstance(value, bytes):
            _decode_len(out, f"{message}.{key}", field, value)
        elif kind == "bool":
            out[key] = bool(value)
        elif kind == "int":
            out[key] = signed(value, 64)
        else:
            out[key] = struct.unpack("<d", value.to_bytes(8, "little"))[0]
    return out


def _decode_len(out: Obj, where: str, field: Field, value: bytes) -> None:
    """A length-delimited field `where` (Message.key) into `out`."""
    key = where.split(".", 1)[1]
    _, kind, sub = field
    simple: dict[str, Callable[[bytes], Any]] = {
        "str": lambda v: utf8(v, where),
        "msg": lambda v: decode(sub, v),
        "any": _decode_any,
        "named": lambda v: _decode_named(sub, v, 1),
        "types": lambda v: _one([utf8(t, "TypeItem") for _, _, t in _len_fields(v, 1)]),
        "items": lambda v: _one([decode("Schema", s) for _, _, s in _len_fields(v, 1)]),
        "extra": _decode_extra,
    }
    if kind in simple:
        out[key] = simple[kind](value)
    elif kind == "strs":
        out.setdefault(key, []).append(utf8(value, where))
    elif kind == "msgs":
        out.setdefault(key, []).append(decode(sub, value))
    elif kind == "anys":
        out.setdefault(key, []).append(_decode_any(value))
    elif kind == "ext":
        name, raw = _pair(value)
        out[name] = _decode_any(raw)
    elif kind == "paths":
        name, raw = _pair(value)
        out[name] = decode(sub, raw)


def _one(values: list[Any]) -> Any:
    """A TypeItem or ItemsItem as JSON: its only value alone, as gnostic writes it."""
    return values[0] if len(values) == 1 else values


def _len_fields(data: bytes, number: int) -> list[tuple[int, int, bytes]]:
    found = []
    for n, wire_type, value in iter_fields(data):
        if n == number:
            if wire_type != LEN or not isinstance(value, bytes):
                raise DecodeError(f"field {n}: wrong wire type {wire_type}")
            found.append((n, wire_type, value))
    return found


def _pair(data: bytes) -> tuple[str, bytes]:
    """A Named<message>: its name and its value's bytes."""
    name, value = "", b""
    for n, _, raw in iter_fields(data):
        if n == 1 and isinstance(raw, bytes):
            name = utf8(raw, "name")
        elif n == 2 and isinstance(raw, bytes):
            value = raw
    return name, value


def _decode_named(sub: str, data: bytes, number: int) -> Obj:
    out: Obj = {}
    for _, _, raw in _len_fields(data, number):
        name, value = _pair(raw)
        out[name] = decode(sub, value)
    return out


def _decode_any(data: bytes) -> Any:
    for n, _, raw in iter_fields(data):
        if n == 2 and isinstance(raw, bytes):
            return json.loads(utf8(raw, "Any.yaml"))
    return None


def _decode_extra(data: bytes) -> Any:
    for n, _, raw in iter_fields(data):
        if n == 1 and isinstance(raw, bytes):
            return decode("Schema", raw)
        if n == 2 and isinstance(raw, int):
            return bool(raw)
    return None


def decode_document(data: bytes) -> Obj:
    return decode("Document", data)


# --- serving -------------------------------------------------------------------------------


def negotiate(accept: str) -> str | None:
    """The media type to answer with, as kube-openapi picks it: the Accept clauses by
    preference (q, then specificity), the first one JSON or protobuf matches; None: 406."""
    clauses: list[tuple[float, bool, bool, str, str]] = []
    for part in (accept or "*/*").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        kind, _, subtype = media.partition("/")
        if not kind:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        clauses.append((-q, kind == "*", subtype == "*", kind, subtype or "*"))
    for _, _, _, kind, subtype in sorted(clauses, key=lambda c: c[:3]):
        for want_kind, want_sub, answer in _ACCEPTED:
            if kind in (want_kind, "*") and subtype in (want_sub, "*"):
                return answer
    return None


def answer(request: web.Request, doc: Obj) -> Obj | web.Response:
    """GET /openapi/v2: the JSON document as is (the router writes it) or the protobuf
    answer, as the Accept header asks; 406 when it asks for neither."""
    media = negotiate(request.headers.get("Accept", ""))
    if media == MEDIA_JSON:
        return doc
    if media is None:
        raise ApiError(406, f"only {MEDIA_JSON} and {MEDIA_PROTOBUF} are served", "NotAcceptable")
    resp = web.Response(body=document_bytes(doc), content_type=MEDIA_PROTOBUF)
    resp.headers["Vary"] = "Accept"
    return resp
