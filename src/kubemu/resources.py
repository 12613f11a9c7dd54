"""Resource types the emulator serves: the built-in ones and those CRDs add."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import ApiError

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    """One servable resource at one group/version (what discovery lists)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False
    schema: dict[str, Any] | None = None
    printer_columns: tuple[dict[str, Any], ...] = ()
    from_crd: bool = False
    storage_key: tuple[str, str] = ("", "")
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def group_version(self) -> str:
        """apiVersion as written in objects: "v1" for core, "group/version" otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Objects are stored per group and plural, whatever version is asked for."""
        return (self.group, self.plural)


def _core(
    plural: str, kind: str, namespaced: bool, short: tuple[str, ...] = (), status: bool = False
) -> ResourceType:
    return ResourceType(
        "",
        "v1",
        plural,
        kind,
        namespaced,
        kind.lower(),
        short,
        has_status=status,
        storage_key=("", plural),
    )


def _grp(
    group: str,
    plural: str,
    kind: str,
    namespaced: bool,
    *,
    short: tuple[str, ...] = (),
    status: bool = False,
) -> ResourceType:
    return ResourceType(
        group,
        "v1",
        plural,
        kind,
        namespaced,
        kind.lower(),
        short,
        has_status=status,
        storage_key=(group, plural),
    )


BUILTIN: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", False, ("ns",), status=True),
    _core("services", "Service", True, ("svc",), status=True),
    _core("nodes", "Node", False, ("no",), status=True),
    _core("pods", "Pod", True, ("po",), status=True),
    _core("events", "Event", True, ("ev",)),
    _core("configmaps", "ConfigMap", True, ("cm",)),
    _core("secrets", "Secret", True),
    _core("serviceaccounts", "ServiceAccount", True, ("sa",)),
    _core("endpoints", "Endpoints", True, ("ep",)),
    _grp("coordination.k8s.io", "leases", "Lease", True),
    _grp("discovery.k8s.io", "endpointslices", "EndpointSlice", True),
    _grp(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short=("crd", "crds"),
        status=True,
    ),
    _grp("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
    _grp("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
    _grp("rbac.authorization.k8s.io", "roles", "Role", True),
    _grp("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", True),
    _grp("apps", "deployments", "Deployment", True, short=("deploy",), status=True),
    _grp("apps", "daemonsets", "DaemonSet", True, short=("ds",), status=True),
    _grp(
        "policy", "poddisruptionbudgets", "PodDisruptionBudget", True, short=("pdb",), status=True
    ),
    _grp("networking.k8s.io", "networkpolicies", "NetworkPolicy", True, short=("netpol",)),
    _grp("events.k8s.io", "events", "Event", True, short=("ev",)),
    _grp(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
        status=True,
    ),
    _grp(
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        False,
    ),
)

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD makes servable, one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    plural = names.get("plural", "")
    out = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        sub = ver.get("subresources") or {}
        schema = (ver.get("schema") or {}).get("openAPIV3Schema")
        out.append(
            ResourceType(
                group=group,
                version=ver.get("name", ""),
                plural=plural,
                kind=names.get("kind", ""),
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or names.get("kind", "").lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                has_status="status" in sub,
                schema=schema,
                printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
                from_crd=True,
                storage_key=(group, plural),
            )
        )
    return out


def check_crd(crd: dict[str, Any]) -> list[dict[str, str]]:
    """Structural checks a real apiserver makes on a CRD before accepting it."""
    causes: list[dict[str, str]] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}

    def bad(fld: str, msg: str) -> None:
        causes.append({"reason": "FieldValueInvalid", "field": fld, "message": msg})

    group, plural = spec.get("group", ""), names.get("plural", "")
    if not group or "." not in group:
        bad("spec.group", "should be a domain with at least one dot")
    if not plural:
        bad("spec.names.plural", "Required value")
    if not names.get("kind"):
        bad("spec.names.kind", "Required value")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        bad("spec.scope", 'Unsupported value: supported values: "Cluster", "Namespaced"')
    versions = spec.get("versions") or []
    if not versions:
        bad("spec.versions", "Required value")
    elif sum(1 for v in versions if v.get("storage")) != 1:
        bad(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        )
    name = (crd.get("metadata") or {}).get("name", "")
    if group and plural and name != f"{plural}.{group}":
        bad("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
    return causes


def crd_status(crd: dict[str, Any]) -> dict[str, Any]:
    """The status an apiserver gives an accepted CRD: names accepted, Established."""
    spec = crd.get("spec") or {}
    old = {c.get("type"): c for c in (crd.get("status") or {}).get("conditions") or []}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conds = [
        {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
        for t, r, m in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    for c in conds:  # a condition that stays True keeps its transition time
        c["lastTransitionTime"] = old.get(c["type"], {}).get("lastTransitionTime") or now
    stored = [v.get("name", "") for v in spec.get("versions") or [] if v.get("storage")]
    return {
        "acceptedNames": dict(spec.get("names") or {}),
        "conditions": conds,
        "storedVersions": stored,
    }


class Registry:
    """Which resource types are servable now; CRDs come and go."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._by_crd: dict[str, list[ResourceType]] = {}
        for t in BUILTIN:
            self._types[(t.group, t.version, t.plural)] = t

    def lookup(self, group: str, version: str, plural: str) -> ResourceType:
        """The type served at this URL, or 404 as the apiserver answers for unknown paths."""
        t = self._types.get((group, version, plural))
        if t is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return t

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        """Like lookup, without raising."""
        return self._types.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        """Every servable type."""
        return list(self._types.values())

    def by_storage_key(self, key: tuple[str, str]) -> ResourceType | None:
        """Any served version of the stored resource (to name it in messages and tables)."""
        for t in self._types.values():
            if t.key == key:
                return t
        return None

    def add_crd(self, crd: dict[str, Any]) -> None:
        """Make (or re-make) the CRD's resources servable."""
        name = crd["metadata"]["name"]
        self.remove_crd(name)
        types = types_from_crd(crd)
        for t in types:
            self._types[(t.group, t.version, t.plural)] = t
        self._by_crd[name] = types

    def remove_crd(self, name: str) -> list[ResourceType]:
        """Stop serving the CRD's resources; returns what was removed."""
        gone = self._by_crd.pop(name, [])
        for t in gone:
            self._types.pop((t.group, t.version, t.plural), None)
        return gone

    def groups(self) -> dict[str, list[str]]:
        """Group name -> versions, in a stable order (core group is "")."""
        out: dict[str, list[str]] = {}
        for t in self._types.values():
            vs = out.setdefault(t.group, [])
            if t.version not in vs:
                vs.append(t.version)
        return out
