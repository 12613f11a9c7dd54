"""Error mapping: HTTP status + Status reason -> one exception class."""

from __future__ import annotations

import json

import pytest

from eipctl.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TransportError,
    error_for,
    is_retryable,
)


@pytest.mark.parametrize(
    ("status", "reason", "cls", "retryable"),
    [
        (404, "NotFound", NotFound, False),
        (409, "Conflict", Conflict, False),
        (409, "AlreadyExists", AlreadyExists, False),
        (410, "Expired", Gone, False),
        (422, "Invalid", Invalid, False),
        (403, "Forbidden", Forbidden, False),
        (429, "TooManyRequests", ServerError, True),
        (500, "InternalError", ServerError, True),
        (503, "ServiceUnavailable", ServerError, True),
        (418, "Teapot", ApiError, False),
    ],
)
def test_status_maps_to_class(status: int, reason: str, cls: type, retryable: bool) -> None:
    err = error_for(status, json.dumps({"kind": "Status", "reason": reason, "message": "m"}))
    assert type(err) is cls
    assert (err.status, err.reason, err.message) == (status, reason, "m")
    assert is_retryable(err) is retryable


def test_non_json_body_and_transport() -> None:
    err = error_for(502, b"<html>bad gateway</html>")
    assert isinstance(err, ServerError) and "bad gateway" in err.message
    assert is_retryable(TransportError("reset"))
    assert not is_retryable(ValueError())
