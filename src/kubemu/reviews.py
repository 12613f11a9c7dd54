"""SelfSubjectAccessReview and SelfSubjectReview: what `kubectl auth can-i` and `kubectl auth
whoami` ask.

``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` answers whether the
requesting user may do what ``spec.resourceAttributes`` (or ``nonResourceAttributes``) says,
decided by the same RBAC rules as every request (`rbac.py`); without ``rbac=True`` the
emulator authorizes everything, so the answer is yes. ``POST
/apis/authentication.k8s.io/v1/selfsubjectreviews`` answers who the user is. Both are
create-only and stored nowhere (201 with the review; other verbs 405). Authenticated users may
create them, as the default ``system:basic-user`` binding allows.

kubectl sends both as protobuf, which protobuf.py turns into JSON first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors
from .identity import CURRENT_USER, RequestAttributes, UserInfo
from .rbac import MASTERS

if TYPE_CHECKING:
    from .engine import Engine

Obj = dict[str, Any]
AUTHZ = "authorization.k8s.io"
AUTHN = "authentication.k8s.io"
SSAR = (AUTHZ, "selfsubjectaccessreviews", "SelfSubjectAccessReview")
SSR = (AUTHN, "selfsubjectreviews", "SelfSubjectReview")
_ADMIN = UserInfo("kubernetes-admin", groups=(MASTERS, "system:authenticated"))


def review_path(path: str) -> tuple[str, str, str] | None:
    """(group, plural, kind) when `path` is a review collection this module answers."""
    parts = [p for p in path.split("/") if p]
    if len(parts) != 4 or parts[0] != "apis" or parts[2] != "v1":
        return None
    for review in (SSAR, SSR):
        if (parts[1], parts[3]) == review[:2]:
            return review
    return None


# ---- the answers ----------------------------------------------------------------------


def _user() -> UserInfo:
    return CURRENT_USER.get() or _ADMIN


def _invalid(field: str, message: str) -> errors.ApiError:
    return errors.invalid(
        AUTHZ,
        SSAR[2],
        "",
        [{"reason": "FieldValueInvalid", "field": field, "message": message}],
    )


def access_review(engine: Engine, body: Obj) -> Obj:
    """Answer a SelfSubjectAccessReview for the requesting user."""
    raw_spec = body.get("spec")
    spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
    res: Obj = spec.get("resourceAttributes") or {}
    non: Obj = spec.get("nonResourceAttributes") or {}
    if res and non:
        raise _invalid(
            "spec.nonResourceAttributes",
            "Invalid value: cannot be specified in combination with resourceAttributes",
        )
    if not res and not non:
        raise _invalid(
            "spec.resourceAttributes",
            "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes "
            "must be specified",
        )
    if res:
        attrs = RequestAttributes(
            verb=str(res.get("verb", "")),
            resource_request=True,
            path="",
            api_group=str(res.get("group", "")),
            api_version=str(res.get("version", "")),
            resource=str(res.get("resource", "")),
            subresource=str(res.get("subresource", "")),
            namespace=str(res.get("namespace", "")),
            name=str(res.get("name", "")),
        )
    else:
        attrs = RequestAttributes(
            verb=str(non.get("verb", "")), resource_request=False, path=str(non.get("path", ""))
        )
    rbac = engine.authorizer
    allowed = True if rbac is None else rbac.allowed(_user(), attrs)
    return {
        "kind": SSAR[2],
        "apiVersion": f"{AUTHZ}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": {"allowed": allowed},
    }


def self_review() -> Obj:
    """Answer a SelfSubjectReview: the requesting user's attributes."""
    user = _user().to_dict()
    if not user["uid"]:
        del user["uid"]
    if not user["extra"]:
        del user["extra"]
    return {
        "kind": SSR[2],
        "apiVersion": f"{AUTHN}/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": user},
    }
