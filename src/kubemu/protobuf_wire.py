"""The protobuf wire format, and the Kubernetes envelope around it.

Only what Kubernetes' generated messages use: varints (wire type 0) and length-delimited
fields (2); fixed 64/32-bit fields (1, 5) are skipped when unknown. A Kubernetes protobuf body
is the magic `k8s\\0` followed by a runtime.Unknown message:
`{1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding, 4: contentType}`
(k8s.io/apimachinery/pkg/runtime/generated.proto), `raw` holding the object's message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"k8s\x00"
VARINT, I64, LEN, I32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


class DecodeError(ValueError):
    """Bytes that are not a well-formed message (the request is a 400)."""


def encode_varint(value: int) -> bytes:
    """Base-128 varint; a negative number is its 64-bit two's complement (10 bytes)."""
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at `pos`, and the position after it."""
    result = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _MASK64, i + 1
        shift += 7
    if len(data) - pos >= 10:
        raise DecodeError("varint longer than 10 bytes")
    raise DecodeError("truncated varint")


def signed(value: int, bits: int) -> int:
    """A varint's value as the signed integer of `bits` bits it encodes."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def tag(number: int, wire_type: int) -> bytes:
    return encode_varint(number << 3 | wire_type)


def len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag(number, LEN) + encode_varint(len(payload)) + payload


def varint_field(number: int, value: int) -> bytes:
    return tag(number, VARINT) + encode_varint(value)


def iter_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field: an int for varints and fixed
    fields, the bytes of a length-delimited one. Groups (wire types 3, 4) are refused."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = decode_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        value: int | bytes
        if wire_type == VARINT:
            value, pos = decode_varint(data, pos)
        elif wire_type == LEN:
            size, pos = decode_varint(data, pos)
            if size > end - pos:
                raise DecodeError(f"field {number}: length {size} past the end of the message")
            value, pos = data[pos : pos + size], pos + size
        elif wire_type in (I64, I32):
            width = 8 if wire_type == I64 else 4
            if pos + width > end:
                raise DecodeError(f"field {number}: truncated fixed-width value")
            value, pos = int.from_bytes(data[pos : pos + width], "little"), pos + width
        else:
            raise DecodeError(f"field {number}: unsupported wire type {wire_type}")
        yield number, wire_type, value


def utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise DecodeError(f"{what}: invalid UTF-8") from None


@dataclass(frozen=True)
class Envelope:
    """A runtime.Unknown: the object's type and its encoded message."""

    api_version: str
    kind: str
    raw: bytes
    content_encoding: str = ""
    content_type: str = ""


def unwrap(body: bytes) -> Envelope:
    """Check the magic and read the runtime.Unknown after it."""
    if not body.startswith(MAGIC):
        raise DecodeError("the body does not start with the Kubernetes protobuf magic k8s\\0")
    fields: dict[int, bytes] = {}
    for number, wire_type, value in iter_fields(body[len(MAGIC) :]):
        if number in (1, 2, 3, 4):
            if wire_type != LEN or not isinstance(value, bytes):
                raise DecodeError(f"runtime.Unknown field {number}: wrong wire type {wire_type}")
            fields[number] = value
    type_meta: dict[int, str] = {}
    for number, wire_type, value in iter_fields(fields.get(1, b"")):
        if number in (1, 2):
            if wire_type != LEN or not isinstance(value, bytes):
                raise DecodeError(f"runtime.TypeMeta field {number}: wrong wire type {wire_type}")
            type_meta[number] = utf8(value, "typeMeta")
    return Envelope(
        api_version=type_meta.get(1, ""),
        kind=type_meta.get(2, ""),
        raw=fields.get(2, b""),
        content_encoding=utf8(fields.get(3, b""), "contentEncoding"),
        content_type=utf8(fields.get(4, b""), "contentType"),
    )


def wrap(api_version: str, kind: str, raw: bytes) -> bytes:
    """The magic and a runtime.Unknown as Go writes it (empty encoding and content type)."""
    type_meta = len_field(1, api_version.encode()) + len_field(2, kind.encode())
    return (
        MAGIC + len_field(1, type_meta) + len_field(2, raw) + len_field(3, b"") + len_field(4, b"")
    )
