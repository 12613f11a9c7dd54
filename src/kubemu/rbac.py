"""Authentication by bearer token and RBAC authorization, evaluated as Kubernetes does.

With `ApiServer(rbac=True)` every API request must carry a token the emulator handed out:
the admin token (group ``system:masters``, allowed everything, written to the default
kubeconfig) or one made with `Rbac.service_account_token`, which authenticates as
``system:serviceaccount:<namespace>:<name>`` with the groups and the node-name extra a bound
ServiceAccount token carries. Each resource request is then checked against the
ClusterRoles, Roles, ClusterRoleBindings and RoleBindings in the store, with the rules of
Kubernetes' RBAC authorizer: verbs, apiGroups, resources, ``resource/subresource`` and
``*/subresource``, resourceNames, and RoleBindings granting only inside their namespace.
Non-resource paths (discovery, /version, /openapi) are open to every authenticated user,
as the default ``system:discovery`` binding makes them, and so are the self reviews
(``system:basic-user``: `kubectl auth can-i`, `kubectl auth whoami`). A denial is a 403
Forbidden Status worded as Kubernetes words it, and is kept in `Rbac.denials` for tests.

A list or watch with a ``metadata.name=<x>`` field selector is authorized against name ``x``,
as Kubernetes does. Not emulated: aggregated ClusterRoles (aggregationRule), impersonation,
nonResourceURLs rules.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .identity import CURRENT_USER, RequestAttributes, UserInfo, request_attributes
from .store import Store

RBAC_GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
BASIC_USER = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)
"""What the default system:basic-user binding lets every authenticated user create
(`kubectl auth can-i`, `kubectl auth whoami`: reviews.py)."""

Obj = dict[str, Any]


def _listed(values: Any) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def rule_allows(rule: Obj, attrs: RequestAttributes) -> bool:
    """One PolicyRule against one resource request (k8s rbac/v1 RuleAllows)."""
    verbs = _listed(rule.get("verbs"))
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    groups = _listed(rule.get("apiGroups"))
    if "*" not in groups and attrs.api_group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not any(
        r in ("*", combined) or (attrs.subresource != "" and r == f"*/{attrs.subresource}")
        for r in _listed(rule.get("resources"))
    ):
        return False
    names = _listed(rule.get("resourceNames"))
    return not names or attrs.name in names


def _subject_matches(subject: Obj, user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name", "")
    if kind == "User":
        return bool(name == user.username)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(user.username == f"system:serviceaccount:{namespace}:{name}")
    return False


@dataclass(frozen=True)
class Denial:
    user: str
    attributes: RequestAttributes
    message: str


class Rbac:
    """Tokens, and the RBAC decision for each request, from the objects in `store`."""

    def __init__(self, store: Store, admin_token: str | None = None) -> None:
        self.store = store
        self.tokens: dict[str, UserInfo] = {}
        self.admin_token = admin_token or secrets.token_urlsafe(24)
        self.tokens[self.admin_token] = UserInfo(
            "kubernetes-admin", groups=(MASTERS, AUTHENTICATED)
        )
        self.denials: list[Denial] = []
        store.authorizer = self  # SelfSubjectAccessReviews are decided here (reviews.py)

    # -- authentication ----------------------------------------------------------------
    def add_token(self, user: UserInfo) -> str:
        """A new bearer token that authenticates as `user`."""
        token = secrets.token_urlsafe(24)
        self.tokens[token] = user
        return token

    def service_account_token(self, namespace: str, name: str, *, node: str = "") -> str:
        """A token like a pod's projected ServiceAccount token (with the node's name in the
        user's extra, as Kubernetes 1.30+ puts it for tokens bound to a pod on a node)."""
        extra = {NODE_NAME_EXTRA: (node,)} if node else {}
        return self.add_token(
            UserInfo(
                f"system:serviceaccount:{namespace}:{name}",
                uid=f"sa-{namespace}-{name}",
                groups=(
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{namespace}",
                    AUTHENTICATED,
                ),
                extra=extra,
            )
        )

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self.tokens.get(authorization[len("Bearer ") :])

    # -- authorization -----------------------------------------------------------------
    def rules_for(self, user: UserInfo, namespace: str) -> Iterator[Obj]:
        """Every rule granted to `user` that applies in `namespace` ("" = cluster scope)."""
        for binding in self.store.list(RBAC_GROUP, "clusterrolebindings"):
            if self._bound(binding, user, ""):
                yield from self._role_rules(binding.get("roleRef") or {}, "")
        if not namespace:
            return
        for binding in self.store.list(RBAC_GROUP, "rolebindings", namespace):
            if self._bound(binding, user, namespace):
                yield from self._role_rules(binding.get("roleRef") or {}, namespace)

    def _bound(self, binding: Obj, user: UserInfo, namespace: str) -> bool:
        subjects = binding.get("subjects") or []
        return any(_subject_matches(s, user, namespace) for s in subjects if isinstance(s, dict))

    def _role_rules(self, ref: Obj, namespace: str) -> Iterator[Obj]:
        kind, name = ref.get("kind"), str(ref.get("name", ""))
        if kind == "ClusterRole":
            role = self.store.find(RBAC_GROUP, "clusterroles", name)
        elif kind == "Role" and namespace:
            role = self.store.find(RBAC_GROUP, "roles", name, namespace)
        else:
            role = None
        for rule in (role or {}).get("rules") or []:
            if isinstance(rule, dict):
                yield rule

    def allowed(self, user: UserInfo, attrs: RequestAttributes) -> bool:
        if MASTERS in user.groups:
            return True
        if not attrs.resource_request:
            return AUTHENTICATED in user.groups  # system:discovery, system:public-info-viewer
        if (
            AUTHENTICATED in user.groups
            and attrs.verb == "create"
            and (attrs.api_group, attrs.resource) in BASIC_USER
        ):
            return True
        return any(rule_allows(r, attrs) for r in self.rules_for(user, attrs.namespace))

    def check(
        self, method: str, path: str, query: Mapping[str, str], authorization: str | None
    ) -> ApiError | None:
        """The middleware's question: None to serve the request (its user is then in
        `CURRENT_USER` for admission), or the 401/403 to answer instead."""
        user = self.authenticate(authorization)
        if user is None:
            return ApiError(401, "Unauthorized", "Unauthorized")
        CURRENT_USER.set(user)
        try:
            self.authorize(user, request_attributes(method, path, query))
        except ApiError as err:
            return err
        return None

    def authorize(self, user: UserInfo, attrs: RequestAttributes) -> None:
        """Raise 403 Forbidden unless `user` may do what `attrs` asks."""
        if self.allowed(user, attrs):
            return
        err = forbidden(user, attrs)
        self.denials.append(Denial(user.username, attrs, err.message))
        raise err


def forbidden(user: UserInfo, attrs: RequestAttributes) -> ApiError:
    """The 403 Status Kubernetes sends, word for word."""
    if not attrs.resource_request:
        return ApiError(
            403,
            f'forbidden: User "{user.username}" cannot {attrs.verb} path "{attrs.path}"',
            "Forbidden",
        )
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    what = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    message = (
        f'{what} is forbidden: User "{user.username}" cannot {attrs.verb} resource '
        f'"{resource}" in API group "{attrs.api_group}" {scope}'
    )
    details: Obj = {"group": attrs.api_group, "kind": attrs.resource}
    if attrs.name:
        details["name"] = attrs.name
    return ApiError(403, message, "Forbidden", details)
