"""`OutageEvents`: tells operators that a node holds its addresses through an API outage, and
when the API is back (a log line per decision, an Event when it is over)."""

from __future__ import annotations

import structlog

from eipctl.core.fence import Justification
from eipctl.core.naming import API_VERSION
from eipctl.kube.events import EventRecorder, reference

log = structlog.get_logger(__name__)


class OutageEvents:
    """`ApiReachability`'s ``on_outage``: ``reason`` while holding, None once it is over."""

    def __init__(self, events: EventRecorder, node: str) -> None:
        self._events = events
        self._node = node

    def report(self, reason: Justification | None, seconds: float) -> None:
        node = self._node
        if reason is not None:
            log.warning("outage.hold", node=node, reason=reason.value, held_for=round(seconds, 3))
            return
        log.warning("outage.over", node=node, held_for=round(seconds, 3))
        involved = reference(API_VERSION, "IpNode", {"metadata": {"name": node}})
        self._events.emit(
            involved,
            "Normal",
            "ApiReturned",
            f"the API answers again after {seconds:.1f}s; {node} kept its addresses meanwhile",
        )
