"""events.k8s.io/v1 Events as a view of the core v1 Events, as Kubernetes serves them.

Both APIs read and write the same stored Events (the events.k8s.io registry is the core
one, with a conversion), so an Event a controller records through core/v1 is listed and
watched under events.k8s.io/v1 too, and the other way round. The fields that differ:

| core/v1            | events.k8s.io/v1           |
|--------------------|----------------------------|
| involvedObject     | regarding                  |
| message            | note                       |
| source             | deprecatedSource           |
| firstTimestamp     | deprecatedFirstTimestamp   |
| lastTimestamp      | deprecatedLastTimestamp    |
| count              | deprecatedCount            |
| reportingComponent | reportingController        |

The rest (metadata, eventTime, series, action, reason, related, reportingInstance, type)
are the same. Field selectors use the events.k8s.io names (`regarding.name`,
`reportingController`; field_labels.py).
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]
KEY = ("events.k8s.io", "events")
API_VERSION = "events.k8s.io/v1"
_RENAMED = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
_BACK = {v: k for k, v in _RENAMED.items()}


def is_view(rt: ResourceType) -> bool:
    """Whether `rt` is served from the core Events."""
    return rt.key == KEY


def to_events_v1(core: Obj) -> Obj:
    """A stored core Event as events.k8s.io/v1 shows it."""
    out: Obj = {"eventTime": None}
    for k, v in core.items():
        out[_RENAMED.get(k, k)] = v
    out["apiVersion"], out["kind"] = API_VERSION, "Event"
    return out


def to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core Event it is stored as."""
    out: Obj = {}
    for k, v in event.items():
        if k == "eventTime" and v is None:
            continue  # core Events written without it have none
        out[_BACK.get(k, k)] = v
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out
