"""API errors as metav1 Status bodies, so clients see the reasons a real apiserver sends."""

from __future__ import annotations

from typing import Any

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "AlreadyExists",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error the server answers with a Status body instead of an object."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        """The metav1 Status body for this error."""
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A failure metav1 Status, as the apiserver writes it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def _details(name: str, group: str, plural: str) -> dict[str, Any]:
    return {"name": name, "group": group, "kind": plural}


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    """404 for a missing object."""
    msg = f'{_qualified(group, plural)} "{name}" not found'
    return ApiError(404, msg, "NotFound", _details(name, group, plural))


def already_exists(group: str, plural: str, name: str) -> ApiError:
    """409 AlreadyExists: the name is taken, which callers use as an atomic reservation."""
    msg = f'{_qualified(group, plural)} "{name}" already exists'
    return ApiError(409, msg, "AlreadyExists", _details(name, group, plural))


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    """409 Conflict: the write was based on a stale resourceVersion (or a failed precondition)."""
    msg = f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}'
    return ApiError(409, msg, "Conflict", _details(name, group, plural))


def invalid(group: str, kind: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid with one cause per offending field; the message lists them as Kubernetes'
    aggregate error does (several in brackets, duplicates once)."""
    texts = list(dict.fromkeys(f"{c['field']}: {c['message']}" for c in causes))
    qual = f"{kind}.{group}" if group else kind
    msg = f'{qual} "{name}" is invalid'
    if texts:
        msg += ": " + (texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]")
    details = {"name": name, "group": group, "kind": kind, "causes": causes}
    return ApiError(422, msg, "Invalid", details)


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, message, "BadRequest")


def gone(message: str) -> ApiError:
    """410 Gone: the requested resourceVersion left the history window."""
    return ApiError(410, message, "Expired")


def method_not_allowed(verb: str, what: str) -> ApiError:
    """405 for a verb the resource does not support."""
    return ApiError(
        405,
        f"the server does not allow this method on the requested resource: {verb} {what}",
        "MethodNotAllowed",
    )
