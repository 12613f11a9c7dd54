"""The heartbeat patch as the tests compare it: its wall-clock stamp checked, then dropped."""

from __future__ import annotations

from datetime import UTC, datetime

from eipctl.core.fields import Obj


def without_time(patch: Obj) -> Obj:
    """The patch without its lastHeartbeatTime, once checked to be this moment in RFC 3339."""
    status = dict(patch["status"])
    stamp = status.pop("lastHeartbeatTime")
    written = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert stamp.endswith("Z")
    assert abs((datetime.now(UTC) - written).total_seconds()) < 5
    return {**patch, "status": status}
