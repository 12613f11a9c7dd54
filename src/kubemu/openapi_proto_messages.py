"""The message table of gnostic's ``openapiv2/OpenAPIv2.proto`` that openapi_proto.py encodes.

Kept apart from the codec so that the field numbers, the one part pinned to an outside schema
(github.com/google/gnostic-models), read as data to check against the .proto. Only the messages
and fields the served JSON document holds are listed.
"""

from __future__ import annotations

# Each message maps a JSON key to (field number, kind, message).
# kinds: str, strs (repeated string), bool, int (int64), double, msg, msgs (repeated message),
# any / anys (Any{yaml}), named (a JSON object as repeated Named<message>{1: name, 2: value}),
# types (TypeItem), items (ItemsItem), extra (AdditionalPropertiesItem)
Field = tuple[int, str, str]
EXT = "x-"
MESSAGES: dict[str, dict[str, Field]] = {
    "Document": {
        "swagger": (1, "str", ""),
        "info": (2, "msg", "Info"),
        "host": (3, "str", ""),
        "basePath": (4, "str", ""),
        "schemes": (5, "strs", ""),
        "consumes": (6, "strs", ""),
        "produces": (7, "strs", ""),
        "paths": (8, "msg", "Paths"),
        "definitions": (9, "named", "Schema"),
        "externalDocs": (15, "msg", "ExternalDocs"),
        EXT: (16, "ext", ""),
    },
    "Info": {
        "title": (1, "str", ""),
        "version": (2, "str", ""),
        "description": (3, "str", ""),
        "termsOfService": (4, "str", ""),
        EXT: (7, "ext", ""),
    },
    "Paths": {EXT: (1, "ext", ""), "": (2, "paths", "PathItem")},
    "PathItem": {
        "$ref": (1, "str", ""),
        "get": (2, "msg", "Operation"),
        "put": (3, "msg", "Operation"),
        "post": (4, "msg", "Operation"),
        "delete": (5, "msg", "Operation"),
        "options": (6, "msg", "Operation"),
        "head": (7, "msg", "Operation"),
        "patch": (8, "msg", "Operation"),
        EXT: (10, "ext", ""),
    },
    "Operation": {
        "tags": (1, "strs", ""),
        "summary": (2, "str", ""),
        "description": (3, "str", ""),
        "externalDocs": (4, "msg", "ExternalDocs"),
        "operationId": (5, "str", ""),
        "produces": (6, "strs", ""),
        "consumes": (7, "strs", ""),
        "schemes": (10, "strs", ""),
        "deprecated": (11, "bool", ""),
        EXT: (13, "ext", ""),
    },
    "ExternalDocs": {"description": (1, "str", ""), "url": (2, "str", ""), EXT: (3, "ext", "")},
    "Schema": {
        "$ref": (1, "str", ""),
        "format": (2, "str", ""),
        "title": (3, "str", ""),
        "description": (4, "str", ""),
        "default": (5, "any", ""),
        "multipleOf": (6, "double", ""),
        "maximum": (7, "double", ""),
        "exclusiveMaximum": (8, "bool", ""),
        "minimum": (9, "double", ""),
        "exclusiveMinimum": (10, "bool", ""),
        "maxLength": (11, "int", ""),
        "minLength": (12, "int", ""),
        "pattern": (13, "str", ""),
        "maxItems": (14, "int", ""),
        "minItems": (15, "int", ""),
        "uniqueItems": (16, "bool", ""),
        "maxProperties": (17, "int", ""),
        "minProperties": (18, "int", ""),
        "required": (19, "strs", ""),
        "enum": (20, "anys", ""),
        "additionalProperties": (21, "extra", ""),
        "type": (22, "types", ""),
        "items": (23, "items", ""),
        "allOf": (24, "msgs", "Schema"),
        "properties": (25, "named", "Schema"),
        "discriminator": (26, "str", ""),
        "readOnly": (27, "bool", ""),
        "externalDocs": (29, "msg", "ExternalDocs"),
        "example": (30, "any", ""),
        EXT: (31, "ext", ""),
    },
}
BY_NUMBER = {m: {f[0]: (k, f) for k, f in fields.items()} for m, fields in MESSAGES.items()}
