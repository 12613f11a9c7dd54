"""Kubernetes protobuf bodies for the built-in kinds: requests decoded, answers encoded.

kubectl's imperative commands (`create namespace|configmap|secret|service|deployment`,
`expose`, ...) and `kubectl auth can-i|whoami` POST `application/vnd.kubernetes.protobuf` and
accept it first. The middleware turns such a body into the JSON object the handlers take, and
an answer into protobuf when the client asks for it first and the object fits the tables
(`protobuf_types.py`); any other answer stays JSON, which clients accept as their second choice.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from . import errors
from .errors import ApiError
from .handlers import error_response
from .protobuf_types import KINDS, MESSAGES, PLURALS, Field, Message
from .protobuf_wire import (
    LEN,
    VARINT,
    DecodeError,
    iter_fields,
    len_field,
    signed,
    unwrap,
    utf8,
    varint_field,
    wrap,
)

PROTOBUF = "application/vnd.kubernetes.protobuf"
Obj = dict[str, Any]
_VARINT_KINDS = frozenset({"bool", "int32", "int64"})
_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_OBJECTS = frozenset(m.name for m in KINDS.values())  # list items carry apiVersion, kind
_BY_NUMBER: dict[str, dict[int, Field]] = {name: m.by_number() for name, m in MESSAGES.items()}


class UnencodableError(Exception):
    """A JSON object the tables cannot represent (it is then answered as JSON)."""


# --- decoding: protobuf -> JSON, empty values left out as Go's omitempty does ------------


def decode_object(body: bytes, path: str = "", method: str = "POST") -> Obj:
    """A `k8s\\0` + runtime.Unknown body as a JSON object; DecodeError when malformed,
    ApiError 415 for a kind the tables do not know."""
    env = unwrap(body)
    api_version, kind = env.api_version, env.kind
    if not kind:  # no typeMeta: what the request names, as the apiserver decodes into it
        api_version, kind = ("v1", "DeleteOptions") if method == "DELETE" else _kind_of_path(path)
    msg = KINDS.get((api_version, kind))
    if msg is None or env.content_encoding:
        what = f"{kind or 'this kind'} ({api_version})" if not env.content_encoding else "encoded"
        raise ApiError(
            415,
            f"the body of the request was in an unknown format - {what} is not accepted as "
            f"{PROTOBUF} by the emulator; accepted media types include: application/json, "
            "application/yaml",
            "UnsupportedMediaType",
        )
    return {"apiVersion": api_version, "kind": kind, **decode_message(msg, env.raw)}


def _kind_of_path(path: str) -> tuple[str, str]:
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return PLURALS.get(rest[0], ("", "")) if rest else ("", "")


def decode_message(msg: Message, data: bytes) -> Obj:
    """One message as JSON. Unknown fields are skipped (a real server drops them too)."""
    fields = _BY_NUMBER[msg.name]
    values: dict[int, Any] = {}
    for number, wire_type, value in iter_fields(data):
        f = fields.get(number)
        if f is None:
            continue
        want = VARINT if f.kind in _VARINT_KINDS and not f.map else LEN
        if wire_type != want:
            raise DecodeError(f"{msg.name} field {number}: wire type {wire_type}, not {want}")
        if f.map:
            key, item = _decode_entry(f, _bytes(value))
            values.setdefault(number, {})[key] = item
        elif f.repeated:
            values.setdefault(number, []).append(_decode_value(f.kind, value))
        else:
            values[number] = _decode_value(f.kind, value)
    out: Obj = {}
    for f in msg.fields:
        if f.number not in values:
            continue
        v = values[f.number]
        if f.inline:
            out.update(v)
        elif f.keep or (f.pointer and v is not None) or not _empty(v):
            out[f.name] = v
    return out


def _empty(v: Any) -> bool:
    """What Go's omitempty leaves out (and an unset Time or IntOrString)."""
    return v is None or v is False or v in ("", 0, {}, [])


def _bytes(value: int | bytes) -> bytes:
    assert isinstance(value, bytes)  # the wire type was checked
    return value


def _int(value: int | bytes) -> int:
    assert isinstance(value, int)
    return value


def _decode_entry(f: Field, data: bytes) -> tuple[str, Any]:
    key, item = "", _decode_value(f.kind, b"")
    for number, wire_type, value in iter_fields(data):
        if number in (1, 2) and wire_type != LEN:
            raise DecodeError(f"map entry field {number}: wire type {wire_type}, not {LEN}")
        if number == 1:
            key = utf8(_bytes(value), "map key")
        elif number == 2:
            item = _decode_value(f.kind, value)
    return key, item


def _decode_value(kind: str, value: int | bytes) -> Any:
    if kind == "bool":
        return bool(value)
    if kind in _INT_RANGE:
        return signed(_int(value), 32 if kind == "int32" else 64)
    raw = _bytes(value)
    if kind == "string":
        return utf8(raw, "string")
    if kind == "bytes":
        return base64.b64encode(raw).decode()
    if kind == "Time":
        return _decode_time(raw)
    if kind == "IntOrString":
        parts = _plain_fields(raw)
        if parts.get(1) == 1:
            return utf8(_bytes(parts.get(3, b"")), "IntOrString")
        return signed(_int(parts.get(2, 0)), 32)
    if kind == "Quantity":
        return utf8(_bytes(_plain_fields(raw).get(1, b"")), "Quantity") or "0"
    if kind == "ExtraValue":  # {1: repeated string items}, in JSON the bare list
        items = []
        for number, wire_type, item in iter_fields(raw):
            if number == 1:
                if wire_type != LEN:
                    raise DecodeError(f"ExtraValue.items: wire type {wire_type}, not {LEN}")
                items.append(utf8(_bytes(item), "ExtraValue"))
        return items
    return decode_message(MESSAGES[kind], raw)


def _plain_fields(raw: bytes) -> dict[int, int | bytes]:
    """The fields of a small special message; varints at 1-2 of Time, 1-2 of IntOrString."""
    out: dict[int, int | bytes] = {}
    for number, wire_type, value in iter_fields(raw):
        if wire_type not in (VARINT, LEN):
            raise DecodeError(f"field {number}: unexpected wire type {wire_type}")
        out[number] = value
    return out


def _decode_time(raw: bytes) -> str | None:
    """metav1.Time: empty is the zero time (JSON null); nanoseconds are dropped, as in Go."""
    if not raw:
        return None
    seconds = _plain_fields(raw).get(1, 0)
    if not isinstance(seconds, int):
        raise DecodeError("Time.seconds: wrong wire type")
    try:
        moment = datetime.fromtimestamp(signed(seconds, 64), UTC)
    except (OverflowError, OSError, ValueError):
        raise DecodeError(f"Time.seconds out of range: {signed(seconds, 64)}") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- encoding: a JSON object -> protobuf, or UnencodableError ---------------------------------


def encode_object(obj: Any) -> bytes:
    """A JSON object of a known kind as `k8s\\0` + runtime.Unknown; UnencodableError otherwise."""
    if not isinstance(obj, dict):
        raise UnencodableError("not an object")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise UnencodableError("no apiVersion and kind")
    msg = KINDS.get((api_version, kind))
    if msg is None:
        raise UnencodableError(f"no protobuf for {kind} ({api_version})")
    return wrap(api_version, kind, encode_message(msg, obj))


def encode_message(msg: Message, obj: Any, path: str = "") -> bytes:
    """One message, fields in number order as Go writes them; every key must be known."""
    if not isinstance(obj, dict):
        raise UnencodableError(f"{path or msg.name}: not an object")
    rest = dict(obj)
    if msg.name in _OBJECTS:  # TypeMeta is not in the message (it is the envelope's)
        rest.pop("apiVersion", None)
        rest.pop("kind", None)
    out = bytearray()
    for f in msg.fields:
        if f.inline:
            names = {g.name for g in MESSAGES[f.kind].fields}
            sub = {k: rest.pop(k) for k in list(rest) if k in names}
            if sub:
                out += len_field(f.number, encode_message(MESSAGES[f.kind], sub, path))
            continue
        v = rest.pop(f.name, None)
        if v is not None:
            out += _encode_field(f, v, f"{path}.{f.name}")
    if rest:
        raise UnencodableError(f"{path}.{next(iter(rest))}: not in the {msg.name} table")
    return bytes(out)


def _encode_field(f: Field, v: Any, path: str) -> bytes:
    if f.map:
        if not isinstance(v, dict):
            raise UnencodableError(f"{path}: not a map")
        out = bytearray()
        for key in sorted(v):  # Go writes map entries sorted by key
            entry = _encode_value("string", 1, key, path) + _encode_value(f.kind, 2, v[key], path)
            out += len_field(f.number, entry)
        return bytes(out)
    if f.repeated:
        if not isinstance(v, list):
            raise UnencodableError(f"{path}: not a list")
        return b"".join(_encode_value(f.kind, f.number, item, path) for item in v)
    return _encode_value(f.kind, f.number, v, path)


def _encode_value(kind: str, number: int, v: Any, path: str) -> bytes:
    if kind == "bool" and isinstance(v, bool):
        return varint_field(number, int(v))
    if kind in _INT_RANGE and isinstance(v, int) and not isinstance(v, bool):
        low, high = _INT_RANGE[kind]
        if low <= v <= high:
            return varint_field(number, v)
    elif kind == "string" and isinstance(v, str):
        return len_field(number, _utf8(v, path))
    elif kind == "bytes" and isinstance(v, str):
        try:
            return len_field(number, base64.b64decode(v, validate=True))
        except (binascii.Error, ValueError):
            raise UnencodableError(f"{path}: not base64") from None
    elif kind == "Time" and isinstance(v, str):
        return len_field(number, varint_field(1, _parse_time(v, path)) + varint_field(2, 0))
    elif kind == "IntOrString" and isinstance(v, int | str) and not isinstance(v, bool):
        if isinstance(v, str):
            return len_field(number, varint_field(1, 1) + varint_field(2, 0) + _str(3, v, path))
        if _INT_RANGE["int32"][0] <= v <= _INT_RANGE["int32"][1]:
            return len_field(number, varint_field(1, 0) + varint_field(2, v) + _str(3, "", path))
    elif kind == "Quantity" and isinstance(v, str | int) and not isinstance(v, bool):
        return len_field(number, _str(1, str(v), path))
    elif kind == "ExtraValue" and isinstance(v, list) and all(isinstance(s, str) for s in v):
        return len_field(number, b"".join(_str(1, s, path) for s in v))
    elif kind in MESSAGES:
        return len_field(number, encode_message(MESSAGES[kind], v, path))
    raise UnencodableError(f"{path}: {v!r} is not a {kind}")


def _str(number: int, v: str, path: str) -> bytes:
    return len_field(number, _utf8(v, path))


def _utf8(v: str, path: str) -> bytes:
    try:
        return v.encode()
    except UnicodeEncodeError:
        raise UnencodableError(f"{path}: not UTF-8") from None


def _parse_time(v: str, path: str) -> int:
    try:
        moment = datetime.fromisoformat(v)
    except ValueError:
        raise UnencodableError(f"{path}: {v!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise UnencodableError(f"{path}: {v!r} has no time zone")
    return int(moment.timestamp())


# --- HTTP: the aiohttp middleware ----------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def wants_protobuf(accept: str) -> bool:
    """The client's first choice is plain protobuf (not a Table, not a watch stream)."""
    return accept.split(",", maxsplit=1)[0].strip() == PROTOBUF


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A protobuf POST/PUT/DELETE body becomes JSON for the handlers; an answer becomes protobuf
    when the client asks for it first and it fits. Malformed bytes are a 400 Status."""
    media = request.headers.get("Content-Type", "").split(";")[0].strip()
    resp: web.StreamResponse
    if media == PROTOBUF and request.method in ("POST", "PUT", "DELETE"):
        headers = request.headers.copy()
        headers["Content-Type"] = "application/json"
        as_json = request.clone(headers=headers)  # aiohttp clones only before the body is read
        try:
            raw = await as_json.read()  # empty (a DELETE without options) stays empty
            if raw:
                as_json._read_bytes = json.dumps(
                    decode_object(raw, request.path, request.method)
                ).encode()  # what the handlers' read() now returns
        except DecodeError as exc:
            resp = error_response(
                errors.bad_request(f"the protobuf body could not be decoded: {exc}")
            )
        except ApiError as err:
            resp = error_response(err)
        else:
            resp = await handler(as_json)
    else:
        resp = await handler(request)
    if wants_protobuf(request.headers.get("Accept", "")):
        _to_protobuf(resp)
    return resp


def _to_protobuf(resp: web.StreamResponse) -> None:
    """A JSON answer re-encoded in place, when its object fits the tables."""
    if not isinstance(resp, web.Response) or resp.content_type != "application/json":
        return
    if not isinstance(resp.body, bytes):
        return
    try:
        data = encode_object(json.loads(resp.body))
    except (ValueError, UnencodableError):
        return
    resp.body = data
    resp.content_type = PROTOBUF
