"""Which field selectors each resource accepts, and the value each selects on.

A real apiserver converts every field label through the kind's conversion function before
listing: a label the kind does not know is a 400 BadRequest, worded by that function. Kinds
with their own function (core Pods, Nodes, Events, Namespaces, Secrets, Services, and
events.k8s.io Events) say ``field label not supported: <label>``; the rest take only
``metadata.name`` and ``metadata.namespace`` and say ``"<label>" is not a known field
selector: only "metadata.name", "metadata.namespace"``. Custom resources take
``metadata.name``, ``metadata.namespace`` when namespaced, and the version's
``selectableFields`` (``{jsonPath: .spec.x}`` selects on ``spec.x``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import bad_request
from .resources import CRD_KEY, ResourceType

if TYPE_CHECKING:
    from .engine import Engine

Obj = dict[str, Any]
Getter = Callable[[Obj], str]


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def path(dotted: str, default: str = "") -> Getter:
    """The value at a dotted path, as the field set holds it ("" or `default` when unset)."""
    parts = dotted.split(".")

    def get(obj: Obj) -> str:
        cur: Any = obj
        for part in parts:
            if not isinstance(cur, dict):
                return default
            cur = cur.get(part)
        return default if cur is None else _scalar(cur)

    return get


def _first_pod_ip(obj: Obj) -> str:
    status = obj.get("status") or {}
    if status.get("podIP"):
        return str(status["podIP"])
    ips = status.get("podIPs") or []
    return str((ips[0] or {}).get("ip", "")) if ips else ""


_NAME = {"metadata.name": path("metadata.name")}
_META = {**_NAME, "metadata.namespace": path("metadata.namespace")}


def _not_supported(label: str) -> str:
    return f"field label not supported: {label}"


def _meta_only(label: str) -> str:
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


@dataclass(frozen=True)
class FieldLabels:
    """The labels one resource accepts: label -> the value it selects on."""

    fields: Mapping[str, Getter]
    refuse: Callable[[str], str] = _not_supported

    def getter(self, label: str) -> Getter:
        """The value a label selects on, or 400 as the kind's conversion function says."""
        got = self.fields.get(label)
        if got is None:
            raise bad_request(self.refuse(label))
        return got


_EVENT_OBJECT = {
    f"involvedObject.{k}": path(f"involvedObject.{k}")
    for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
}
CORE_EVENT = FieldLabels(
    {
        **_META,
        **_EVENT_OBJECT,
        "reason": path("reason"),
        "reportingComponent": path("reportingComponent"),
        "source": path("source.component"),
        "type": path("type"),
    }
)
EVENTS_V1_EVENT = FieldLabels(
    {
        **_META,
        **{k.replace("involvedObject.", "regarding."): g for k, g in _EVENT_OBJECT.items()},
        "reason": path("reason"),
        "reportingController": path("reportingComponent"),
        "source": path("source.component"),
        "type": path("type"),
    }
)
"""events.k8s.io/v1 labels, read on the stored core Event (regarding = involvedObject)."""

BUILTIN: dict[tuple[str, str], FieldLabels] = {
    ("", "pods"): FieldLabels(
        {
            **_META,
            "spec.nodeName": path("spec.nodeName"),
            "spec.host": path("spec.nodeName"),
            "spec.restartPolicy": path("spec.restartPolicy"),
            "spec.schedulerName": path("spec.schedulerName"),
            "spec.serviceAccountName": path("spec.serviceAccountName"),
            "spec.hostNetwork": path("spec.hostNetwork", "false"),
            "status.phase": path("status.phase"),
            "status.podIP": _first_pod_ip,
            "status.nominatedNodeName": path("status.nominatedNodeName"),
        }
    ),
    ("", "nodes"): FieldLabels(
        {**_NAME, "spec.unschedulable": path("spec.unschedulable", "false")}
    ),
    ("", "namespaces"): FieldLabels({**_NAME, "status.phase": path("status.phase")}),
    ("", "events"): CORE_EVENT,
    ("events.k8s.io", "events"): EVENTS_V1_EVENT,
    ("", "secrets"): FieldLabels({**_META, "type": path("type")}),
    ("", "services"): FieldLabels(
        {**_META, "spec.clusterIP": path("spec.clusterIP"), "spec.type": path("spec.type")}
    ),
}
DEFAULT = FieldLabels(_META, _meta_only)


def _crd_labels(engine: Engine, rt: ResourceType) -> FieldLabels:
    fields: dict[str, Getter] = dict(_META if rt.namespaced else _NAME)
    crd_type = engine.registry.lookup(CRD_KEY[0], "v1", CRD_KEY[1])
    name = f"{rt.plural}.{rt.group}"
    for crd in engine.list_objects(crd_type, None, None):
        if crd["metadata"]["name"] != name:
            continue
        for ver in (crd.get("spec") or {}).get("versions") or []:
            if ver.get("name") != rt.version:
                continue
            for sel in ver.get("selectableFields") or []:
                label = str(sel.get("jsonPath", "")).lstrip(".")
                if label:
                    fields[label] = path(label)
    return FieldLabels(fields)


def labels_for(engine: Engine, rt: ResourceType) -> FieldLabels:
    """The field labels `rt` accepts."""
    if rt.from_crd:
        return _crd_labels(engine, rt)
    return BUILTIN.get(rt.key, DEFAULT)
