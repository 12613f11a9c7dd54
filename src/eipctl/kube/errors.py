"""One exception tree for Kubernetes API failures.

Callers branch on meaning (NotFound, Conflict, Gone...) rather than on HTTP numbers,
and the transport error stays reachable through ``__cause__``.
"""

# ruff: noqa: N818  (names mirror Kubernetes Status reasons: NotFound, Conflict, Gone...)
from __future__ import annotations

import json
from typing import Any


class KubeConfigError(Exception):
    """No usable way to reach the API (kubeconfig missing or malformed, not in a cluster):
    a usage error the process reports in one line, not a crash."""


class ApiError(Exception):
    """A failed API request: HTTP status, Kubernetes Status reason and message."""

    retryable: bool = False

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409 with reason Conflict: the resourceVersion precondition failed."""


class AlreadyExists(ApiError):
    """409 with reason AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server's history; relist."""


class Invalid(ApiError):
    """422 (or 400): the server rejected the object itself; retrying cannot help."""


class Forbidden(ApiError):
    """401/403: RBAC or authentication; retrying cannot help."""


class ServerError(ApiError):
    """5xx, 429 or a transport failure: worth retrying with backoff."""

    retryable = True


class TransportError(ServerError):
    """The request never got an HTTP answer (connection refused, reset, timeout)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Transport", message)


def _status_fields(body: str | bytes | None) -> tuple[str, str]:
    if not body:
        return "", ""
    try:
        data: Any = json.loads(body)
    except (ValueError, TypeError):
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        return "", text[:200]
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("reason") or ""), str(data.get("message") or "")


def error_for(status: int, body: str | bytes | None = None) -> ApiError:
    """The ApiError subclass for an HTTP status and (optional) Status body."""
    reason, message = _status_fields(body)
    cls: type[ApiError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status in (400, 422):
        cls = Invalid
    elif status in (401, 403):
        cls = Forbidden
    elif status == 429 or status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(status, reason, message)


def is_retryable(exc: BaseException) -> bool:
    """True for errors where the same request may succeed later."""
    return isinstance(exc, ApiError) and exc.retryable


def server_answered(exc: BaseException) -> bool:
    """Whether a failed request still shows that the API server answers: an HTTP status
    below 500 (a 429 of API Priority and Fairness, a 403, a 409 are answers; a 503 from a
    load balancer with no server behind it, or a 504 of an etcd timeout, are not)."""
    return isinstance(exc, ApiError) and 0 < exc.status < 500
